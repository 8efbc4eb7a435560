// Hostile outputs of the built `sparsering` binary: --force never replaces a device, FIFO or a
// link to one; `trace synth` checks its output before synthesizing; a SIGTERM'd synth leaves no
// temporary; stale temporaries of dead processes are swept; `simulate --out` replaces its
// result.json / timeline.json pair together or not at all; an output folder that cannot be
// created is bad input (exit 2), not an internal error.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "tests/cli/cli_process.hpp"

namespace {

namespace fs = std::filesystem;
using sparsering::test::CliResult;
using sparsering::test::contains;
using sparsering::test::run_cli;
using sparsering::test::source_path;
using sparsering::test::spawn_cli;
using sparsering::test::wait_for;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// A pid that no process has: a child that already exited and was reaped.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  wait_for(pid);
  return pid;
}

class HostileOutputCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparsering_cli_hostile_out_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static std::string tiny() { return source_path("tests/traces/data/models/tiny.yaml"); }
  static std::string plan() { return source_path("tests/golden/data/qwen2.5-3b-32k-h200x2-striped.yaml"); }
  static std::string small_synth() { return "trace synth --model " + tiny() + " --seq-len 64 --vertical-slots 4 --slash-slots 4"; }

  fs::path dir_;
};

TEST_F(HostileOutputCli, ForceNeverReplacesADeviceFifoOrLinkToOne) {
  const std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_symlink("/dev/null", path("null-link"));
  for (const std::string& target : {std::string("/dev/null"), fifo, path("null-link")}) {
    const CliResult r = run_cli(small_synth() + " --out " + target + " --force");
    EXPECT_EQ(r.code, 2) << target << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "not a regular file; refusing to replace it")) << r.output;
  }
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_TRUE(fs::is_symlink(path("null-link")));
  // simulate: a FIFO where result.json would go.
  fs::create_directories(path("run"));
  ASSERT_EQ(::mkfifo(path("run/result.json").c_str(), 0600), 0);
  const CliResult sim = run_cli("simulate --plan " + plan() + " --out " + path("run") + " --force");
  EXPECT_EQ(sim.code, 2) << sim.output;
  EXPECT_TRUE(contains(sim.output, "result.json: it is a FIFO")) << sim.output;
  EXPECT_FALSE(fs::exists(path("run/timeline.json")));
  // A regular file is still replaced with --force.
  std::ofstream(path("old.safetensors")) << "old";
  EXPECT_EQ(run_cli(small_synth() + " --out " + path("old.safetensors") + " --force").code, 0);
  EXPECT_NE(read_text(path("old.safetensors")), "old");
}

TEST_F(HostileOutputCli, SynthChecksItsOutputBeforeWorking) {
  // A length that takes seconds to synthesize: a refusal must come at once.
  const std::string slow = "trace synth --model " + tiny() + " --seq-len 1M --vertical-slots 1048576 --slash-slots 1048576";
  // The synthesis would outlast the 5 s timeout (exit 124): exit 2 means it was refused first.
  CliResult r = run_cli(slow + " --out " + path("missing/t.safetensors"), 5);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "does not exist")) << r.output;
  std::ofstream(path("exists.safetensors")) << "x";
  r = run_cli(slow + " --out " + path("exists.safetensors"), 5);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "already exists; pass --force")) << r.output;
}

TEST_F(HostileOutputCli, StaleTemporariesOfDeadProcessesAreRemoved) {
  const std::string out = path("t.safetensors");
  const std::string stale_file = out + ".tmp." + std::to_string(dead_pid());
  std::ofstream(stale_file) << "left by a killed run";
  const std::string live = out + ".tmp." + std::to_string(::getpid());  // this test is alive
  std::ofstream(live) << "someone else's write in progress";
  ASSERT_EQ(run_cli(small_synth() + " --out " + out).code, 0);
  EXPECT_FALSE(fs::exists(stale_file));
  EXPECT_TRUE(fs::exists(live));
  // The same for a simulate bundle's temporary folder.
  const std::string run_dir = path("run");
  const fs::path stale_folder = run_dir + ".tmp." + std::to_string(dead_pid());
  fs::create_directories(stale_folder);
  std::ofstream(stale_folder / "result.json") << "half";
  ASSERT_EQ(run_cli("simulate --plan " + plan() + " --out " + run_dir).code, 0);
  EXPECT_FALSE(fs::exists(stale_folder));
}

TEST_F(HostileOutputCli, TerminatedSynthLeavesNoTemporary) {
  const std::string out = path("big.safetensors");
  // About 130 MB: writing it takes long enough to be caught in the act.
  const pid_t pid = spawn_cli({"trace", "synth", "--model", tiny(), "--seq-len", "1M", "--vertical-slots", "1048576",
                               "--slash-slots", "1048576", "--out", out},
                              path("log"));
  ASSERT_GT(pid, 0);
  const fs::path temp = out + ".tmp." + std::to_string(pid);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  bool seen = false;
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(temp)) {
      seen = true;
      break;
    }
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) FAIL() << "synth ended before its temporary was seen: " << read_text(path("log"));
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  const int status = wait_for(pid);
  ASSERT_TRUE(seen) << "no temporary appeared";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "status " << status << ": " << read_text(path("log"));
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(HostileOutputCli, SimulateBundleIsAtomicWhenAWriteFails) {
  const std::string run_dir = path("run");
  ASSERT_EQ(run_cli("simulate --plan " + plan() + " --out " + run_dir).code, 0);
  const std::string result = read_text(fs::path(run_dir) / "result.json");
  const std::string timeline = read_text(fs::path(run_dir) / "timeline.json");
  // Old outputs that must survive a failed --force run unchanged.
  std::ofstream(fs::path(run_dir) / "result.json") << "old result";
  std::ofstream(fs::path(run_dir) / "timeline.json") << "old timeline";
  // result.json is written first and is the smaller: a file size limit between the two lets it
  // be written and makes timeline.json fail.
  ASSERT_LT(result.size(), timeline.size());
  const long long limit = static_cast<long long>((result.size() + timeline.size()) / 2);
  const pid_t pid = spawn_cli({"simulate", "--plan", plan(), "--out", run_dir, "--force"}, path("log"), limit);
  const int status = wait_for(pid);
  const std::string log = read_text(path("log"));
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 2) << log;
  EXPECT_TRUE(contains(log, "timeline.json failed")) << log;
  EXPECT_EQ(read_text(fs::path(run_dir) / "result.json"), "old result");
  EXPECT_EQ(read_text(fs::path(run_dir) / "timeline.json"), "old timeline");
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  }
}

TEST_F(HostileOutputCli, OutputFolderThatCannotBeCreatedIsBadInput) {
  std::ofstream(path("a_file")) << "x";
  const CliResult sim = run_cli("simulate --plan " + plan() + " --out " + path("a_file/sub"));
  EXPECT_EQ(sim.code, 2) << sim.output;
  EXPECT_TRUE(contains(sim.output, "a_file/sub")) << sim.output;
  EXPECT_FALSE(contains(sim.output, "internal error")) << sim.output;
  const CliResult tune = run_cli("tune --model " + source_path("configs/models/qwen2.5-3b.yaml") + " --cluster " + source_path("configs/clusters/h200-2x-nvlink.yaml") + " --trace " +
                                 source_path("traces/samples/qwen2.5-3b-32k.safetensors") +
                                 " --seq-len 32K --top 2 --out " + path("a_file/sub/plan.yaml"));
  EXPECT_EQ(tune.code, 2) << tune.output;
  EXPECT_TRUE(contains(tune.output, "a_file/sub")) << tune.output;
  EXPECT_FALSE(contains(tune.output, "internal error")) << tune.output;
}

}  // namespace
