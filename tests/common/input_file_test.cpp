// read_file / InputFile: regular files are read whole; folders, FIFOs and devices are refused
// at once (a FIFO without a writer must not block), and files over the cap are refused before
// any byte is read.
#include "common/input_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "common/error.hpp"

namespace sparsering {
namespace {

namespace fs = std::filesystem;

class InputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparsering-input-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// The message of the InputError `read` throws, and that it came within `seconds`.
  template <typename Read>
  std::string refusal(Read read, double seconds = 1.0) {
    const auto start = std::chrono::steady_clock::now();
    try {
      read();
    } catch (const InputError& e) {
      EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), seconds);
      return e.what();
    }
    ADD_FAILURE() << "no InputError";
    return {};
  }

  fs::path dir_;
};

TEST_F(InputFileTest, ReadsARegularFileWhole) {
  std::ofstream(dir_ / "a.yaml", std::ios::binary) << std::string("name: a\n\0tail", 13);
  EXPECT_EQ(read_file(dir_ / "a.yaml"), std::string("name: a\n\0tail", 13));
  std::ofstream(dir_ / "empty.yaml");
  EXPECT_EQ(read_file(dir_ / "empty.yaml"), "");
  // Through a symbolic link to a regular file.
  fs::create_symlink(dir_ / "a.yaml", dir_ / "link.yaml");
  EXPECT_EQ(read_file(dir_ / "link.yaml").size(), 13U);
}

TEST_F(InputFileTest, RefusesDevZeroAtOnce) {
  const std::string message = refusal([] { (void)read_file("/dev/zero"); });
  EXPECT_NE(message.find("/dev/zero: it is a character device, not a regular file"), std::string::npos) << message;
}

TEST_F(InputFileTest, RefusesAFifoWithoutBlocking) {
  const fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string message = refusal([&] { (void)read_file(fifo); });
  EXPECT_NE(message.find("it is a FIFO"), std::string::npos) << message;
  EXPECT_NE(message.find(fifo.string()), std::string::npos) << message;
  // A link to the FIFO is judged by what it points at.
  fs::create_symlink(fifo, dir_ / "fifo-link");
  EXPECT_NE(refusal([&] { (void)read_file(dir_ / "fifo-link"); }).find("FIFO"), std::string::npos);
}

TEST_F(InputFileTest, RefusesFoldersAndMissingFiles) {
  EXPECT_NE(refusal([&] { (void)read_file(dir_); }).find("it is a folder"), std::string::npos);
  const std::string missing = refusal([&] { (void)read_file(dir_ / "nope.yaml"); });
  EXPECT_NE(missing.find("nope.yaml"), std::string::npos) << missing;
  EXPECT_NE(missing.find("No such file"), std::string::npos) << missing;
}

TEST_F(InputFileTest, RefusesFilesOverTheCapBeforeReading) {
  std::ofstream(dir_ / "big.yaml") << std::string(1000, 'x');
  EXPECT_EQ(read_file(dir_ / "big.yaml", 1000).size(), 1000U);
  const std::string message = refusal([&] { (void)read_file(dir_ / "big.yaml", 999); });
  EXPECT_NE(message.find("holds 1000 bytes, more than the 999 bytes allowed"), std::string::npos) << message;
  // A sparse 1 GiB file is refused by size, not read.
  {
    std::ofstream huge(dir_ / "huge.yaml");
    huge.seekp((std::streamoff{1} << 30) - 1);
    huge << 'x';
  }
  EXPECT_NE(refusal([&] { (void)read_file(dir_ / "huge.yaml"); }, 0.5).find("more than the"), std::string::npos);
}

TEST_F(InputFileTest, RequireRegularFileForOtherReaders) {
  std::ofstream(dir_ / "t.safetensors") << "x";
  EXPECT_NO_THROW(require_regular_file(dir_ / "t.safetensors"));
  EXPECT_THROW(require_regular_file("/dev/zero"), InputError);
  EXPECT_THROW(require_regular_file(dir_), InputError);
}

}  // namespace
}  // namespace sparsering
