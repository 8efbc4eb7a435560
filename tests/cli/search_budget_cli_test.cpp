// The budgets of `sparsering tune` (tuner/search/search_budget.hpp, docs/robustness.md section 2)
// through the built binary: clusters at the schema limits are refused with exit 2 before the plan
// space is enumerated, naming the estimate, the budget and the flag; a space whose simulations
// would not fit names --max-ring-simulated; a space over --max-candidates and --top beyond the
// plan files one bundle writes are refused; a search that passes its estimate but runs past
// --max-search-seconds is stopped with exit 2 and writes nothing; and a normal search's peak
// memory stays within its estimate.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/cli/cli_process.hpp"

namespace sparsering::test {
namespace {

namespace fs = std::filesystem;

/// The run ended with exit 2 and its output names every one of `parts`.
void expect_refused(const CliResult& r, const std::vector<std::string>& parts) {
  EXPECT_EQ(r.code, 2) << r.output;
  for (const std::string& part : parts) EXPECT_TRUE(contains(r.output, part)) << "no '" << part << "' in: " << r.output;
}

class SearchBudgetCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparsering_cli_search_budget_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  /// A trace of the tiny test model at 64K tokens (4 candidate slots: a few KiB).
  std::string tiny_trace() {
    const std::string out = path("tiny-64k.safetensors");
    const CliResult r = run_cli("trace synth --model " + tiny_model() + " --seq-len 64K --vertical-slots 4 --slash-slots 4 --out " + out, 30);
    EXPECT_EQ(r.code, 0) << r.output;
    return out;
  }
  static std::string tiny_model() { return source_path("tests/traces/data/models/tiny.yaml"); }
  /// `tune` of the tiny model at 64K tokens on tests/cli/data/<cluster>.yaml (head dim 64, which
  /// the H200's calibration does not list: its costs are extrapolated).
  std::string tiny_tune(const std::string& cluster) {
    return "tune --model " + tiny_model() + " --cluster " + source_path("tests/cli/data/" + cluster + ".yaml") +
           " --trace " + tiny_trace() + " --seq-len 64K --allow-extrapolated-shapes";
  }
  /// `tune` of Qwen2.5-3B at 32K on the 32 A100 of the MTraining cluster, with the bundled trace.
  static std::string qwen_tune() {
    return "tune --model " + source_path("configs/models/qwen2.5-3b.yaml") + " --cluster " +
           source_path("configs/clusters/mtraining-4x8-a100.yaml") + " --trace " +
           source_path("traces/samples/qwen2.5-3b-32k.safetensors") + " --seq-len 32K";
  }

  fs::path dir_;
};

TEST_F(SearchBudgetCli, SchemaLimitClusterRefusedBeforeEnumerating) {
  // 2^26 GPUs: one ring order per set of degrees is already 24 GiB; the time bound is hours.
  const std::string tune = tiny_tune("schema-limit-cluster");
  expect_refused(run_cli("--max-memory-gib 16 " + tune, 5),
                 {"enumerating the plan space", "over the budget of 16.00 GiB (--max-memory-gib)", "ring orders"});
  expect_refused(run_cli("--max-memory-gib 100000 " + tune, 5),
                 {"enumerating the plan space", "over the time budget of 300 s (--max-search-seconds)"});
}

TEST_F(SearchBudgetCli, RingOfTwoToTheTwentyGpusRefused) {
  expect_refused(run_cli("--max-memory-gib 100000 " + tiny_tune("huge-ring-cluster"), 5),
                 {"--max-search-seconds", "step-bound collectives"});
}

TEST_F(SearchBudgetCli, SimulationsThatDoNotFitNameTheRingLimit) {
  // 1024 GPUs: the search may simulate a flat ring of all of them (W x W = a million cells).
  expect_refused(run_cli("--max-memory-gib 0.25 " + tiny_tune("rack-1024-cluster"), 30),
                 {"simulations in flight", "--max-ring-simulated"});
}

TEST_F(SearchBudgetCli, TinyTimeBudgetStopsBeforeAnyResult) {
  // Either the estimate exceeds 1 us or the time limit fires first: exit 2 naming the flag.
  const CliResult r = run_cli(qwen_tune() + " --max-search-seconds 0.000001", 30);
  expect_refused(r, {"(--max-search-seconds)"});
  EXPECT_FALSE(contains(r.output, "sparsering tune:")) << "the search ran: " << r.output;
}

TEST_F(SearchBudgetCli, SpaceOverTheCandidateLimitRefused) {
  expect_refused(run_cli(qwen_tune() + " --max-candidates 100", 30), {"more than 100 candidates (--max-candidates)"});
  expect_refused(run_cli(qwen_tune() + " --max-candidates 0", 30), {"--max-candidates must be >= 1"});
  for (const char* bad : {"--max-search-seconds 0", "--max-search-seconds -1"}) {
    expect_refused(run_cli(qwen_tune() + " " + bad, 30), {"--max-search-seconds must be > 0"});
  }
}

TEST_F(SearchBudgetCli, TopBeyondOneBundleOfPlanFilesRefused) {
  expect_refused(run_cli(qwen_tune() + " --top 100000000 --out " + path("plan.yaml"), 30), {"--top 100000000 with --out"});
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(SearchBudgetCli, SearchPastTheTimeBudgetStopsAndWritesNothing) {
  // Brute force simulates all 20 856 candidates (minutes); the estimate counts no simulation, so
  // the search starts and the time limit ends it.
  expect_refused(run_cli(qwen_tune() + " --brute-force --max-search-seconds 1 --out " + path("plan.yaml"), 60),
                 {"over the time budget of 1 s (--max-search-seconds)", "nothing was written"});
  EXPECT_TRUE(fs::is_empty(dir_)) << "an output or temporary was left in " << dir_;
}

TEST_F(SearchBudgetCli, PeakMemoryStaysWithinTheEstimate) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's shadow memory and quarantine are not part of the estimate";
#endif
  const MeasuredRun run = run_cli_measured(
      {"-v", "tune", "--model", source_path("configs/models/qwen2.5-3b.yaml"), "--cluster",
       source_path("configs/clusters/mtraining-4x8-a100.yaml"), "--trace",
       source_path("traces/samples/qwen2.5-3b-32k.safetensors"), "--seq-len", "32K"},
      path("log"));
  ASSERT_EQ(run.code, 0) << run.output;
  const size_t at = run.output.find("candidates, about ");
  ASSERT_NE(at, std::string::npos) << run.output;
  const double estimate_gib = std::stod(run.output.substr(at + 18));
  const double peak_gib = run.peak_gib;
  EXPECT_GT(peak_gib, 0.0);
  EXPECT_LE(peak_gib, estimate_gib) << "estimate " << estimate_gib << " GiB, peak " << peak_gib << " GiB";
}

}  // namespace
}  // namespace sparsering::test
