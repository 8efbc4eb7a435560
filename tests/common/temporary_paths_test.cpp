// Temporaries: registered paths are removed by the SIGTERM / SIGINT handler, which then lets the
// signal end the process as usual; stale `<target>.tmp.<pid>` entries of dead processes are
// swept, those of live processes and look-alike names are kept.
#include "common/temporary_paths.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace sparsering {
namespace {

namespace fs = std::filesystem;

pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

class TemporaryPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparsering-temp-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(TemporaryPathsTest, NamesCarryThePid) {
  EXPECT_EQ(temporary_path_for("a/b.json").string(), "a/b.json.tmp." + std::to_string(::getpid()));
}

/// Forks a child that registers a file and a folder holding it, then receives `signal_number`.
void expect_signal_cleans(const fs::path& dir, int signal_number) {
  const fs::path folder = dir / "out.tmp.x";
  const fs::path file = folder / "result.json";
  const fs::path kept = dir / "unregistered";
  const pid_t pid = ::fork();
  if (pid == 0) {
    fs::create_directories(folder);
    std::ofstream(file) << "partial";
    std::ofstream(kept) << "kept";
    const TemporaryRegistration folder_registration(folder, TemporaryRegistration::Kind::folder);
    const TemporaryRegistration file_registration(file, TemporaryRegistration::Kind::file);
    TemporaryRegistration released(kept, TemporaryRegistration::Kind::file);
    released.release();
    ::raise(signal_number);
    ::_exit(3);  // not reached: the signal ends the process
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status)) << status;
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), signal_number);
  }
  EXPECT_FALSE(fs::exists(file));
  EXPECT_FALSE(fs::exists(folder));
  EXPECT_TRUE(fs::exists(kept));
}

TEST_F(TemporaryPathsTest, SigtermRemovesRegisteredPathsAndStillTerminates) { expect_signal_cleans(dir_, SIGTERM); }

TEST_F(TemporaryPathsTest, SigintRemovesRegisteredPaths) { expect_signal_cleans(dir_, SIGINT); }

TEST_F(TemporaryPathsTest, RegistrationsAreMovedAndReleased) {
  TemporaryRegistration a(dir_ / "x", TemporaryRegistration::Kind::file);
  EXPECT_TRUE(a.registered());
  TemporaryRegistration b = std::move(a);
  EXPECT_FALSE(a.registered());  // NOLINT(bugprone-use-after-move): moved-from state is specified
  EXPECT_TRUE(b.registered());
  b.release();
  EXPECT_FALSE(b.registered());
  // The table has room for many outputs at once and gives slots back.
  for (int round = 0; round < 3; ++round) {
    std::vector<TemporaryRegistration> many;
    for (int i = 0; i < 200; ++i) many.emplace_back(dir_ / std::to_string(i), TemporaryRegistration::Kind::file);
    for (const auto& r : many) EXPECT_TRUE(r.registered());
  }
}

TEST_F(TemporaryPathsTest, SweepsOnlyTemporariesOfDeadProcesses) {
  const fs::path target = dir_ / "trace.safetensors";
  const std::string dead = std::to_string(dead_pid());
  std::ofstream(dir_ / ("trace.safetensors.tmp." + dead)) << "stale";
  fs::create_directories(dir_ / ("trace.safetensors.tmp." + std::to_string(dead_pid())) / "inner");
  std::ofstream(dir_ / ("trace.safetensors.tmp." + std::to_string(::getppid()))) << "live parent";
  std::ofstream(dir_ / ("trace.safetensors.tmp." + std::to_string(::getpid()))) << "ours";
  std::ofstream(dir_ / ("trace.safetensors.tmp." + dead + "x")) << "not a pid";
  std::ofstream(dir_ / ("other.safetensors.tmp." + dead)) << "another target";
  EXPECT_EQ(remove_stale_temporaries(target), 2);
  EXPECT_FALSE(fs::exists(dir_ / ("trace.safetensors.tmp." + dead)));
  EXPECT_TRUE(fs::exists(dir_ / ("trace.safetensors.tmp." + std::to_string(::getppid()))));
  EXPECT_TRUE(fs::exists(dir_ / ("trace.safetensors.tmp." + std::to_string(::getpid()))));
  EXPECT_TRUE(fs::exists(dir_ / ("trace.safetensors.tmp." + dead + "x")));
  EXPECT_TRUE(fs::exists(dir_ / ("other.safetensors.tmp." + dead)));
  EXPECT_EQ(remove_stale_temporaries(dir_ / "missing-folder" / "x"), 0);
}

}  // namespace
}  // namespace sparsering
