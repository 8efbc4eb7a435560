// AtomicOutputFile: outputs appear whole or not at all, and never replace a file unasked.
#include "common/atomic_file.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.hpp"

namespace sparsering {
namespace {

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sparsering-atomic-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(AtomicFileTest, WritesAndReadsBack) {
  write_file_atomically(dir_ / "a.txt", "hello", false);
  EXPECT_EQ(read_file(dir_ / "a.txt"), "hello");
}

TEST_F(AtomicFileTest, RefusesToOverwriteWithoutForce) {
  write_file_atomically(dir_ / "a.txt", "first", false);
  EXPECT_THROW(write_file_atomically(dir_ / "a.txt", "second", false), InputError);
  EXPECT_EQ(read_file(dir_ / "a.txt"), "first");
  write_file_atomically(dir_ / "a.txt", "second", true);
  EXPECT_EQ(read_file(dir_ / "a.txt"), "second");
}

TEST_F(AtomicFileTest, UncommittedFileLeavesNothingBehind) {
  {
    AtomicOutputFile file(dir_ / "b.txt", false);
    file.stream() << "partial";
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "b.txt"));
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

TEST_F(AtomicFileTest, MissingFolderIsAnInputError) {
  EXPECT_THROW(write_file_atomically(dir_ / "no" / "such" / "c.txt", "x", false), InputError);
}

TEST_F(AtomicFileTest, ReadingMissingFileOrFolderIsAnInputError) {
  EXPECT_THROW(read_file(dir_ / "missing"), InputError);
  EXPECT_THROW(read_file(dir_), InputError);
}

}  // namespace
}  // namespace sparsering
