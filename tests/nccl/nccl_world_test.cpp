// A dead peer must end the survivor with a clear error within the timeout (no hang): two worker
// processes (tests/nccl/ring_worker_main.cpp) share an NCCL id through a file; the second kills
// itself with SIGKILL after queuing forward ring step 1. The survivor must exit with a RingError
// naming its rank, the ring phase and what it waited for. Needs 2 GPUs (label nccl).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace {

int gpu_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

pid_t spawn(const std::string& rank, const std::string& id_file, const std::string& die_at,
            const std::string& timeout_s, const std::string& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string worker = NCCL_RING_WORKER;
    if (std::freopen(log.c_str(), "w", stderr) == nullptr) _exit(90);
    execl(worker.c_str(), worker.c_str(), rank.c_str(), "2", id_file.c_str(), die_at.c_str(), timeout_s.c_str(),
          static_cast<char*>(nullptr));
    _exit(91);
  }
  return pid;
}

/// Waits for `pid` until `deadline`; returns the wait status, or -1 after killing it on expiry.
int wait_until(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(NcclWorld, KilledPeerEndsTheSurvivorWithAClearError) {
  if (gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs, found " << gpu_count();
  const auto dir = std::filesystem::temp_directory_path() / ("sparsering_kill_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string id_file = (dir / "nccl.id").string();
  const double timeout_s = 10.0;
  const pid_t survivor = spawn("0", id_file, "-1", std::to_string(timeout_s), (dir / "rank0.log").string());
  const pid_t victim = spawn("1", id_file, "1", std::to_string(timeout_s), (dir / "rank1.log").string());
  // Generous hang guard: init + a small layer + the timeout, far below a hang.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s * 3 + 60.0));
  const int victim_status = wait_until(victim, deadline);
  const int survivor_status = wait_until(survivor, deadline);
  const std::string log = read_all((dir / "rank0.log").string());
  ASSERT_NE(victim_status, -1);
  EXPECT_TRUE(WIFSIGNALED(victim_status) && WTERMSIG(victim_status) == SIGKILL) << read_all((dir / "rank1.log").string());
  ASSERT_NE(survivor_status, -1) << "the survivor hung past the timeout; log:\n" << log;
  ASSERT_TRUE(WIFEXITED(survivor_status)) << log;
  EXPECT_EQ(WEXITSTATUS(survivor_status), 3) << log;
  EXPECT_NE(log.find("RingError: rank 0 (device 0)"), std::string::npos) << log;
  EXPECT_NE(log.find("waiting for"), std::string::npos) << log;
  EXPECT_NE(log.find("aborted its NCCL communicators"), std::string::npos) << log;
  EXPECT_TRUE(log.find("ring step") != std::string::npos || log.find("barrier") != std::string::npos) << log;
  std::filesystem::remove_all(dir);
}

}  // namespace
