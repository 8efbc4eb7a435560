// Memory budget of `sparsering simulate` and `sparsering trace synth` (--max-memory-gib,
// docs/robustness.md section 2): plans within the schema limits whose estimate
// exceeds the budget are refused with exit 2 before any work, a per-token plan that used to be
// materialised now runs in bounded memory, a normal plan is unaffected, and the estimate is within
// a factor of two of the measured peak on one moderate plan; a synthesis beyond the budget is
// refused before it allocates or writes anything, and its estimate is within a factor of two of
// the measured peak.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cli/cli_process.hpp"

namespace sparsering::test {
namespace {

std::string plan(const std::string& name) { return source_path("tests/cli/data/" + name + ".yaml"); }

TEST(ResourceBudgetCli, TwoToTheFortyTokensRefusedNamingTheBudget) {
  const CliResult r = run_cli("simulate --plan " + plan("dense-2p40-tokens"), 60);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "--max-memory-gib")) << r.output;
  EXPECT_TRUE(contains(r.output, "work counting scratch")) << r.output;
}

TEST(ResourceBudgetCli, RingOfTwoToTheTwentyRanksRefused) {
  const CliResult r = run_cli("simulate --plan " + plan("ring-2p20-ranks"), 60);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "--max-memory-gib")) << r.output;
  EXPECT_TRUE(contains(r.output, "W x W")) << r.output;
}

TEST(ResourceBudgetCli, PerTokenPlansRefusedUnderASmallBudget) {
  // Dense 2^30 tokens (once 24 bytes per token) and 2^31 tokens in 1-token stripes now need well
  // under 2 GiB; a budget below their estimate refuses them before any work.
  for (const char* name : {"dense-billion-tokens", "striped-one-token"}) {
    const CliResult r = run_cli("--max-memory-gib 0.25 simulate --plan " + plan(name), 60);
    EXPECT_EQ(r.code, 2) << name << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "--max-memory-gib")) << r.output;
  }
}

TEST(ResourceBudgetCli, NormalPlanUnaffected) {
  const CliResult r =
      run_cli("simulate --format json --plan " + source_path("tests/golden/data/qwen2.5-3b-32k-h200x2-striped.yaml"), 120);
  EXPECT_EQ(r.code, 0) << r.output;
}

TEST(ResourceBudgetCli, EstimateWithinFactorTwoOfMeasuredPeak) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's shadow memory and quarantine are not part of the estimate";
#endif
  // The dense 2^30-token plan: its peak is the work counting scratch the estimate models. The
  // estimate is read from the refusal under a tiny budget, the peak from a full run.
  const CliResult refused = run_cli("--max-memory-gib 0.001 simulate --plan " + plan("dense-billion-tokens"), 60);
  ASSERT_EQ(refused.code, 2) << refused.output;
  const size_t at = refused.output.find("needs about ");
  ASSERT_NE(at, std::string::npos) << refused.output;
  const double estimate_gib = std::stod(refused.output.substr(at + 12));
  const std::string log = ::testing::TempDir() + "simulate-peak.log";
  const MeasuredRun ran = run_cli_measured({"simulate", "--plan", plan("dense-billion-tokens")}, log);
  std::filesystem::remove(log);
  ASSERT_EQ(ran.code, 0) << ran.output;
  const double peak_gib = ran.peak_gib;
  EXPECT_GT(peak_gib, 0.0);
  EXPECT_LT(estimate_gib, 2.0 * peak_gib) << "estimate " << estimate_gib << " GiB, peak " << peak_gib << " GiB";
  EXPECT_GT(estimate_gib, 0.5 * peak_gib) << "estimate " << estimate_gib << " GiB, peak " << peak_gib << " GiB";
}

std::string tiny_model() { return source_path("tests/traces/data/models/tiny.yaml"); }

TEST(ResourceBudgetCli, SynthBeyondTheBudgetRefusedBeforeWriting) {
  // 1200 samples x 8 heads x 2 x 2^18 slots: a 40 GiB trace, under the format's 64 GiB cap.
  const std::string out = ::testing::TempDir() + "synth-over-budget.safetensors";
  const CliResult r = run_cli("--max-memory-gib 16 trace synth --model " + tiny_model() +
                                  " --seq-len 1M --samples 1200 --vertical-slots 262144 --slash-slots 262144 --out " + out,
                              5);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "trace synth of 1200 samples")) << r.output;
  EXPECT_TRUE(contains(r.output, "over the budget of 16.00 GiB (--max-memory-gib)")) << r.output;
  EXPECT_TRUE(contains(r.output, "trace tensors")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(ResourceBudgetCli, SynthEstimateWithinFactorTwoOfMeasuredPeak) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's shadow memory and quarantine are not part of the estimate";
#endif
  // 128 samples x 8 heads x 16384 slots: the 134 MB of tensors dominate the peak.
  const std::string out = ::testing::TempDir() + "synth-peak.safetensors";
  const std::vector<std::string> args = {"trace", "synth", "--model", tiny_model(), "--seq-len", "64K", "--samples",
                                         "128", "--out", out, "--force"};
  std::vector<std::string> refused_args = {"--max-memory-gib", "0.001"};
  refused_args.insert(refused_args.end(), args.begin(), args.end());
  const MeasuredRun refused = run_cli_measured(refused_args, out + ".log");
  ASSERT_EQ(refused.code, 2) << refused.output;
  const size_t at = refused.output.find("needs about ");
  ASSERT_NE(at, std::string::npos) << refused.output;
  const double estimate_gib = std::stod(refused.output.substr(at + 12));
  const MeasuredRun ran = run_cli_measured(args, out + ".log");
  ASSERT_EQ(ran.code, 0) << ran.output;
  std::filesystem::remove(out);
  std::filesystem::remove(out + ".log");
  EXPECT_LT(estimate_gib, 2.0 * ran.peak_gib) << "estimate " << estimate_gib << " GiB, peak " << ran.peak_gib << " GiB";
  EXPECT_GT(estimate_gib, 0.5 * ran.peak_gib) << "estimate " << estimate_gib << " GiB, peak " << ran.peak_gib << " GiB";
}

}  // namespace
}  // namespace sparsering::test
