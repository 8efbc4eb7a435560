// Output bundles: all files appear together; refusals come before anything is written; a failure
// while writing leaves existing outputs and no temporary folder behind.
#include "common/output_bundle.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "common/error.hpp"

namespace sparsering {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class OutputBundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparsering-bundle-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  size_t entries() const { return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), {})); }
  fs::path dir_;
};

TEST_F(OutputBundleTest, WritesAllFilesIntoANewFolder) {
  OutputBundle bundle(dir_ / "run/", {"a.json", "b.json"}, false);
  bundle.write("a.json", "A");
  bundle.write("b.json", "B");
  EXPECT_FALSE(fs::exists(dir_ / "run" / "a.json")) << "nothing appears before commit";
  const auto done = bundle.commit();
  ASSERT_EQ(done.size(), 2U);
  EXPECT_EQ(read_text(dir_ / "run" / "a.json"), "A");
  EXPECT_EQ(read_text(dir_ / "run" / "b.json"), "B");
  EXPECT_EQ(entries(), 1U) << "the temporary folder is gone";
}

TEST_F(OutputBundleTest, FilesInSubfoldersAndPathsThatLeaveTheFolder) {
  OutputBundle bundle(dir_ / "run", {"sub/deeper/a.json", "b.json"}, false);
  bundle.write("sub/deeper/a.json", "A");
  bundle.write("b.json", "B");
  bundle.commit();
  EXPECT_EQ(read_text(dir_ / "run" / "sub" / "deeper" / "a.json"), "A");
  EXPECT_EQ(entries(), 1U) << "the temporary folder is gone";
  for (const char* bad : {"../x.json", "/abs.json", "a/./b.json", "sub/", ""}) {
    EXPECT_THROW(OutputBundle(dir_ / "other", {bad}, true), InputError) << bad;
  }
}

TEST_F(OutputBundleTest, RefusesBeforeWritingAnything) {
  fs::create_directories(dir_ / "run");
  std::ofstream(dir_ / "run" / "b.json") << "old";
  EXPECT_THROW(OutputBundle(dir_ / "run", {"a.json", "b.json"}, false), InputError);
  ASSERT_EQ(::mkfifo((dir_ / "run" / "a.json").c_str(), 0600), 0);
  EXPECT_THROW(OutputBundle(dir_ / "run", {"a.json", "b.json"}, true), InputError);
  std::ofstream(dir_ / "file") << "x";
  EXPECT_THROW(OutputBundle(dir_ / "file", {"a.json"}, true), InputError);
  EXPECT_EQ(entries(), 2U);
}

TEST_F(OutputBundleTest, AFailureMidwayChangesNothing) {
  fs::create_directories(dir_ / "run");
  std::ofstream(dir_ / "run" / "a.json") << "old a";
  std::ofstream(dir_ / "run" / "b.json") << "old b";
  try {
    OutputBundle bundle(dir_ / "run", {"a.json", "b.json"}, true);
    bundle.write("a.json", "new a");
    throw std::runtime_error("the second document failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(read_text(dir_ / "run" / "a.json"), "old a");
  EXPECT_EQ(read_text(dir_ / "run" / "b.json"), "old b");
  EXPECT_EQ(entries(), 1U) << "no temporary folder left";
}

TEST_F(OutputBundleTest, ReplacesWithForceAndCommitsOnlyWrittenFiles) {
  fs::create_directories(dir_ / "plans");
  std::ofstream(dir_ / "plans" / "best.yaml") << "old";
  OutputBundle bundle(dir_ / "plans", {"best.yaml", "best-1.yaml", "best-2.yaml"}, true, dir_ / "plans" / "best.yaml");
  bundle.write("best.yaml", "new");
  bundle.write("best-1.yaml", "one");
  EXPECT_TRUE(fs::is_directory(dir_ / "plans" / ("best.yaml.tmp." + std::to_string(::getpid()))));
  const auto done = bundle.commit();
  EXPECT_EQ(done.size(), 2U);
  EXPECT_EQ(read_text(dir_ / "plans" / "best.yaml"), "new");
  EXPECT_FALSE(fs::exists(dir_ / "plans" / "best-2.yaml"));
  EXPECT_EQ(static_cast<size_t>(std::distance(fs::directory_iterator(dir_ / "plans"), {})), 2U);
}

TEST_F(OutputBundleTest, FolderThatCannotBeCreatedIsBadInput) {
  std::ofstream(dir_ / "file") << "x";
  // Refused when planned (the path runs through a file) or at the latest when first written.
  EXPECT_THROW(
      {
        OutputBundle bundle(dir_ / "file" / "sub", {"a.json"}, false);
        bundle.write("a.json", "A");
      },
      InputError);
}

}  // namespace
}  // namespace sparsering
