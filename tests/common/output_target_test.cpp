// Output targets: absent or a regular file with --force; a device, FIFO, folder or a link to one
// is never replaced; a missing folder is named; folders that cannot be created are bad input.
#include "common/output_target.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.hpp"

namespace sparsering {
namespace {

namespace fs = std::filesystem;

class OutputTargetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparsering-target-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string message_of(const fs::path& path, bool overwrite) {
    try {
      check_output_target(path, overwrite);
    } catch (const InputError& e) {
      return e.what();
    }
    return "accepted";
  }
  fs::path dir_;
};

TEST_F(OutputTargetTest, AcceptsAbsentAndForcedRegularFiles) {
  EXPECT_EQ(message_of(dir_ / "new.json", false), "accepted");
  std::ofstream(dir_ / "old.json") << "x";
  EXPECT_NE(message_of(dir_ / "old.json", false).find("already exists; pass --force"), std::string::npos);
  EXPECT_EQ(message_of(dir_ / "old.json", true), "accepted");
  fs::create_symlink(dir_ / "nowhere", dir_ / "dangling");
  EXPECT_EQ(message_of(dir_ / "dangling", true), "accepted");
  EXPECT_NE(message_of(dir_ / "no-folder" / "x.json", true).find("does not exist"), std::string::npos);
}

TEST_F(OutputTargetTest, NeverReplacesNonRegularFiles) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  fs::create_symlink("/dev/null", dir_ / "null-link");
  fs::create_directories(dir_ / "folder");
  for (const bool overwrite : {false, true}) {
    EXPECT_NE(message_of("/dev/null", overwrite).find("a character device, not a regular file; refusing"), std::string::npos);
    EXPECT_NE(message_of(dir_ / "fifo", overwrite).find("a FIFO"), std::string::npos);
    EXPECT_NE(message_of(dir_ / "null-link", overwrite).find("through a symbolic link"), std::string::npos);
    EXPECT_NE(message_of(dir_ / "folder", overwrite).find("a folder"), std::string::npos);
  }
}

TEST_F(OutputTargetTest, FolderChecksAndCreation) {
  EXPECT_NO_THROW(check_output_folder(dir_));
  EXPECT_NO_THROW(check_output_folder(dir_ / "new"));
  std::ofstream(dir_ / "file") << "x";
  EXPECT_THROW(check_output_folder(dir_ / "file"), InputError);
  EXPECT_NO_THROW(create_output_folder(dir_ / "a" / "b"));
  EXPECT_TRUE(fs::is_directory(dir_ / "a" / "b"));
  try {
    create_output_folder(dir_ / "file" / "sub");
    ADD_FAILURE() << "created a folder under a file";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create output folder"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sparsering
