// Tests of measure/calibration/kernel_fit.hpp: exact recovery from noise-free data, recovery of
// known coefficients from fresh noisy data, the per-list term, the non-negativity rule, terms with
// no data, the residual figures against hand-computed values, rounding, and refusal of bad samples.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <utility>

#include "tests/config/config_test_util.hpp"
#include "measure/calibration/kernel_fit.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

std::vector<KernelSample> grid(const KernelCostCoefficients& c, double noise, std::mt19937_64& rng) {
  std::normal_distribution<double> jitter(0.0, noise);
  std::vector<KernelSample> samples;
  for (const int64_t tiles : {int64_t{0}, int64_t{1000}, int64_t{30000}, int64_t{400000}, int64_t{2000000}}) {
    for (const int64_t chunks : {int64_t{0}, int64_t{5000}, int64_t{80000}, int64_t{600000}}) {
      if (tiles == 0 && chunks == 0) continue;
      samples.push_back({tiles, chunks, predict_kernel_us(c, 0, tiles, chunks) * (1.0 + jitter(rng))});
    }
  }
  return samples;
}

TEST(KernelFit, RecoversExactCoefficientsWithoutNoise) {
  std::mt19937_64 rng(sparsering::testing_support::fixed_seed(1));
  const KernelCostCoefficients truth{12.5, 0.0, 0.0081, 0.0133};
  const KernelFit fit = fit_kernel_cost(grid(truth, 0.0, rng));
  EXPECT_NEAR(fit.coefficients.launch_us, truth.launch_us, 1e-6);
  EXPECT_NEAR(fit.coefficients.per_tile_us, truth.per_tile_us, 1e-10);
  EXPECT_NEAR(fit.coefficients.per_vertical_chunk_us, truth.per_vertical_chunk_us, 1e-10);
  EXPECT_LT(fit.max_relative_error, 1e-9);
  EXPECT_NEAR(fit.r_squared, 1.0, 1e-12);
}

TEST(KernelFit, ThePerKeyBlockTermIsFittedApartFromThePerKeyListOne) {
  // Launches whose key lists are all, a half or a quarter of the launched key blocks: the fit
  // with the per-key-block term gives back both costs; without it the per-key-list cost takes
  // what it can of both and misses the partial launches.
  const KernelCostCoefficients truth{.launch_us = 120.0, .per_tile_us = 0.03, .per_key_list_us = 0.15,
                                     .per_key_block_us = 0.05};
  std::vector<KernelSample> samples;
  for (const int64_t key_blocks : {int64_t{1024}, int64_t{4096}, int64_t{16384}}) {
    for (const int64_t part : {int64_t{1}, int64_t{2}, int64_t{4}}) {
      for (const int64_t tiles_per_key_list : {int64_t{8}, int64_t{64}}) {
        KernelSample s;
        s.key_lists = key_blocks / part;
        s.key_blocks = key_blocks;
        s.tiles = s.key_lists * tiles_per_key_list;
        s.time_us = predict_kernel_us(truth, s);
        samples.push_back(s);
      }
    }
  }
  const KernelTerms with = KernelTerms::backward_units(false, true);
  EXPECT_TRUE(with.key_block);
  const KernelFit fit = fit_kernel_cost(samples, with);
  EXPECT_NEAR(fit.coefficients.per_key_block_us, truth.per_key_block_us, 1e-9);
  EXPECT_NEAR(fit.coefficients.per_key_list_us, truth.per_key_list_us, 1e-9);
  EXPECT_NEAR(fit.coefficients.launch_us, truth.launch_us, 1e-6);
  EXPECT_LT(fit.max_relative_error, 1e-9);
  const KernelFit without = fit_kernel_cost(samples, KernelTerms::backward_units(false));
  EXPECT_EQ(without.coefficients.per_key_block_us, 0.0);
  EXPECT_GT(without.max_relative_error, 0.05);
  // Rounding keeps 4 significant digits of the new term too.
  EXPECT_EQ(rounded_coefficients(KernelCostCoefficients{.per_key_block_us = 0.0123456}).per_key_block_us, 0.01235);
  KernelSample negative;
  negative.tiles = 1;
  negative.time_us = 1.0;
  negative.key_blocks = -1;
  std::vector<KernelSample> bad(3, negative);
  test::expect_input_error([&] { fit_kernel_cost(bad, with); }, {"negative counts", "-1 key blocks"});
}

TEST(KernelFit, TheCriticalPathTermIsFittedWhereTheHeaviestSegmentOutlastsTheRest) {
  // Launches of balanced segments (no critical entries) and launches whose heaviest segment holds
  // 100 to 1600 entries beyond the per-SM share: the fit with the critical-path term gives back its
  // cost; without it the other terms cannot explain the heavy launches.
  const KernelCostCoefficients truth{.launch_us = 60.0, .per_tile_us = 0.02, .per_key_list_us = 0.2,
                                     .per_critical_entry_us = 1.5};
  std::vector<KernelSample> samples;
  for (const int64_t key_lists : {int64_t{1024}, int64_t{8192}}) {
    for (const int64_t tiles_per_key_list : {int64_t{4}, int64_t{32}}) {
      for (const double critical : {0.0, 100.0, 400.0, 1600.0}) {
        KernelSample s;
        s.key_lists = key_lists;
        s.key_blocks = key_lists;
        s.tiles = key_lists * tiles_per_key_list;
        s.critical_entries = critical;
        s.time_us = predict_kernel_us(truth, s);
        samples.push_back(s);
      }
    }
  }
  const KernelTerms with = KernelTerms::backward_units(false, false, true);
  EXPECT_TRUE(with.critical);
  const KernelFit fit = fit_kernel_cost(samples, with);
  EXPECT_NEAR(fit.coefficients.per_critical_entry_us, truth.per_critical_entry_us, 1e-9);
  EXPECT_NEAR(fit.coefficients.per_tile_us, truth.per_tile_us, 1e-12);
  EXPECT_LT(fit.max_relative_error, 1e-9);
  const KernelFit without = fit_kernel_cost(samples, KernelTerms::backward_units(false));
  EXPECT_EQ(without.coefficients.per_critical_entry_us, 0.0);
  EXPECT_GT(without.max_relative_error, 0.1);
  // No launch with critical entries: the term has no data and stays 0.
  std::vector<KernelSample> balanced;
  for (const KernelSample& s : samples) {
    if (s.critical_entries == 0.0) balanced.push_back(s);
  }
  EXPECT_EQ(fit_kernel_cost(balanced, with).coefficients.per_critical_entry_us, 0.0);
  EXPECT_EQ(rounded_coefficients(KernelCostCoefficients{.per_critical_entry_us = 1.234567}).per_critical_entry_us, 1.235);
  for (const double bad_count : {-1.0, std::nan("")}) {
    std::vector<KernelSample> bad(3, samples.front());
    bad[1].critical_entries = bad_count;
    test::expect_input_error([&] { fit_kernel_cost(bad, with); }, {"kernel sample 1", "critical entries"});
  }
}

TEST(KernelFit, RecoversKnownCoefficientsFromNoisyData) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  std::uniform_real_distribution<double> pick(0.5, 2.0);
  for (int trial = 0; trial < 20; ++trial) {
    const KernelCostCoefficients truth{20.0 * pick(rng), 0.0, 0.01 * pick(rng), 0.02 * pick(rng)};
    const KernelFit fit = fit_kernel_cost(grid(truth, 0.01, rng));
    EXPECT_NEAR(fit.coefficients.launch_us / truth.launch_us, 1.0, 0.15);  // set by the few smallest launches
    EXPECT_NEAR(fit.coefficients.per_tile_us / truth.per_tile_us, 1.0, 0.03);
    EXPECT_NEAR(fit.coefficients.per_vertical_chunk_us / truth.per_vertical_chunk_us, 1.0, 0.03);
    EXPECT_LT(fit.median_relative_error, 0.02);
    EXPECT_LT(fit.max_relative_error, 0.06);
    // 1% noise leaves 1 - R^2 near 1e-4; 0.998 holds unless the largest launch draws a 4-sigma error.
    EXPECT_GT(fit.r_squared, 0.998);
    EXPECT_EQ(fit.samples, 19);
  }
}

TEST(KernelFit, RecoversAPerListCost) {
  // Launches of 1-48 tiles per list over 1K-32K lists, the shape of the benchmark grid: the fit
  // recovers the per-list cost beside the per-tile and per-chunk costs; without list counts it
  // cannot, and the three remaining terms leave large errors.
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  std::normal_distribution<double> jitter(0.0, 0.01);
  const KernelCostCoefficients truth{8.0, 0.03, 0.0097, 0.0097};
  std::vector<KernelSample> samples;
  for (const int64_t lists : {int64_t{1024}, int64_t{4096}, int64_t{32768}}) {
    for (const auto& [t, c] : std::vector<std::pair<int64_t, int64_t>>{{1, 0}, {4, 0}, {48, 0}, {0, 2}, {4, 4}, {8, 16}}) {
      const double time = predict_kernel_us(truth, lists, lists * t, lists * c) * (1.0 + jitter(rng));
      samples.push_back({lists * t, lists * c, time, lists});
    }
  }
  const KernelFit four = fit_kernel_cost(samples);
  EXPECT_NEAR(four.coefficients.per_list_us / truth.per_list_us, 1.0, 0.05);
  EXPECT_NEAR(four.coefficients.per_tile_us / truth.per_tile_us, 1.0, 0.05);
  EXPECT_NEAR(four.coefficients.per_vertical_chunk_us / truth.per_vertical_chunk_us, 1.0, 0.05);
  EXPECT_LT(four.max_relative_error, 0.05);
  std::vector<KernelSample> without_lists = samples;
  for (KernelSample& s : without_lists) s.lists = 0;
  const KernelFit three = fit_kernel_cost(without_lists);
  EXPECT_EQ(three.coefficients.per_list_us, 0.0);
  EXPECT_GT(three.max_relative_error, 0.3);
}

TEST(KernelFit, WeightsCountLikeRepeatedSamplesAndZeroWeightsAreOnlyScored) {
  // A sample of weight 2 pulls the fit as the same sample given twice; a sample of weight 0 is left
  // out of the fit but keeps its place in the residuals.
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  const KernelCostCoefficients truth{12.5, 0.0, 0.0081, 0.0133};
  std::vector<KernelSample> samples = grid(truth, 0.03, rng);
  std::vector<KernelSample> doubled = samples;
  doubled.push_back(samples[3]);
  samples[3].weight = 2.0;
  const KernelFit weighted = fit_kernel_cost(samples);
  const KernelFit repeated = fit_kernel_cost(doubled);
  EXPECT_NEAR(weighted.coefficients.launch_us, repeated.coefficients.launch_us, 1e-9 * repeated.coefficients.launch_us);
  EXPECT_NEAR(weighted.coefficients.per_tile_us, repeated.coefficients.per_tile_us, 1e-9 * repeated.coefficients.per_tile_us);
  EXPECT_NEAR(weighted.coefficients.per_vertical_chunk_us, repeated.coefficients.per_vertical_chunk_us,
              1e-9 * repeated.coefficients.per_vertical_chunk_us);

  std::vector<KernelSample> with_outlier = grid(truth, 0.0, rng);
  KernelSample outlier = with_outlier[5];
  outlier.time_us *= 10.0;
  outlier.weight = 0.0;
  with_outlier.push_back(outlier);
  const KernelFit fit = fit_kernel_cost(with_outlier);
  EXPECT_NEAR(fit.coefficients.per_tile_us, truth.per_tile_us, 1e-10);
  ASSERT_EQ(fit.relative_errors.size(), with_outlier.size());
  EXPECT_NEAR(fit.relative_errors.back(), -0.9, 1e-9);  // scored against the exact model
  std::vector<KernelSample> unweighted = grid(truth, 0.0, rng);
  for (KernelSample& s : unweighted) s.weight = 0.0;
  unweighted[0].weight = unweighted[1].weight = 1.0;
  test::expect_input_error([&] { fit_kernel_cost(unweighted); }, {"at least 3 samples of positive weight, got 2"});
  unweighted[0].weight = -1.0;
  test::expect_input_error([&] { fit_kernel_cost(unweighted); }, {"weight must be finite and >= 0"});
}

TEST(KernelFit, RoundsToFourSignificantDigits) {
  const KernelCostCoefficients c = rounded_coefficients({289.94, 0.0200949, 0.03271449, 0.0900751});
  EXPECT_EQ(c.launch_us, 289.9);
  EXPECT_EQ(c.per_list_us, 0.02009);
  EXPECT_EQ(c.per_tile_us, 0.03271);
  EXPECT_EQ(c.per_vertical_chunk_us, 0.09008);
  EXPECT_EQ(rounded_coefficients({}).per_list_us, 0.0);
}

TEST(KernelFit, PinsANegativeLaunchCostAtZero) {
  // Times exactly proportional to tiles with a small negative offset: the free fit would give a
  // negative launch cost.
  std::vector<KernelSample> samples{{100, 0, 0.9}, {1000, 0, 9.9}, {10000, 0, 99.9}};
  const KernelFit fit = fit_kernel_cost(samples);
  EXPECT_EQ(fit.coefficients.launch_us, 0.0);
  EXPECT_GT(fit.coefficients.per_tile_us, 0.0);
  EXPECT_EQ(fit.coefficients.per_vertical_chunk_us, 0.0);
}

TEST(KernelFit, TermWithoutDataGetsZero) {
  const std::vector<KernelSample> samples{{10, 0, 11.0}, {100, 0, 20.0}, {1000, 0, 110.0}};
  const KernelFit fit = fit_kernel_cost(samples);
  EXPECT_NEAR(fit.coefficients.launch_us, 10.0, 1e-9);
  EXPECT_NEAR(fit.coefficients.per_tile_us, 0.1, 1e-12);
  EXPECT_EQ(fit.coefficients.per_vertical_chunk_us, 0.0);
}

TEST(KernelFit, ResidualFiguresMatchHandComputation) {
  // Model: 10 + 1 x tiles. Predictions 11, 20, 110 against times 10, 25, 100:
  // errors +10%, -20%, +10%; median |err| 10%, max 20%.
  const KernelCostCoefficients c{10.0, 0.0, 1.0, 0.0};
  const std::vector<KernelSample> samples{{1, 0, 10.0}, {10, 0, 25.0}, {100, 0, 100.0}};
  const KernelFit fit = evaluate_kernel_cost(c, samples);
  ASSERT_EQ(fit.relative_errors.size(), 3u);
  EXPECT_NEAR(fit.relative_errors[0], 0.1, 1e-12);
  EXPECT_NEAR(fit.relative_errors[1], -0.2, 1e-12);
  EXPECT_NEAR(fit.median_relative_error, 0.1, 1e-12);
  EXPECT_NEAR(fit.max_relative_error, 0.2, 1e-12);
  // mean 45; SS_tot = 35^2 + 20^2 + 55^2 = 4650; SS_res = 1 + 25 + 100 = 126.
  EXPECT_NEAR(fit.r_squared, 1.0 - 126.0 / 4650.0, 1e-12);
}

TEST(KernelFit, RefusesBadSamples) {
  test::expect_input_error([] { fit_kernel_cost(std::vector<KernelSample>{{1, 0, 1.0}, {2, 0, 2.0}}); }, {"at least 3"});
  test::expect_input_error([] { fit_kernel_cost(std::vector<KernelSample>{{1, 0, 1.0}, {2, 0, 0.0}, {3, 0, 3.0}}); },
                           {"sample 1", "time_us"});
  test::expect_input_error([] { fit_kernel_cost(std::vector<KernelSample>{{1, 0, 1.0}, {2, -1, 2.0}, {3, 0, 3.0}}); },
                           {"sample 1", "negative"});
  test::expect_input_error([] { fit_kernel_cost(std::vector<KernelSample>{{0, 1, 1.0}, {0, 2, 2.0}, {0, 3, 3.0}}); },
                           {"with a tile"});
  test::expect_input_error([] { fit_kernel_cost(std::vector<KernelSample>{{1, 0, NAN}, {2, 0, 2.0}, {3, 0, 3.0}}); },
                           {"finite"});
}

}  // namespace
}  // namespace sparsering
