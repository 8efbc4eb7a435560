// ExportBundle: file names, NOTES.md, and the folder writer (refuses to overwrite, writes nothing
// when it refuses, creates subfolders, overwrites with force).
#include "tuner/export/export_bundle.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "common/atomic_file.hpp"
#include "export_test_util.hpp"

namespace sparsering {
namespace {

std::filesystem::path fresh_dir(const std::string& name) {
  std::random_device device;
  const auto dir = std::filesystem::temp_directory_path() / ("sparsering_bundle_" + name + "_" + std::to_string(device()));
  std::filesystem::remove_all(dir);
  return dir;
}

ExportBundle sample_bundle() {
  ExportBundle bundle;
  bundle.target = "megatron";
  bundle.plan_name = "p";
  bundle.add_file("a.txt", "alpha\n");
  bundle.add_file("sub/b.bin", std::string("\0\1\2", 3));
  return bundle;
}

TEST(ExportBundle, RejectsBadFileNames) {
  ExportBundle bundle;
  test::expect_input_error([&] { bundle.add_file("", "x"); }, {"empty"});
  test::expect_input_error([&] { bundle.add_file("/etc/passwd", "x"); }, {"relative"});
  test::expect_input_error([&] { bundle.add_file("a/../../b", "x"); }, {".."});
  bundle.add_file("a", "x");
  test::expect_input_error([&] { bundle.add_file("a", "y"); }, {"twice"});
  test::expect_input_error([&] { bundle.add_file("NOTES.md", "y"); }, {"twice"});
}

TEST(ExportBundle, NotesListLossesNotesAndFiles) {
  ExportBundle bundle = sample_bundle();
  EXPECT_NE(render_notes(bundle).find("Nothing: the exported configuration reproduces the plan exactly"),
            std::string::npos);
  bundle.lost.push_back("the ring order");
  bundle.notes.push_back("launch 8 processes");
  const std::string notes = render_notes(bundle);
  EXPECT_EQ(notes.find("Nothing:"), std::string::npos);
  EXPECT_NE(notes.find("- the ring order\n"), std::string::npos);
  EXPECT_NE(notes.find("- launch 8 processes\n"), std::string::npos);
  EXPECT_NE(notes.find("- sub/b.bin\n"), std::string::npos);
  EXPECT_FALSE(bundle.exact());
}

TEST(ExportBundle, WritesFilesAndRefusesToOverwrite) {
  const auto dir = fresh_dir("write");
  const ExportBundle bundle = sample_bundle();
  const auto written = write_export_bundle(bundle, dir, false);
  ASSERT_EQ(written.size(), 3u);
  EXPECT_EQ(read_file(dir / "a.txt"), "alpha\n");
  EXPECT_EQ(read_file(dir / "sub" / "b.bin"), std::string("\0\1\2", 3));
  EXPECT_EQ(read_file(dir / "NOTES.md"), render_notes(bundle));

  // A second export without force is refused before anything is written.
  ExportBundle other;
  other.target = "te";
  other.add_file("new.txt", "new\n");
  other.add_file("a.txt", "changed\n");
  test::expect_input_error([&] { write_export_bundle(other, dir, false); }, {"already exists", "--force"});
  EXPECT_FALSE(std::filesystem::exists(dir / "new.txt"));
  EXPECT_EQ(read_file(dir / "a.txt"), "alpha\n");

  write_export_bundle(other, dir, true);
  EXPECT_EQ(read_file(dir / "a.txt"), "changed\n");
  EXPECT_EQ(read_file(dir / "new.txt"), "new\n");
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos) << "temporary file left: " << entry.path();
  }
  std::filesystem::remove_all(dir);
}

TEST(ExportBundle, RefusesAFileAsOutputFolder) {
  const auto dir = fresh_dir("file");
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "plain") << "x";
  test::expect_input_error([&] { write_export_bundle(sample_bundle(), dir / "plain", true); }, {"not a folder"});
  std::filesystem::remove_all(dir);
}

TEST(ExportBundle, ANewFolderAppearsWholeAndNonRegularTargetsAreRefused) {
  const auto dir = fresh_dir("whole");
  // The folder does not exist: it is written beside itself and renamed into place, no temporary left.
  write_export_bundle(sample_bundle(), dir / "out", false);
  EXPECT_EQ(read_file(dir / "out" / "a.txt"), "alpha\n");
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename(), "out") << "left beside the export: " << entry.path();
  }
  // A FIFO where a file goes is never replaced, even with --force; nothing else is written.
  const auto fifo_dir = dir / "fifo";
  std::filesystem::create_directories(fifo_dir);
  ASSERT_EQ(::mkfifo((fifo_dir / "a.txt").c_str(), 0600), 0);
  test::expect_input_error([&] { write_export_bundle(sample_bundle(), fifo_dir, true); }, {"a.txt", "not a regular file"});
  EXPECT_FALSE(std::filesystem::exists(fifo_dir / "NOTES.md"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sparsering
