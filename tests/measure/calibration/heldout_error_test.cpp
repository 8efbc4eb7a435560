// Tests of measure/calibration/heldout_error.hpp: each launch is predicted by a fit that never saw
// its benchmark case (checked against a brute-force leave-one-case-out when folds = cases), the
// folds depend only on the seed, several dealings are the single dealings one after another, the
// median weighs each sample as the fit does, a sample far off the model shows up held out but is
// absorbed in sample, and bad inputs are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "tests/common/test_seed.hpp"
#include "tests/config/config_test_util.hpp"
#include "common/median.hpp"
#include "measure/calibration/heldout_error.hpp"

namespace sparsering {
namespace {

std::vector<KernelSample> grid(std::mt19937_64& rng, double noise) {
  std::normal_distribution<double> jitter(0.0, noise);
  const KernelCostCoefficients truth{8.0, 0.03, 0.01, 0.012};
  std::vector<KernelSample> samples;
  for (const int64_t lists : {int64_t{512}, int64_t{4096}, int64_t{32768}}) {
    for (const auto& [t, c] : std::vector<std::pair<int64_t, int64_t>>{{1, 0}, {4, 0}, {48, 0}, {0, 2}, {4, 4}, {8, 16}}) {
      samples.push_back({lists * t, lists * c, predict_kernel_us(truth, lists, lists * t, lists * c) * (1.0 + jitter(rng)), lists});
    }
  }
  return samples;
}

std::vector<int64_t> one_case_each(size_t n) {
  std::vector<int64_t> ids(n);
  for (size_t k = 0; k < n; ++k) ids[k] = static_cast<int64_t>(k);
  return ids;
}

TEST(HeldOutError, LeaveOneCaseOutMatchesBruteForce) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  const std::vector<KernelSample> samples = grid(rng, 0.02);
  const HeldOutError held = heldout_error(samples, one_case_each(samples.size()), static_cast<int64_t>(samples.size()), 3);
  ASSERT_EQ(held.relative_errors.size(), samples.size());
  for (size_t k = 0; k < samples.size(); ++k) {
    std::vector<KernelSample> others = samples;
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(k));
    const KernelCostCoefficients c = rounded_coefficients(fit_kernel_cost(others).coefficients);
    const KernelSample& s = samples[k];
    EXPECT_DOUBLE_EQ(held.relative_errors[k], (predict_kernel_us(c, s.lists, s.tiles, s.column_chunks) - s.time_us) / s.time_us);
  }
  EXPECT_GE(held.max_relative_error, held.median_relative_error);
}

TEST(HeldOutError, SamplesOfOneCaseAreHeldOutTogether) {
  // Two launches per case; both launches of one case are far off the model. Held out together,
  // both are predicted from the other cases alone, so both show the same large error.
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  std::vector<KernelSample> samples = grid(rng, 0.0);
  std::vector<int64_t> ids = one_case_each(samples.size());
  const size_t n = samples.size();
  for (size_t k = 0; k < n; ++k) {
    samples.push_back(samples[k]);
    ids.push_back(ids[k]);
  }
  samples[0].time_us *= 3.0;
  samples[n].time_us *= 3.0;
  const HeldOutError held = heldout_error(samples, ids, 5, 11);
  EXPECT_NEAR(held.relative_errors[0], held.relative_errors[n], 1e-12);
  EXPECT_LT(held.relative_errors[0], -0.5);  // predicted from the other cases: about a third of the time
}

TEST(HeldOutError, FoldsDependOnlyOnTheSeed) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  const std::vector<KernelSample> samples = grid(rng, 0.05);
  const std::vector<int64_t> ids = one_case_each(samples.size());
  const HeldOutError a = heldout_error(samples, ids, 5, 1);
  const HeldOutError b = heldout_error(samples, ids, 5, 1);
  EXPECT_EQ(a.relative_errors, b.relative_errors);
  EXPECT_EQ(a.folds, 5);
  EXPECT_EQ(a.seed, 1u);
  EXPECT_NE(heldout_error(samples, ids, 5, 2).relative_errors, a.relative_errors);
  // In sample the fit sees every launch, so it does at least as well on the worst one.
  EXPECT_LE(fit_kernel_cost(samples).max_relative_error, a.max_relative_error);
}

TEST(HeldOutError, DealingsAreTheSingleDealingsOfTheNextSeedsOneAfterAnother) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  const std::vector<KernelSample> samples = grid(rng, 0.05);
  const std::vector<int64_t> ids = one_case_each(samples.size());
  const HeldOutError three = heldout_error(samples, ids, 4, 9, KernelTerms::four_terms(), {}, 3);
  EXPECT_EQ(three.dealings, 3);
  EXPECT_EQ(three.seed, 9u);
  std::vector<double> expected;
  double largest = 0.0;
  for (const uint64_t seed : {9u, 10u, 11u}) {
    const HeldOutError one = heldout_error(samples, ids, 4, seed);
    expected.insert(expected.end(), one.relative_errors.begin(), one.relative_errors.end());
    largest = std::max(largest, one.max_relative_error);
  }
  EXPECT_EQ(three.relative_errors, expected);
  EXPECT_EQ(three.max_relative_error, largest);
  std::vector<double> magnitudes;
  for (const double e : expected) magnitudes.push_back(std::abs(e));
  EXPECT_EQ(three.median_relative_error, median(magnitudes));  // every weight 1
}

TEST(HeldOutError, TheMedianWeighsEachSampleAsTheFitDoes) {
  // A sample of weight 2 counts as if given twice, in the median as in the training folds' fits.
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  std::vector<KernelSample> samples = grid(rng, 0.05);
  for (size_t k = 0; k < samples.size(); ++k) samples[k].weight = k % 3 == 0 ? 2.0 : 1.0;
  const HeldOutError weighted = heldout_error(samples, one_case_each(samples.size()), 4, 3);
  std::vector<double> repeated;
  for (size_t k = 0; k < samples.size(); ++k) {
    repeated.insert(repeated.end(), k % 3 == 0 ? 2 : 1, std::abs(weighted.relative_errors[k]));
  }
  EXPECT_EQ(weighted.median_relative_error, median(repeated));
}

TEST(HeldOutError, RefusesBadInputs) {
  std::mt19937_64 rng(sparsering::testing_support::fixed_seed(5));
  const std::vector<KernelSample> samples = grid(rng, 0.0);
  const std::vector<int64_t> ids = one_case_each(samples.size());
  test::expect_input_error([&] { heldout_error(samples, std::vector<int64_t>{1, 2}, 5, 1); }, {"18 samples but 2 case ids"});
  test::expect_input_error([&] { heldout_error(samples, ids, 1, 1); }, {"at least 2 folds"});
  test::expect_input_error([&] { heldout_error(samples, ids, 5, 1, KernelTerms::four_terms(), {}, 0); },
                           {"at least 1 dealing of the folds, got 0"});
  test::expect_input_error([&] { heldout_error(samples, std::vector<int64_t>(samples.size(), 4), 5, 1); },
                           {"5 folds needs at least 5 benchmark cases, got 1"});
  // A fold whose training launches have no tile cannot be fitted; the message names the fold.
  std::vector<KernelSample> chunks_only;
  for (const KernelSample& s : samples) {
    if (s.tiles == 0) chunks_only.push_back(s);
  }
  chunks_only.push_back(samples[0]);
  test::expect_input_error([&] { heldout_error(chunks_only, one_case_each(chunks_only.size()), 4, 1); },
                           {"held-out fold", "of 4 (seed 1)"});
}

}  // namespace
}  // namespace sparsering
