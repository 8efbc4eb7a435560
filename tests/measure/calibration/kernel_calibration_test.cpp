// Tests of measure/calibration/kernel_calibration.hpp: the under-filled rule on hand-counted
// launches of both block sizes, the CSV round trip and its errors, a fit of synthetic launches of
// two shapes that recovers each shape's coefficients, refits of the shipped H100 and H200
// measurements (docs/calibration/*.csv) that must reproduce the calibrations shipped in
// configs/gpus/h100-sxm.yaml and h200.yaml (so a file and its raw data cannot drift apart), and the
// figures docs/calibration.md quotes from the recorded measurements: held-out errors, the
// backward's residuals by local length, and how far the 64 x 64 costs extrapolated to 128 x 128
// miss the measured 128 x 128 launches.
#include <gtest/gtest.h>

#include <Eigen/Dense>

#include <cmath>
#include <iostream>
#include <random>

#include "tests/common/test_seed.hpp"
#include "tests/config/config_test_util.hpp"
#include "common/atomic_file.hpp"
#include "measure/calibration/benchmark_plan.hpp"
#include "measure/calibration/calibration_output.hpp"
#include "measure/calibration/calibration_refit.hpp"
#include "measure/calibration/kernel_calibration.hpp"
#include "measure/calibration/replayed_cells.hpp"
#include "sim/config/gpu_config.hpp"
#include "sim/cost/kernel_cost.hpp"

namespace sparsering {
namespace {

KernelMeasurement launch(const char* direction, int32_t q_heads, int32_t kv_heads, int64_t local_tokens,
                         int32_t block = 64) {
  KernelMeasurement m;
  m.direction = direction;
  m.q_heads = q_heads;
  m.kv_heads = kv_heads;
  m.local_tokens = local_tokens;
  m.block_q = m.block_k = block;
  m.head_dim = 128;
  m.lists = int64_t{q_heads} * ((local_tokens + block - 1) / block);
  return m;
}

TEST(KernelCalibration, UnderFilledRule) {
  // 132 SMs: two waves of two CTAs per SM = 528 CTAs.
  EXPECT_TRUE(launch_under_filled(launch("forward", 4, 1, 8192), 132));    // 512 lists
  EXPECT_FALSE(launch_under_filled(launch("forward", 4, 1, 8448), 132));   // 528 lists
  EXPECT_TRUE(launch_under_filled(launch("backward", 16, 2, 16384), 132));  // 2 x 256 = 512 key-block CTAs
  EXPECT_FALSE(launch_under_filled(launch("backward", 32, 4, 16384), 132)); // 1024
  EXPECT_FALSE(launch_under_filled(launch("forward", 16, 2, 16384), 132));  // 4096 lists
  // 128-token blocks: one 128-query CTA per list forward; backward CTAs are 64-key halves of a
  // key block, so the same count as with 64-token blocks.
  EXPECT_TRUE(launch_under_filled(launch("forward", 4, 1, 16384, 128), 132));    // 512 lists
  EXPECT_FALSE(launch_under_filled(launch("forward", 4, 1, 16896, 128), 132));   // 528 lists
  EXPECT_TRUE(launch_under_filled(launch("backward", 16, 2, 16384, 128), 132));  // 2 x 128 x 2 = 512
  EXPECT_FALSE(launch_under_filled(launch("backward", 32, 4, 16384, 128), 132)); // 1024
  // 256-query blocks: two 128-query CTAs per list.
  EXPECT_FALSE(launch_under_filled(launch("forward", 4, 1, 16896, 256), 132));  // 264 lists x 2 = 528
  EXPECT_TRUE(launch_under_filled(launch("forward", 4, 1, 16640, 256), 132));   // 260 lists x 2 = 520
}

TEST(KernelCalibration, TheBenchmarksClockIsTheMedianOfItsOwnLaunches) {
  // The clocks of the grid's launches count; a replayed cell's and a missing clock (0) do not.
  std::vector<KernelMeasurement> launches(4, launch("forward", 16, 2, 4096));
  launches[0].sm_clock_mhz = 1900.0;
  launches[1].sm_clock_mhz = 1950.0;
  launches[2].sm_clock_mhz = 0.0;
  launches[3].sm_clock_mhz = 1500.0;
  launches[3].placement = "replay:c01";
  EXPECT_EQ(benchmark_sm_clock_mhz(launches), 1925.0);
  launches[2].sm_clock_mhz = 1980.0;
  EXPECT_EQ(benchmark_sm_clock_mhz(launches), 1950.0);
  EXPECT_EQ(benchmark_sm_clock_mhz({launches[3]}), 0.0);
  EXPECT_EQ(benchmark_sm_clock_mhz({}), 0.0);
}

TEST(KernelCalibration, CsvRoundTripAndErrors) {
  KernelMeasurement m = launch("backward", 16, 2, 4096);
  m.tiles_per_list = 3;
  m.tiles = 3 * m.lists;
  m.column_chunks = 7;
  m.repeats = 5;
  m.median_us = 123.25;
  m.min_us = 120.5;
  m.max_us = 130.0;
  m.under_filled = true;
  m.placement = "banded";
  m.columns_per_list = 40;
  m.key_lists = 11;
  m.column_lists = 12;
  m.column_items = 13;
  m.columns = 14;
  m.key_block_stride = 4;
  m.key_pass_us = 45.5;
  m.longest_key_list = 9;
  m.sm_clock_mhz = 1845.5;
  const std::vector<KernelMeasurement> back = parse_kernel_measurements_csv(kernel_measurements_csv({m, m}), "t.csv");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].columns_per_list, 40);
  EXPECT_EQ(back[1].key_lists, 11);
  EXPECT_EQ(back[1].column_lists, 12);
  EXPECT_EQ(back[1].column_items, 13);
  EXPECT_EQ(back[1].columns, 14);
  EXPECT_EQ(back[1].longest_key_list, 9);
  EXPECT_EQ(back[1].sm_clock_mhz, 1845.5);
  EXPECT_EQ(back[1].direction, "backward");
  EXPECT_EQ(back[1].tiles, m.tiles);
  EXPECT_EQ(back[1].median_us, 123.25);
  EXPECT_EQ(back[1].placement, "banded");
  EXPECT_EQ(back[1].key_block_stride, 4);
  EXPECT_EQ(back[1].key_pass_us, 45.5);
  EXPECT_TRUE(back[1].under_filled);
  // Records written before strides (and before the key-block pass was timed) have no such
  // columns: every key block, and no pass time.
  for (const KernelMeasurement& k : parse_kernel_measurements_csv(
           read_file(std::string(SPARSERING_SOURCE_DIR) + "/docs/calibration/h200-kernels-443afdb3-random.csv"), "h200")) {
    ASSERT_EQ(k.key_block_stride, 1);
    ASSERT_EQ(k.key_pass_us, -1.0);
    ASSERT_EQ(k.longest_key_list, -1) << "not recorded then";
    ASSERT_EQ(k.sm_clock_mhz, 0.0) << "not probed then";
  }
  std::string zero_stride = kernel_measurements_csv({m});
  zero_stride.replace(zero_stride.rfind(",4,45.5,9,"), 10, ",0,45.5,9,");
  test::expect_input_error([&] { parse_kernel_measurements_csv(zero_stride, "e.csv"); }, {"e.csv:2", "key_block_stride", ">= 1"});
  std::string negative_clock = kernel_measurements_csv({m});
  negative_clock.replace(negative_clock.rfind(",1845.5\n"), 8, ",-1845.5\n");
  test::expect_input_error([&] { parse_kernel_measurements_csv(negative_clock, "e.csv"); }, {"e.csv:2", "sm_clock_mhz", ">= 0"});
  test::expect_input_error([] { parse_kernel_measurements_csv("", "e.csv"); }, {"e.csv", "header"});
  test::expect_input_error([] { parse_kernel_measurements_csv("direction,q_heads\nforward,1\n", "e.csv"); },
                           {"e.csv", "no column \"kv_heads\""});
  std::string text = kernel_measurements_csv({m});
  const std::string bad = text.substr(0, text.find('\n') + 1) + "sideways" + text.substr(text.find('\n') + 1 + 8);
  test::expect_input_error([&] { parse_kernel_measurements_csv(bad, "e.csv"); }, {"e.csv:2", "direction"});
  std::string nan_time = text;
  nan_time.replace(nan_time.find("123.25"), 6, "x23.25");
  test::expect_input_error([&] { parse_kernel_measurements_csv(nan_time, "e.csv"); }, {"e.csv:2", "median_us"});
}

TEST(KernelCalibration, FitsEachShapeOnItsOwnLaunches) {
  // Launches of the default grid at two shapes, timed by known four-term models with 1% noise:
  // each shape's fit recovers its own coefficients, and its held-out error stays near the noise.
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  std::normal_distribution<double> noise(0.0, 0.01);
  const KernelCostCoefficients truth_64{8.0, 0.028, 0.0098, 0.0098};
  const KernelCostCoefficients truth_128{9.0, 0.05, 0.036, 0.04};
  std::vector<KernelMeasurement> kernels;
  for (const KernelBenchCase& c : default_kernel_cases(false, default_calibration_shapes())) {
    KernelMeasurement m = launch("forward", c.q_heads, c.kv_heads, c.local_tokens, static_cast<int32_t>(c.shape.block_q));
    m.tiles_per_list = c.tiles_per_list;
    m.chunks_per_list = c.chunks_per_list;
    m.tiles = m.lists * c.tiles_per_list;
    m.column_chunks = m.lists * c.chunks_per_list;
    const KernelCostCoefficients& truth = c.shape.block_q == 64 ? truth_64 : truth_128;
    m.median_us = predict_kernel_us(truth, m.lists, m.tiles, m.column_chunks) * (1.0 + noise(rng));
    m.under_filled = launch_under_filled(m, 132);
    kernels.push_back(m);
    m.direction = "backward";
    m.median_us *= 3.0;
    m.under_filled = launch_under_filled(m, 132);
    kernels.push_back(m);
  }
  const std::vector<ShapeFit> fits = fit_kernel_measurements(kernels);
  ASSERT_EQ(fits.size(), 2u);
  EXPECT_EQ(fits[0].shape, (KernelShape{64, 64, 128}));
  EXPECT_EQ(fits[1].shape, (KernelShape{128, 128, 128}));
  for (const ShapeFit& fit : fits) {
    const KernelCostCoefficients& truth = fit.shape.block_q == 64 ? truth_64 : truth_128;
    const KernelCostCoefficients& got = fit.forward.fit.coefficients;
    EXPECT_NEAR(got.per_list_us / truth.per_list_us, 1.0, 0.05) << to_string(fit.shape);
    EXPECT_NEAR(got.per_tile_us / truth.per_tile_us, 1.0, 0.05) << to_string(fit.shape);
    EXPECT_NEAR(got.per_vertical_chunk_us / truth.per_vertical_chunk_us, 1.0, 0.05) << to_string(fit.shape);
    EXPECT_NEAR(fit.backward.fit.coefficients.per_tile_us / (3.0 * truth.per_tile_us), 1.0, 0.05);
    EXPECT_LT(fit.forward.fit.median_relative_error, 0.02);
    EXPECT_LT(fit.forward.heldout.median_relative_error, 0.02);
    EXPECT_EQ(fit.forward.heldout.folds, 5);
    const CalibratedShape entry = calibrated_shape(fit);
    ASSERT_TRUE(entry.fit.has_value());
    EXPECT_EQ(entry.fit->samples, fit.forward.fit.samples + fit.backward.fit.samples);
    EXPECT_GE(entry.fit->heldout_max_relative_error, entry.fit->heldout_median_relative_error);
  }
  // Every measurement got its own shape's prediction.
  for (const KernelMeasurement& m : kernels) EXPECT_GT(m.predicted_us, 0.0);
}

TEST(KernelCalibration, ReplayedCellsWeighAsMuchAsTheGridAndChooseItsWeight) {
  // The weights, by hand: 4 grid launches and two replays of 2 and 4 cells: each replay weighs
  // 4 / 2 = 2 in all, so its cells 1 and 0.5; the grid launches the weight asked for.
  std::vector<KernelMeasurement> rows(10, launch("forward", 16, 2, 16384));
  for (size_t k = 4; k < 6; ++k) rows[k].placement = "replay:a";
  for (size_t k = 6; k < 10; ++k) rows[k].placement = "replay:b";
  std::vector<const KernelMeasurement*> pointers;
  for (const KernelMeasurement& m : rows) pointers.push_back(&m);
  const std::vector<double> weights = launch_weights(pointers, 0.2);
  const std::vector<double> expected{0.2, 0.2, 0.2, 0.2, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5};
  for (size_t k = 0; k < rows.size(); ++k) EXPECT_DOUBLE_EQ(weights[k], expected[k]) << k;
  pointers.resize(4);
  for (const double w : launch_weights(pointers, 0.2)) EXPECT_EQ(w, 1.0);  // no replay: the grid as before

  // The grid's launches timed by one model, replayed cells (three replays of different shapes of
  // work) by another whose tiles cost 20% less: the fit leans on the cells (a small grid weight),
  // and each replay, held out, is predicted near its own model, far better than by the grid's.
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  std::normal_distribution<double> noise(0.0, 0.01);
  const KernelCostCoefficients grid_truth{8.0, 0.028, 0.0098, 0.0098};
  const KernelCostCoefficients cell_truth{8.0, 0.028, 0.0098 * 0.8, 0.0098};
  std::vector<KernelMeasurement> kernels;
  for (const KernelBenchCase& c : default_kernel_cases(false, {KernelShape{64, 64, 128}})) {
    KernelMeasurement m = launch("forward", c.q_heads, c.kv_heads, c.local_tokens);
    m.tiles_per_list = c.tiles_per_list;
    m.chunks_per_list = c.chunks_per_list;
    m.columns_per_list = c.columns_per_list;
    m.key_block_stride = c.key_block_stride;
    m.placement = "banded";
    m.tiles = m.lists * c.tiles_per_list;
    m.column_chunks = m.lists * c.chunks_per_list;
    m.median_us = predict_kernel_us(grid_truth, m.lists, m.tiles, m.column_chunks) * (1.0 + noise(rng));
    m.under_filled = launch_under_filled(m, 132);
    kernels.push_back(m);
  }
  for (int replay = 0; replay < 3; ++replay) {
    std::uniform_int_distribution<int64_t> tiles_per_list(1 + 4 * replay, 12 + 8 * replay);
    for (int cell = 0; cell < 40; ++cell) {
      KernelMeasurement m = launch("forward", 32, 4, 32768);
      m.placement = str("replay:r", replay);
      m.tiles = m.lists * tiles_per_list(rng);
      m.column_chunks = m.lists * (cell % 3);
      m.median_us = predict_kernel_us(cell_truth, m.lists, m.tiles, m.column_chunks) * (1.0 + noise(rng));
      kernels.push_back(m);
    }
  }
  const size_t forward_rows = kernels.size();
  for (size_t k = 0; k < forward_rows; ++k) {  // a backward for every launch, to fit both directions
    KernelMeasurement b = kernels[k];
    b.direction = "backward";
    b.median_us *= 3.0;
    b.under_filled = !is_replayed_cell(b) && launch_under_filled(b, 132);
    kernels.push_back(b);
  }
  std::vector<KernelMeasurement> grid_only;
  for (const KernelMeasurement& k : kernels) {
    if (!is_replayed_cell(k)) grid_only.push_back(k);
  }
  const DirectionFit with_cells = fit_kernel_measurements(kernels)[0].forward;
  EXPECT_EQ(with_cells.replays, 3);
  EXPECT_LE(with_cells.grid_weight, 0.1);
  EXPECT_EQ(with_cells.replayed_heldout.folds, 3);
  EXPECT_EQ(with_cells.replayed_heldout.samples, 120);
  EXPECT_EQ(with_cells.replayed.samples, 120);
  EXPECT_LT(with_cells.replayed_heldout.median_relative_error, 0.03);
  const DirectionFit grid_fit = fit_kernel_measurements(grid_only)[0].forward;
  EXPECT_EQ(grid_fit.replays, 0);
  EXPECT_EQ(grid_fit.grid_weight, 1.0);
  const KernelCostCoefficients& g = grid_fit.fit.coefficients;
  std::vector<double> grid_errors;
  for (const KernelMeasurement& k : kernels) {
    if (is_replayed_cell(k) && k.direction == "forward") grid_errors.push_back(predict_kernel_us(g, k.lists, k.tiles, k.column_chunks) / k.median_us - 1.0);
  }
  EXPECT_GT(median_and_max_magnitude(grid_errors).first, 3.0 * with_cells.replayed_heldout.median_relative_error);

  // A fourth replay timed by a third model (tiles 40% dearer than the other replays'): held out,
  // no other launch tells its cost, so its cells must come out far off; they would not if the
  // held-out fits saw them.
  const KernelCostCoefficients odd_truth{8.0, 0.028, 0.0098 * 0.8 * 1.4, 0.0098};
  for (int cell = 0; cell < 40; ++cell) {
    KernelMeasurement m = launch("forward", 32, 4, 32768);
    m.placement = "replay:odd";
    m.tiles = m.lists * (6 + cell % 5);
    m.median_us = predict_kernel_us(odd_truth, m.lists, m.tiles, m.column_chunks) * (1.0 + noise(rng));
    kernels.push_back(m);
    m.direction = "backward";
    m.median_us *= 3.0;
    kernels.push_back(m);
  }
  const DirectionFit with_odd = fit_kernel_measurements(kernels)[0].forward;
  std::vector<double> odd_held;
  size_t sample = 0;
  for (const KernelMeasurement& k : kernels) {
    if (k.direction != "forward" || k.under_filled) continue;
    if (k.placement == "replay:odd") odd_held.push_back(with_odd.replayed_heldout.relative_errors[sample]);
    ++sample;
  }
  ASSERT_EQ(odd_held.size(), 40u);
  EXPECT_LT(median_and_max_magnitude(odd_held).first * -1.0, -0.15);  // under-predicted by more than 15%
  // The k-fold held-out error runs the whole procedure per fold and is no better than in sample.
  EXPECT_GE(with_odd.heldout.median_relative_error, with_odd.fit.median_relative_error * 0.9);
}

TEST(KernelCalibration, ThePerKeyBlockTermIsFittedOnlyWhenFilledLaunchesListAPartOfTheirChunk) {
  // Launched key blocks: K/V heads x ceil(local tokens / block_k), hand-counted.
  KernelMeasurement m = launch("backward", 32, 4, 65536);
  EXPECT_EQ(launched_key_blocks(m), 4 * 1024);
  EXPECT_EQ(launched_key_blocks(launch("backward", 32, 8, 16384 + 1, 128)), 8 * 129);
  m.tiles_per_list = 4;
  m.tiles = 4 * m.lists;
  m.key_lists = 4 * 1024;  // every key block listed
  m.column_lists = m.column_items = m.columns = 0;
  m.under_filled = false;
  std::vector<KernelMeasurement> launches{m, m};
  EXPECT_FALSE(fit_terms(launches, "backward").key_block);
  launches[1].key_lists = 4 * 1024 / 2;  // a half of them: the term is fitted
  EXPECT_TRUE(lists_part_of_the_chunk(launches[1]));
  EXPECT_TRUE(fit_terms(launches, "backward").key_block);
  EXPECT_FALSE(fit_terms(launches, "forward").key_block);
  launches[1].key_lists = 4 * 1024 / 2 + 1;  // more than a half: not enough to separate it
  EXPECT_FALSE(fit_terms(launches, "backward").key_block);
  launches[1].key_lists = 0;  // chunk-only launches list no key block: they do not trigger it
  EXPECT_FALSE(lists_part_of_the_chunk(launches[1]));
  EXPECT_FALSE(fit_terms(launches, "backward").key_block);
  launches[1].key_lists = 512;
  launches[1].under_filled = true;  // out of the fit, so it cannot separate the term either
  EXPECT_FALSE(fit_terms(launches, "backward").key_block);
  launches[1].under_filled = false;
  launches[0].key_lists = -1;  // units not recorded: the four terms
  const KernelTerms four = fit_terms(launches, "backward");
  EXPECT_FALSE(four.key_block);
  EXPECT_FALSE(four.key_list);
}

TEST(KernelCalibration, TheForwardIsFittedOnItsSixtyFourColumnItems) {
  // Forward launches at 128-token blocks whose lists gather 1-200 columns: a block_k chunk of 128
  // columns is one chunk but two of the kernel's 64-column items, so times made from a cost per
  // item are fitted exactly by the forward's units and not by the chunks.
  std::mt19937_64 rng = testing_support::test_rng();
  const double launch_us = 9.0, list_us = 0.05, tile_us = 0.0165, item_us = 0.015;
  std::vector<KernelMeasurement> launches;
  std::vector<KernelSample> samples;
  for (int k = 0; k < 40; ++k) {
    const int64_t tokens = int64_t{4096} << std::uniform_int_distribution<int>(0, 4)(rng);  // lists vary too
    KernelMeasurement m = launch("forward", 16, 2, tokens, 128);
    const int64_t tiles_per_list = std::uniform_int_distribution<int64_t>(1, 16)(rng);
    const int64_t columns_per_list = std::uniform_int_distribution<int64_t>(1, 200)(rng);
    m.tiles = tiles_per_list * m.lists;
    m.columns = columns_per_list * m.lists;
    m.column_chunks = (columns_per_list + 127) / 128 * m.lists;
    m.column_items = (columns_per_list + 63) / 64 * m.lists;
    m.median_us = launch_us + list_us * static_cast<double>(m.lists) + tile_us * static_cast<double>(m.tiles) +
                  item_us * static_cast<double>(m.column_items);
    m.under_filled = false;
    launches.push_back(m);
    KernelSample s{m.tiles, m.column_chunks, m.median_us, m.lists};
    s.column_items = m.column_items;
    samples.push_back(s);
  }
  const KernelTerms terms = fit_terms(launches, "forward");
  EXPECT_TRUE(terms.column_item);
  EXPECT_FALSE(terms.chunk);
  const KernelFit items = fit_kernel_cost(samples, terms);
  EXPECT_NEAR(items.coefficients.launch_us, launch_us, 1e-6);
  EXPECT_NEAR(items.coefficients.per_list_us, list_us, 1e-9);
  EXPECT_NEAR(items.coefficients.per_tile_us, tile_us, 1e-9);
  EXPECT_NEAR(items.coefficients.per_column_item_us, item_us, 1e-9);
  EXPECT_EQ(items.coefficients.per_vertical_chunk_us, 0.0);
  EXPECT_LT(items.max_relative_error, 1e-9);
  EXPECT_GT(fit_kernel_cost(samples, KernelTerms::four_terms()).max_relative_error, 1e-3);
  // Launches recorded before items were (column_items -1) keep the four terms.
  launches[3].column_items = -1;
  const KernelTerms four = fit_terms(launches, "forward");
  EXPECT_TRUE(four.chunk);
  EXPECT_FALSE(four.column_item);
}

TEST(KernelCalibration, CriticalEntriesAndTheirTerm) {
  // Entries of the heaviest segment beyond tiles / SMs, by hand: 4096 tiles on 128 SMs is 32 each.
  KernelMeasurement m = launch("backward", 16, 2, 8192);
  m.tiles = 4096;
  m.key_lists = 256;
  m.column_lists = m.column_items = m.columns = 0;
  m.under_filled = false;
  m.longest_key_list = 40;
  EXPECT_DOUBLE_EQ(critical_entries(m, 128), 8.0);
  EXPECT_DOUBLE_EQ(critical_entries(m, 132), 40.0 - 4096.0 / 132.0);
  m.longest_key_list = 32;
  EXPECT_EQ(critical_entries(m, 128), 0.0);  // exactly the share: nothing beyond it
  m.longest_key_list = 12;
  EXPECT_EQ(critical_entries(m, 128), 0.0);
  EXPECT_EQ(critical_entries(m, 0), 0.0);  // no SM count: no term
  KernelMeasurement forward = m;
  forward.direction = "forward";
  forward.longest_key_list = 4096;
  EXPECT_EQ(critical_entries(forward, 128), 0.0);
  // The term is fitted when the SMs are known and every backward launch records its longest segment.
  std::vector<KernelMeasurement> launches{m, m};
  EXPECT_TRUE(fit_terms(launches, "backward", 132).critical);
  EXPECT_FALSE(fit_terms(launches, "backward").critical);
  EXPECT_FALSE(fit_terms(launches, "forward", 132).critical);
  launches[1].longest_key_list = -1;
  EXPECT_FALSE(fit_terms(launches, "backward", 132).critical);
  EXPECT_TRUE(fit_terms(launches, "backward", 132).key_list) << "the other units are still recorded";
}

TEST(KernelCalibration, UnderFilledBackwardCellsEnterTheFitWithTheCriticalPathTerm) {
  // Backward times from a model with a critical-path cost, exactly: 50 + 0.02 x tiles + 0.2 x key
  // lists + 1.5 x max(0, longest - tiles / 132) us. The grid's launches (32 heads over 4 K/V heads,
  // 2048 segments) have no critical entries; three replays' cells (8 heads over 1 K/V head, 256
  // segments: under-filled) do. With two or more replays and the SMs known, those cells are fitted
  // and give back the critical-path cost; without the SMs there is no such term and they stay out.
  const KernelCostCoefficients forward_truth{10.0, 0.03, 0.01, 0.0};
  const auto backward_us = [](const KernelMeasurement& m) {
    return 50.0 + 0.02 * static_cast<double>(m.tiles) + 0.2 * static_cast<double>(m.key_lists) +
           1.5 * std::max(0.0, static_cast<double>(m.longest_key_list) - static_cast<double>(m.tiles) / 132.0);
  };
  const auto with_units = [](KernelMeasurement m, int64_t key_lists, int64_t longest) {
    m.key_lists = key_lists;
    m.column_lists = m.column_items = m.columns = 0;
    m.longest_key_list = longest;
    return m;
  };
  std::vector<KernelMeasurement> kernels;
  for (const int32_t tiles_per_list : {1, 2, 3, 4, 6, 8, 12, 16}) {
    KernelMeasurement f = with_units(launch("forward", 32, 4, 32768), 2048, 8 * tiles_per_list);
    f.tiles_per_list = tiles_per_list;
    f.tiles = f.lists * tiles_per_list;
    f.median_us = predict_kernel_us(forward_truth, f.lists, f.tiles, 0);
    f.under_filled = launch_under_filled(f, 132);
    KernelMeasurement b = f;
    b.direction = "backward";
    b.median_us = backward_us(b);
    b.under_filled = launch_under_filled(b, 132);
    ASSERT_FALSE(b.under_filled);
    ASSERT_EQ(critical_entries(b, 132), 0.0);
    kernels.push_back(f);
    kernels.push_back(b);
  }
  int64_t cells = 0;
  for (int replay = 0; replay < 3; ++replay) {
    for (int cell = 0; cell < 12; ++cell) {
      KernelMeasurement b = launch("backward", 8, 1, 16384);
      b.placement = str("replay:r", replay);
      b.tiles = b.lists * (1 + (cell + replay) % 4);
      b = with_units(b, 256, 40 + 15 * cell + 7 * replay);
      b.median_us = backward_us(b);
      b.under_filled = launch_under_filled(b, 132);
      ASSERT_TRUE(b.under_filled);
      ASSERT_GT(critical_entries(b, 132), 0.0);
      kernels.push_back(b);
      ++cells;
    }
  }
  std::vector<KernelMeasurement> fitted = kernels;
  const DirectionFit with_term = fit_kernel_measurements(fitted, FitOptions{.folds = 4, .sm_count = 132})[0].backward;
  EXPECT_EQ(with_term.replays, 3);
  EXPECT_EQ(with_term.under.samples, 0);
  EXPECT_EQ(with_term.replayed.samples, cells);
  EXPECT_NEAR(with_term.fit.coefficients.per_critical_entry_us, 1.5, 1e-9);
  EXPECT_NEAR(with_term.fit.coefficients.per_tile_us, 0.02, 1e-12);
  EXPECT_LT(with_term.fit.max_relative_error, 1e-6);
  fitted = kernels;
  const DirectionFit without = fit_kernel_measurements(fitted, FitOptions{.folds = 4})[0].backward;
  EXPECT_EQ(without.fit.coefficients.per_critical_entry_us, 0.0);
  EXPECT_EQ(without.under.samples, cells) << "no critical-path term: under-filled cells stay out";
  // Replays without critical entries leave the term nothing to describe: their under-filled cells
  // stay out.
  std::vector<KernelMeasurement> balanced = kernels;
  for (KernelMeasurement& k : balanced) {
    if (is_replayed_cell(k)) k.longest_key_list = 1;
  }
  EXPECT_EQ(fit_kernel_measurements(balanced, FitOptions{.folds = 4, .sm_count = 132})[0].backward.under.samples, cells);
  // One replay is not enough to choose the grid's weight on held-out cells: they stay out too.
  std::vector<KernelMeasurement> one_replay;
  for (const KernelMeasurement& k : kernels) {
    if (!is_replayed_cell(k) || k.placement == "replay:r0") one_replay.push_back(k);
  }
  EXPECT_EQ(fit_kernel_measurements(one_replay, FitOptions{.folds = 4, .sm_count = 132})[0].backward.under.samples, 12);
}

TEST(KernelCalibration, RestoringTheUnitsOfAStridedCaseDrawsItsStride) {
  // A recorded pair without units, at key block stride 4 (banded): the rebuilt index lists a
  // quarter of the key blocks, every one of them (the diagonals meet every covered block).
  KernelMeasurement m = launch("forward", 16, 2, 8192);
  m.tiles_per_list = 2;
  m.chunks_per_list = 1;
  m.tiles = 2 * m.lists;
  m.column_chunks = m.lists;
  m.placement = "banded";
  m.key_block_stride = 4;
  std::vector<KernelMeasurement> kernels{m, m};
  kernels[1].direction = "backward";
  restore_backward_units(kernels);
  EXPECT_EQ(kernels[1].key_lists, 2 * 128 / 4);
  EXPECT_EQ(kernels[1].column_lists, m.lists);
  EXPECT_EQ(kernels[1].columns, m.lists * 64);
  kernels[0].key_lists = kernels[1].key_lists = -1;
  kernels[1].key_block_stride = 2;
  test::expect_input_error([&] { restore_backward_units(kernels); }, {"not the forward and backward of one benchmark case"});
}

TEST(KernelCalibration, RefusesADirectionTooSmallForTheFolds) {
  std::vector<KernelMeasurement> kernels;
  for (const int32_t tiles : {1, 4, 16}) {
    for (const char* direction : {"forward", "backward"}) {
      KernelMeasurement m = launch(direction, 32, 4, 65536);
      m.tiles_per_list = tiles;
      m.tiles = m.lists * tiles;
      m.median_us = 10.0 + 0.01 * static_cast<double>(m.tiles);
      kernels.push_back(m);
    }
  }
  test::expect_input_error([&] { fit_kernel_measurements(kernels); },
                           {"forward of shape 64x64x128 (3 filled launches)", "5 folds needs at least 5 benchmark cases"});
}

/// Refits a shipped CSV with the under-filled rule of this version on a 132-SM GPU, with the
/// backward's units rebuilt from the benchmark's synthetic indices (restore_backward_units) unless
/// `four_terms`.
std::vector<ShapeFit> refit(const std::string& csv, bool four_terms = false) {
  std::vector<KernelMeasurement> kernels =
      parse_kernel_measurements_csv(read_file(std::string(SPARSERING_SOURCE_DIR) + "/docs/calibration/" + csv), csv);
  for (KernelMeasurement& k : kernels) k.under_filled = launch_under_filled(k, 132);
  if (!four_terms) restore_backward_units(kernels);
  return fit_kernel_measurements(kernels);
}

/// The refit that `calibrate --refit` runs (refit_kernel_calibration) of a shipped run's CSV into
/// the config that run wrote gives back its calibration: every coefficient and fit figure, and the
/// file's text itself.
void expect_shipped(const std::string& csv, const std::string& gpu_file, const std::string& replays = "",
                    const std::string& backward_replays = "") {
  SCOPED_TRACE(csv);
  // A bare name is a shipped config; a path is relative to the source tree.
  const std::string gpu_text = read_file(std::string(SPARSERING_SOURCE_DIR) +
                                         (gpu_file.find('/') == std::string::npos ? "/configs/gpus/" : "/") + gpu_file);
  const GpuConfig gpu = parse_gpu(gpu_text, gpu_file);
  ASSERT_TRUE(gpu.calibration.has_value());
  // The replays in the order a shell's glob gives them (`--cells DIR/*/cells.csv`).
  // The backward replays' backward cells alone (`--backward-cells`).
  std::vector<KernelMeasurement> cells;
  for (const auto& [folder, backward_only] : {std::pair{replays, false}, std::pair{backward_replays, true}}) {
    if (folder.empty()) continue;
    std::vector<std::filesystem::path> dirs;
    for (const auto& entry : std::filesystem::directory_iterator(std::string(SPARSERING_SOURCE_DIR) + "/docs/calibration/" + folder)) {
      dirs.push_back(entry.path());
    }
    std::sort(dirs.begin(), dirs.end());
    for (const std::filesystem::path& dir : dirs) {
      for (const KernelMeasurement& row : parse_replayed_cells(read_file(dir / "cells.csv"), read_file(dir / "validation.json"),
                                                               dir.string(), gpu.calibration->kernel_build)) {
        if (!backward_only || row.direction == "backward") cells.push_back(row);
      }
    }
  }
  const CalibrationRun run = refit_kernel_calibration(
      read_file(std::string(SPARSERING_SOURCE_DIR) + "/docs/calibration/" + csv), csv, gpu, FitOptions{}, cells);
  const std::vector<ShapeFit>& fits = run.fits;
  ASSERT_EQ(fits.size(), gpu.calibration->shapes.size());
  for (const ShapeFit& fit : fits) {
    const CalibratedShape expected = calibrated_shape(fit);
    const CalibratedShape* shipped = gpu.calibration->find(fit.shape);
    ASSERT_NE(shipped, nullptr) << to_string(fit.shape);
    for (const auto& [got, want] : {std::pair{expected.forward, shipped->forward}, std::pair{expected.backward, shipped->backward}}) {
      EXPECT_EQ(got.launch_us, want.launch_us);
      EXPECT_EQ(got.per_list_us, want.per_list_us);
      EXPECT_EQ(got.per_tile_us, want.per_tile_us);
      EXPECT_EQ(got.per_vertical_chunk_us, want.per_vertical_chunk_us);
      EXPECT_EQ(got.per_key_list_us, want.per_key_list_us);
      EXPECT_EQ(got.per_column_list_us, want.per_column_list_us);
      EXPECT_EQ(got.per_column_item_us, want.per_column_item_us);
      EXPECT_EQ(got.per_column_us, want.per_column_us);
      EXPECT_EQ(got.per_key_block_us, want.per_key_block_us);
      EXPECT_EQ(got.per_critical_entry_us, want.per_critical_entry_us);
    }
    ASSERT_TRUE(shipped->fit.has_value());
    EXPECT_EQ(expected.fit->samples, shipped->fit->samples);
    EXPECT_EQ(expected.fit->median_relative_error, shipped->fit->median_relative_error);
    EXPECT_EQ(expected.fit->max_relative_error, shipped->fit->max_relative_error);
    EXPECT_EQ(expected.fit->heldout_median_relative_error, shipped->fit->heldout_median_relative_error);
    EXPECT_EQ(expected.fit->heldout_max_relative_error, shipped->fit->heldout_max_relative_error);
    EXPECT_EQ(expected.fit->folds, shipped->fit->folds);
    EXPECT_EQ(expected.fit->dealings, shipped->fit->dealings);
  }
  EXPECT_EQ(set_gpu_calibration(gpu_text, run.calibration, gpu_file), gpu_text);
}

TEST(KernelCalibration, RefitsOfTheShippedMeasurementsReproduceTheShippedCalibrations) {
  expect_shipped("h100-sxm-kernels-595a2baa-random.csv", "h100-sxm.yaml");
  expect_shipped("h200-kernels-8a07dff2-banded.csv", "h200.yaml", "h200-8a07dff2-replays", "h200-8a07dff2-backward-replays");
  // The repeat with clocks: grid and replays measured again in one device call and refitted
  // there; the same fit from its files here.
  expect_shipped("h200-8a07dff2-clocks-repeat/h200-kernels-banded.csv", "docs/calibration/h200-8a07dff2-clocks-repeat/h200.yaml",
                 "h200-8a07dff2-clocks-repeat/replays", "h200-8a07dff2-clocks-repeat/backward-replays");
}

TEST(KernelCalibration, BackwardUnitsOfTheRecordedMeasurements) {
  // The backward fitted on the units its two passes schedule (key lists, tiles, column lists,
  // column items) against the four terms, on every recorded run with c96fff5c kernels: printed
  // for docs/calibration.md.
  for (const char* csv : {"h100-sxm-kernels-c96fff5c-banded.csv", "h100-sxm-kernels-c96fff5c-random.csv",
                          "h200-kernels-c96fff5c-banded.csv"}) {
    const std::vector<ShapeFit> units = refit(csv);
    const std::vector<ShapeFit> four = refit(csv, true);
    for (size_t s = 0; s < units.size(); ++s) {
      const DirectionFit& u = units[s].backward;
      const DirectionFit& f = four[s].backward;
      const KernelCostCoefficients& c = u.fit.coefficients;
      std::cout << csv << " " << to_string(units[s].shape) << " backward: units launch " << c.launch_us << " key list "
                << c.per_key_list_us << " tile " << c.per_tile_us << " column list " << c.per_column_list_us << " item "
                << c.per_column_item_us << " column " << c.per_column_us << ": in sample median "
                << u.fit.median_relative_error << " max " << u.fit.max_relative_error << ", held out median "
                << u.heldout.median_relative_error << " max " << u.heldout.max_relative_error
                << " | four terms: in sample " << f.fit.median_relative_error << " " << f.fit.max_relative_error
                << ", held out " << f.heldout.median_relative_error << " " << f.heldout.max_relative_error << "\n";
      EXPECT_EQ(c.per_list_us, 0.0);
      EXPECT_EQ(c.per_vertical_chunk_us, 0.0);
      EXPECT_GT(c.per_tile_us, 0.0);
    }
  }
}

TEST(KernelCalibration, RestoringTheBackwardUnitsRebuildsTheBenchmarkIndices) {
  // Rows of a recorded run get the units the benchmark's index had; rows out of the benchmark's
  // order are refused.
  std::vector<KernelMeasurement> kernels = parse_kernel_measurements_csv(
      read_file(std::string(SPARSERING_SOURCE_DIR) + "/docs/calibration/h200-kernels-c96fff5c-banded.csv"), "h200");
  restore_backward_units(kernels);
  for (const KernelMeasurement& k : kernels) {
    ASSERT_GE(k.key_lists, 0);
    // Banded, block_q = block_k, queries and keys of one length: every diagonal meets every key block.
    const int64_t key_blocks = (k.local_tokens + k.block_k - 1) / k.block_k;
    EXPECT_EQ(k.key_lists, k.tiles_per_list > 0 ? k.kv_heads * key_blocks : 0);
    EXPECT_EQ(k.column_lists, k.chunks_per_list > 0 ? k.lists : 0);
    EXPECT_EQ(k.columns, k.column_chunks * k.block_k);
    EXPECT_EQ(k.column_items, k.columns / 64);
    // ... and list i + s holds key block j for each of the row's offsets s: every segment holds
    // tiles_per_list entries of each query head of the group.
    EXPECT_EQ(k.longest_key_list, int64_t{k.tiles_per_list} * (k.q_heads / k.kv_heads));
  }
  // Rows that record the units but not the longest segment get it; units that disagree with the
  // rebuilt index are refused.
  std::vector<KernelMeasurement> partial = kernels;
  for (KernelMeasurement& k : partial) k.longest_key_list = -1;
  restore_backward_units(partial);
  for (size_t r = 0; r < kernels.size(); ++r) ASSERT_EQ(partial[r].longest_key_list, kernels[r].longest_key_list);
  partial[1].longest_key_list = -1;
  partial[1].key_lists += 1;
  test::expect_input_error([&] { restore_backward_units(partial); }, {"row 2", "key lists", "the record"});
  std::vector<KernelMeasurement> swapped = parse_kernel_measurements_csv(
      read_file(std::string(SPARSERING_SOURCE_DIR) + "/docs/calibration/h200-kernels-c96fff5c-banded.csv"), "h200");
  std::swap(swapped[0], swapped[2]);
  test::expect_input_error([&] { restore_backward_units(swapped); }, {"not the forward and backward of one benchmark case"});
}

TEST(KernelCalibration, HeldOutErrorOfTheRecordedMeasurements) {
  // The figures docs/calibration.md quotes: the worst launch is no better held out than in sample,
  // and the forward, which the four-term model explains, has a held-out median within 3%.
  for (const char* csv : {"h100-sxm-kernels.csv", "h200-kernels-banded.csv", "h200-kernels-random.csv",
                          "h100-sxm-kernels-c96fff5c-banded.csv", "h100-sxm-kernels-c96fff5c-random.csv",
                          "h200-kernels-c96fff5c-banded.csv", "h100-sxm-kernels-443afdb3-random.csv",
                          "h200-kernels-443afdb3-random.csv", "h100-sxm-kernels-595a2baa-random.csv",
                          "h200-kernels-595a2baa-random.csv", "h200-kernels-595a2baa-banded.csv",
                          "h200-kernels-0fade507-banded.csv", "h200-kernels-eec1e0a2-banded.csv",
                          "h200-kernels-8a07dff2-banded.csv"}) {
    for (const ShapeFit& fit : refit(csv)) {
      SCOPED_TRACE(str(csv, " ", to_string(fit.shape)));
      for (const DirectionFit* d : {&fit.forward, &fit.backward}) {
        EXPECT_GE(d->heldout.max_relative_error, 0.95 * d->fit.max_relative_error);
      }
      EXPECT_LT(fit.forward.heldout.median_relative_error, 0.03);
    }
  }
}

TEST(KernelCalibration, ExtrapolatingTheSmallShapeMissesTheMeasuredLargeOne) {
  // The 64x64x128 fit, scaled to 128x128x128 the way the cost model extrapolates, against the
  // measured 128x128x128 launches of the same run: the forward is over-predicted by about a
  // quarter (docs/calibration.md); the calibrated 128x128x128 coefficients are within 3% (median).
  for (const char* csv : {"h100-sxm-kernels-c96fff5c-banded.csv", "h200-kernels-c96fff5c-banded.csv"}) {
    SCOPED_TRACE(csv);
    std::vector<KernelMeasurement> kernels =
        parse_kernel_measurements_csv(read_file(std::string(SPARSERING_SOURCE_DIR) + "/docs/calibration/" + csv), csv);
    const std::vector<ShapeFit> fits = fit_kernel_measurements(kernels);
    ASSERT_EQ(fits.size(), 2u);
    GpuConfig gpu;
    gpu.name = "test";
    gpu.peak_tflops_bf16 = 989.4;
    GpuCalibration cal;
    cal.kernel_build = "unknown";
    cal.shapes = {calibrated_shape(fits[0])};
    gpu.calibration = cal;
    const AttentionCostModel extrapolated = make_attention_cost_model(gpu, 128, 128, 128);
    ASSERT_TRUE(extrapolated.calibration.extrapolated);
    std::vector<double> errors;
    for (const KernelMeasurement& k : kernels) {
      if (k.block_q != 128 || k.under_filled || k.direction != "forward") continue;
      const KernelCoefficients& c = extrapolated.forward;
      const KernelCostCoefficients as_fitted{c.launch_us, c.per_list_us, c.per_tile_us, c.per_vertical_chunk_us};
      errors.push_back((predict_kernel_us(as_fitted, k.lists, k.tiles, k.column_chunks) - k.median_us) / k.median_us);
    }
    ASSERT_FALSE(errors.empty());
    EXPECT_GT(median_and_max_magnitude(errors).first, 0.2);
    EXPECT_LT(fits[1].forward.fit.median_relative_error, 0.03);
  }
}

TEST(KernelCalibration, BackwardResidualsOfTheH100ShowTheLengthDependence) {
  // docs/calibration.md: with random placement the H100 backward's cost per tile grows with the
  // local length, so the fit over-predicts 16K launches and under-predicts 64K ones.
  const std::vector<ShapeFit> fits = refit("h100-sxm-kernels.csv");
  const std::vector<ResidualGroup>& by_length = fits.at(0).backward.by_local_tokens;
  ASSERT_EQ(by_length.size(), 2u);
  EXPECT_EQ(by_length[0].value, 16384);
  EXPECT_GT(by_length[0].median_signed_error, 0.05);
  EXPECT_EQ(by_length[1].value, 65536);
  EXPECT_LT(by_length[1].median_signed_error, -0.05);
}

/// In-sample |relative errors| (median, max) of a relative least-squares fit of `launches` to the
/// four terms, plus `tiles x local_tokens / 65536` when `length_term` is set.
std::pair<double, double> fit_with(const std::vector<KernelMeasurement>& launches, bool length_term) {
  const auto columns = static_cast<Eigen::Index>(length_term ? 5 : 4);
  Eigen::MatrixXd a(static_cast<Eigen::Index>(launches.size()), columns);
  for (size_t r = 0; r < launches.size(); ++r) {
    const KernelMeasurement& k = launches[r];
    const double features[5] = {1.0, static_cast<double>(k.lists), static_cast<double>(k.tiles),
                                static_cast<double>(k.column_chunks),
                                static_cast<double>(k.tiles) * static_cast<double>(k.local_tokens) / 65536.0};
    for (Eigen::Index c = 0; c < columns; ++c) a(static_cast<Eigen::Index>(r), c) = features[c] / k.median_us;
  }
  const Eigen::VectorXd x = a.colPivHouseholderQr().solve(Eigen::VectorXd::Ones(a.rows()));
  EXPECT_GE(x.minCoeff(), 0.0) << "the comparison assumes every coefficient comes out >= 0";
  const Eigen::VectorXd ratio = a * x;  // predicted / measured
  std::vector<double> errors;
  for (Eigen::Index r = 0; r < ratio.size(); ++r) errors.push_back(ratio(r) - 1.0);
  return median_and_max_magnitude(errors);
}

TEST(KernelCalibration, ALengthTermLowersTheH100BackwardMedianButNotItsWorstLaunch) {
  // docs/calibration.md, "What the backward still lacks": on the H100 the 64x64x128 backward's cost
  // per tile grows with the local length (residuals +5% at 16K, -10% at 64K). A fifth term
  // tiles x local tokens lowers the median error but leaves the worst launch as far off, so the
  // simulator's model keeps four terms.
  std::vector<KernelMeasurement> kernels = parse_kernel_measurements_csv(
      read_file(std::string(SPARSERING_SOURCE_DIR) + "/docs/calibration/h100-sxm-kernels-c96fff5c-banded.csv"), "h100");
  const std::vector<ShapeFit> fits = fit_kernel_measurements(kernels);
  const std::vector<ResidualGroup>& by_length = fits.at(0).backward.by_local_tokens;
  ASSERT_EQ(by_length.size(), 3u);
  EXPECT_GT(by_length.front().median_signed_error, 0.03);
  EXPECT_LT(by_length.back().median_signed_error, -0.05);
  std::vector<KernelMeasurement> backward;
  for (const KernelMeasurement& k : kernels) {
    if (k.direction == "backward" && k.block_q == 64 && !k.under_filled) backward.push_back(k);
  }
  const auto [median4, max4] = fit_with(backward, false);
  const auto [median5, max5] = fit_with(backward, true);
  std::cout << "H100 64x64x128 backward, in sample: four terms median " << median4 << " max " << max4
            << "; with tiles x local tokens median " << median5 << " max " << max5 << "\n";
  EXPECT_LT(median5, 0.75 * median4);
  EXPECT_GT(max5, 0.9 * max4);
}

}  // namespace
}  // namespace sparsering
