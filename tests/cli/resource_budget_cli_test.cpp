// Memory budget of `sparsering simulate` (--max-memory-gib, docs/simulator.md section 11): plans
// within the schema limits whose estimate exceeds the budget are refused with exit 2 before any
// work, a per-token plan that used to be materialised now runs in bounded memory, a normal plan is
// unaffected, and the estimate is within a factor of two of the measured peak on one moderate plan.
#include <sys/resource.h>
#include <sys/wait.h>

#include <string>

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
  // The dense 2^30-token plan: its peak is the work counting scratch the estimate models. The
  // estimate is read from the refusal under a tiny budget, the peak from a full run.
  const CliResult refused = run_cli("--max-memory-gib 0.001 simulate --plan " + plan("dense-billion-tokens"), 60);
  ASSERT_EQ(refused.code, 2) << refused.output;
  const size_t at = refused.output.find("needs about ");
  ASSERT_NE(at, std::string::npos) << refused.output;
  const double estimate_gib = std::stod(refused.output.substr(at + 12));
  const CliResult ran = run_cli("simulate --plan " + plan("dense-billion-tokens"), 120);
  ASSERT_EQ(ran.code, 0) << ran.output;
  rusage usage{};
  ASSERT_EQ(::getrusage(RUSAGE_CHILDREN, &usage), 0);
  const double peak_gib = static_cast<double>(usage.ru_maxrss) / (1024.0 * 1024.0);  // ru_maxrss is KiB
  EXPECT_GT(peak_gib, 0.0);
  EXPECT_LT(estimate_gib, 2.0 * peak_gib) << "estimate " << estimate_gib << " GiB, peak " << peak_gib << " GiB";
  EXPECT_GT(estimate_gib, 0.5 * peak_gib) << "estimate " << estimate_gib << " GiB, peak " << peak_gib << " GiB";
}

}  // namespace
}  // namespace sparsering::test
