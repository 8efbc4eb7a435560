// AtomicOutputFile: outputs appear whole or not at all, never replace a file unasked, never
// replace a device or FIFO even when asked, and sweep stale temporaries of dead processes.
#include "common/atomic_file.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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

TEST_F(AtomicFileTest, NeverReplacesAFifoOrDevice) {
  const auto fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THROW(write_file_atomically(fifo, "x", true), InputError);
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  EXPECT_THROW(AtomicOutputFile("/dev/null", true), InputError);
}

TEST_F(AtomicFileTest, SweepsStaleTemporariesAndRegistersItsOwn) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  const auto stale = dir_ / ("d.txt.tmp." + std::to_string(child));
  std::ofstream(stale) << "left by a killed writer";
  AtomicOutputFile file(dir_ / "d.txt", false);
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_EQ(file.temporary_path(), temporary_path_for(dir_ / "d.txt"));
  EXPECT_TRUE(std::filesystem::exists(file.temporary_path()));
  file.stream() << "done";
  file.commit();
  EXPECT_EQ(read_file(dir_ / "d.txt"), "done");
  EXPECT_FALSE(std::filesystem::exists(file.temporary_path()));
}

}  // namespace
}  // namespace sparsering
