// Hostile input to the built `sparsering` binary: special files (/dev/zero, a FIFO, a folder)
// named as a config, prior, plan, durations or trace are refused with exit 2 at once (a run that
// hangs is ended by `timeout` and fails); terminal escapes and invalid UTF-8 typed as arguments or stored in a config reach the terminal
// escaped. Randomised cases print their seed and take SPARSERING_TEST_SEED.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "tests/cli/cli_process.hpp"

namespace {

namespace fs = std::filesystem;
using sparsering::test::CliResult;
using sparsering::test::contains;
using sparsering::test::run_cli;
using sparsering::test::source_path;

class HostileInputCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparsering_cli_hostile_in_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fifo_ = (dir_ / "fifo").string();
    ASSERT_EQ(::mkfifo(fifo_.c_str(), 0600), 0);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static std::string model() { return source_path("configs/models/qwen2.5-3b.yaml"); }
  static std::string plan() { return source_path("tests/golden/data/qwen2.5-3b-32k-h200x2-striped.yaml"); }
  static std::string sample() { return source_path("traces/samples/qwen2.5-3b-32k.safetensors"); }

  /// Runs the command, which must be refused at once: exit 2 naming `part` (a run that hangs is
  /// ended by `timeout` and fails with 124).
  void expect_refused_fast(const std::string& what, const std::string& args, const std::string& part) {
    const CliResult r = run_cli(args, 5);
    EXPECT_EQ(r.code, 2) << what << ": " << r.output;
    EXPECT_TRUE(contains(r.output, part)) << what << ": expected '" << part << "' in: " << r.output;
  }

  fs::path dir_;
  std::string fifo_;
};

TEST_F(HostileInputCli, DevZeroIsRefusedWithinASecond) {
  const std::string out = " --out " + path("t.safetensors");
  expect_refused_fast("model", "trace synth --model /dev/zero --seq-len 32K" + out, "/dev/zero: it is a character device");
  expect_refused_fast("prior", "trace synth --model " + model() + " --prior /dev/zero --seq-len 32K" + out,
                      "/dev/zero: it is a character device");
  expect_refused_fast("plan", "simulate --plan /dev/zero", "/dev/zero: it is a character device");
  expect_refused_fast("trace", "simulate --plan " + plan() + " --trace /dev/zero", "/dev/zero");
  expect_refused_fast("trace info", "trace info /dev/zero", "/dev/zero");
  expect_refused_fast("tune model",
                      "tune --model /dev/zero --cluster " + source_path("configs/clusters/h200-2x-nvlink.yaml") + " --trace " + sample() + " --seq-len 32K",
                      "/dev/zero: it is a character device");
  expect_refused_fast("durations",
                      "export " + plan() + " --to chakra --durations /dev/zero --out " + path("chakra"),
                      "/dev/zero: it is a character device");
}

TEST_F(HostileInputCli, FifoNeverBlocks) {
  const std::string out = " --out " + path("t.safetensors");
  const std::string kind = "it is a FIFO";
  expect_refused_fast("model", "trace synth --model " + fifo_ + " --seq-len 32K" + out, kind);
  expect_refused_fast("prior", "trace synth --model " + model() + " --prior " + fifo_ + " --seq-len 32K" + out, kind);
  expect_refused_fast("plan", "simulate --plan " + fifo_, kind);
  expect_refused_fast("trace", "simulate --plan " + plan() + " --trace " + fifo_, kind);
  expect_refused_fast("trace info", "trace info " + fifo_, kind);
  expect_refused_fast("tune trace",
                      "tune --model " + source_path("configs/models/qwen2.5-3b.yaml") + " --cluster " + source_path("configs/clusters/h200-2x-nvlink.yaml") + " --trace " + fifo_ + " --seq-len 32K", kind);
  expect_refused_fast("durations", "export " + plan() + " --to chakra --durations " + fifo_ + " --out " + path("c"), kind);
  expect_refused_fast("folder as plan", "simulate --plan " + dir_.string(), "it is a folder");
}

TEST_F(HostileInputCli, EscapesInArgumentsAreEscapedInMessages) {
  // A missing file whose name holds a terminal escape, invalid UTF-8 and a C1 control.
  const CliResult r = run_cli("simulate --plan \"$(printf 'evil\\033[2J\\377\\302\\233name')\"");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(r.output.find('\033'), std::string::npos) << r.output;
  EXPECT_TRUE(contains(r.output, "evil\\x1B[2J\\xFF\\u{9B}name")) << r.output;
  // CLI11's own messages quote arguments too.
  const CliResult extra = run_cli("simulate --plan x \"$(printf '\\033]0;title\\007')\"");
  EXPECT_EQ(extra.code, 2) << extra.output;
  EXPECT_EQ(extra.output.find('\033'), std::string::npos) << extra.output;
  EXPECT_EQ(extra.output.find('\007'), std::string::npos) << extra.output;
}

TEST_F(HostileInputCli, NameWithEscapesInAPlanIsPrintedEscaped) {
  std::ifstream in(plan());
  std::string text((std::istreambuf_iterator<char>(in)), {});
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"../../../configs/models/qwen2.5-3b.yaml", model()},
           {"../../../configs/clusters/h200-2x-nvlink.yaml", source_path("configs/clusters/h200-2x-nvlink.yaml")},
           {"../../../traces/samples/qwen2.5-3b-32k.safetensors", sample()},
           {"name: qwen2.5-3b-32k-h200x2-striped", "name: \"evil\\e[31m\\x9b\""}}) {
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  }
  std::ofstream(path("evil.yaml")) << text;
  const CliResult r = run_cli("simulate --plan " + path("evil.yaml"));
  // Either refused at parsing (exit 2) or accepted and printed escaped: never a raw escape.
  EXPECT_TRUE(r.code == 0 || r.code == 2) << r.output;
  EXPECT_EQ(r.output.find('\033'), std::string::npos) << r.output;
  if (r.code == 0) {
    EXPECT_TRUE(contains(r.output, "evil\\x1B[31m")) << r.output;
  }
  // JSON output stays valid whatever bytes the name holds.
  const CliResult json = run_cli("simulate --format json --plan " + path("evil.yaml"));
  EXPECT_TRUE(json.code == 0 || json.code == 2) << json.output;
}

TEST_F(HostileInputCli, RandomBytesAsAPlanExitTwoNeverCrash) {
  unsigned seed = std::random_device{}();
  if (const char* fixed = std::getenv("SPARSERING_TEST_SEED")) seed = static_cast<unsigned>(std::strtoul(fixed, nullptr, 10));
  std::cout << "seed " << seed << " (set SPARSERING_TEST_SEED to repeat)\n";
  std::mt19937 rng(seed);
  for (int round = 0; round < 8; ++round) {
    std::string bytes(static_cast<size_t>(rng() % 512), '\0');
    for (char& c : bytes) c = static_cast<char>(rng() & 0xFF);
    std::ofstream(path("random.yaml"), std::ios::binary) << bytes;
    const CliResult r = run_cli("simulate --plan " + path("random.yaml"), 5);
    EXPECT_EQ(r.code, 2) << "seed " << seed << " round " << round << ": " << r.output;
    EXPECT_EQ(r.output.find('\033'), std::string::npos) << "seed " << seed << " round " << round;
  }
}

}  // namespace
