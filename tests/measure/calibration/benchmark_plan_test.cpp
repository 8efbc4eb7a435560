// Tests of measure/calibration/benchmark_plan.hpp: every case fits its K/V chunk, the grid varies
// what the fit separates (tiles alone, chunks alone, both; several head counts and lengths; lists
// as long as dense steps') at
// every shape, the quick grid leaves enough filled launches for the held-out folds, the default
// shapes cover every block the tuner searches at every shipped model's head dim, the launches
// whose lists meet a part of the key blocks make the backward's per-key-block cost identifiable
// (and what they add to a device run), shape lists parse and refuse what the kernels cannot run,
// and the hop sizes span 64 KiB - 1 GiB.
#include <gtest/gtest.h>

#include <Eigen/Dense>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "tests/config/config_test_util.hpp"
#include "measure/calibration/benchmark_plan.hpp"
#include "kernels/index/count_sparse_index.hpp"
#include "measure/calibration/kernel_calibration.hpp"
#include "measure/calibration/synthetic_index.hpp"
#include "sim/config/gpu_config.hpp"
#include "sim/config/model_config.hpp"
#include "tuner/search/search_space.hpp"

namespace sparsering {
namespace {

/// The two measurements a case makes, flagged for a 132-SM GPU.
std::vector<KernelMeasurement> launches(const KernelBenchCase& c) {
  KernelMeasurement m;
  m.q_heads = c.q_heads;
  m.kv_heads = c.kv_heads;
  m.local_tokens = c.local_tokens;
  m.block_q = static_cast<int32_t>(c.shape.block_q);
  m.block_k = static_cast<int32_t>(c.shape.block_k);
  m.head_dim = static_cast<int32_t>(c.shape.head_dim);
  m.lists = int64_t{c.q_heads} * ((c.local_tokens + c.shape.block_q - 1) / c.shape.block_q);
  std::vector<KernelMeasurement> out;
  for (const char* direction : {"forward", "backward"}) {
    m.direction = direction;
    m.under_filled = launch_under_filled(m, 132);
    out.push_back(m);
  }
  return out;
}

TEST(BenchmarkPlan, CasesFitAndVaryEveryTermAtEveryShape) {
  for (const bool quick : {false, true}) {
    SCOPED_TRACE(quick);
    const std::vector<KernelShape> shapes = default_calibration_shapes();
    const std::vector<KernelBenchCase> cases = default_kernel_cases(quick, shapes);
    for (const KernelShape& shape : shapes) {
      SCOPED_TRACE(to_string(shape));
      std::set<int32_t> heads;
      std::set<int64_t> lengths;
      bool tiles_only = false, chunks_only = false, both = false, partial_items = false, long_lists = false;
      std::map<std::string, int64_t> filled;
      std::map<std::string, std::set<int64_t>> filled_lengths;
      for (const KernelBenchCase& c : cases) {
        if (!(c.shape == shape)) continue;
        EXPECT_LE(int64_t{c.tiles_per_list} + c.chunks_per_list, c.local_tokens / shape.block_k);
        EXPECT_EQ(c.q_heads % c.kv_heads, 0);
        heads.insert(c.q_heads);
        lengths.insert(c.local_tokens);
        tiles_only = tiles_only || (c.tiles_per_list > 0 && c.chunks_per_list == 0);
        chunks_only = chunks_only || (c.tiles_per_list == 0 && c.chunks_per_list > 0);
        both = both || (c.tiles_per_list > 0 && c.chunks_per_list > 0);
        if (c.columns_per_list >= 0) {
          EXPECT_EQ(c.chunks_per_list, (c.columns_per_list + shape.block_k - 1) / shape.block_k);
          partial_items = partial_items || c.columns_per_list % 64 != 0;
        }
        for (const KernelMeasurement& m : launches(c)) {
          if (m.under_filled) continue;
          long_lists = long_lists || c.tiles_per_list >= 128;
          ++filled[m.direction];
          filled_lengths[m.direction].insert(m.local_tokens);
        }
      }
      EXPECT_TRUE(tiles_only && chunks_only && both);
      EXPECT_GE(heads.size(), 2u);
      EXPECT_GE(lengths.size(), 2u);
      // Enough filled launches per direction for the held-out error's five folds.
      EXPECT_GE(filled["forward"], 5);
      EXPECT_GE(filled["backward"], 5);
      // The full grid shows the backward at three filled lengths (docs/calibration.md), lists
      // with partly filled 64-column items, which separate its per-column from its per-item cost,
      // and filled launches whose lists are as long as dense steps'.
      if (!quick) {
        EXPECT_GE(filled_lengths["backward"].size(), 3u);
        EXPECT_TRUE(partial_items);
        EXPECT_TRUE(long_lists);
      }
    }
  }
}

/// The backward measurement of a case with the units its benchmark index has (banded placement,
/// as the shipped calibrations run): key lists from the index's tiles (built without columns,
/// which do not change them), column units from the case's counts.
KernelMeasurement backward_with_units(const KernelBenchCase& c) {
  KernelMeasurement m = launches(c).back();
  m.tiles_per_list = c.tiles_per_list;
  m.chunks_per_list = c.chunks_per_list;
  m.key_block_stride = c.key_block_stride;
  m.tiles = m.lists * c.tiles_per_list;
  m.column_chunks = m.lists * c.chunks_per_list;
  const int64_t columns = c.columns_per_list >= 0 ? c.columns_per_list : int64_t{c.chunks_per_list} * c.shape.block_k;
  m.columns = m.lists * columns;
  m.column_lists = columns > 0 ? m.lists : 0;
  m.column_items = m.lists * ((columns + 63) / 64);
  SyntheticIndexSpec spec{c.q_heads, c.local_tokens, c.local_tokens, static_cast<int32_t>(c.shape.block_q),
                          static_cast<int32_t>(c.shape.block_k), c.tiles_per_list, 0, 1, true};
  spec.key_block_stride = c.key_block_stride;
  m.key_lists = backward_units(make_synthetic_index(spec), c.q_heads / c.kv_heads).key_lists;
  return m;
}

/// How much the launches' units leave the per-key-block cost to the others: the variance inflation
/// of its column in the relative design matrix of the backward's units (each row divided by its
/// time, each column scaled to unit length), [(A^T A)^-1] at that column. 1 when the column is
/// orthogonal to the others, large when the other terms nearly reproduce it: the factor by which
/// timing noise is magnified in the fitted per-key-block cost.
double key_block_variance_inflation(const std::vector<KernelMeasurement>& launches, const KernelCostCoefficients& truth) {
  Eigen::MatrixXd a(static_cast<Eigen::Index>(launches.size()), 7);
  for (size_t r = 0; r < launches.size(); ++r) {
    const KernelMeasurement& m = launches[r];
    const double time = truth.launch_us + truth.per_key_list_us * static_cast<double>(m.key_lists) +
                        truth.per_tile_us * static_cast<double>(m.tiles) +
                        truth.per_column_list_us * static_cast<double>(m.column_lists) +
                        truth.per_column_item_us * static_cast<double>(m.column_items) +
                        truth.per_column_us * static_cast<double>(m.columns) +
                        truth.per_key_block_us * static_cast<double>(launched_key_blocks(m));
    const double row[7] = {1.0, static_cast<double>(m.key_lists), static_cast<double>(m.tiles),
                           static_cast<double>(m.column_lists), static_cast<double>(m.column_items),
                           static_cast<double>(m.columns), static_cast<double>(launched_key_blocks(m))};
    for (Eigen::Index k = 0; k < 7; ++k) a(static_cast<Eigen::Index>(r), k) = row[k] / time;
  }
  for (Eigen::Index k = 0; k < 7; ++k) a.col(k) /= a.col(k).norm();
  const Eigen::MatrixXd gram = a.transpose() * a;
  return gram.inverse()(6, 6);
}

TEST(BenchmarkPlan, ListsOverPartOfTheKeyBlocksSeparateTheCostPerLaunchedKeyBlock) {
  // Every earlier case lists every key block of its chunk (banded diagonals meet them all), so
  // its backward key lists are the (K/V head, key block) pairs the key-block pass launches, and
  // only the chunk-only launches (no key list) say anything of a cost per launched pair. The
  // cases with a key block stride list a half, a quarter or an eighth of them, stay filled (at
  // least 1024 CTAs of 64 keys with entries), make the fit add the per-key-block term, and
  // lower the noise magnification of the fitted per-key-block cost well below the earlier grid's.
  const KernelCostCoefficients truth{.launch_us = 150.0, .per_tile_us = 0.026, .per_key_list_us = 0.2,
                                     .per_column_list_us = 0.02, .per_column_item_us = 0.06, .per_column_us = 0.0004,
                                     .per_key_block_us = 0.05};
  for (const KernelShape& shape : default_calibration_shapes()) {
    SCOPED_TRACE(to_string(shape));
    std::vector<KernelMeasurement> all;
    std::vector<KernelMeasurement> earlier;
    std::set<int32_t> strides;
    for (const KernelBenchCase& c : default_kernel_cases(false, {shape})) {
      const KernelMeasurement m = backward_with_units(c);
      if (m.under_filled) continue;
      all.push_back(m);
      if (c.key_block_stride == 1) {
        earlier.push_back(m);
        continue;
      }
      strides.insert(c.key_block_stride);
      const int64_t covered = (c.local_tokens / c.shape.block_k + c.key_block_stride - 1) / c.key_block_stride;
      EXPECT_EQ(m.key_lists, int64_t{c.kv_heads} * covered) << "banded lists meet every covered key block";
      EXPECT_GE(m.key_lists * (c.shape.block_k / 64), 1024);
      EXPECT_TRUE(lists_part_of_the_chunk(m));
    }
    EXPECT_EQ(strides, (std::set<int32_t>{2, 4, 8}));
    EXPECT_TRUE(fit_terms(all, "backward").key_block);
    EXPECT_FALSE(fit_terms(earlier, "backward").key_block);
    const double before = key_block_variance_inflation(earlier, truth);
    const double after = key_block_variance_inflation(all, truth);
    std::cout << to_string(shape) << " backward, variance inflation of the per-key-block cost: " << before << " without, "
              << after << " with the partial key lists (" << all.size() - earlier.size() << " launches)\n";
    EXPECT_LT(after, 0.5 * before);
    // Noise-free times of the whole grid give back every coefficient.
    std::vector<KernelSample> samples;
    for (const KernelMeasurement& m : all) {
      KernelSample s{m.tiles, m.column_chunks, 0.0, m.lists};
      s.key_lists = m.key_lists;
      s.column_lists = m.column_lists;
      s.column_items = m.column_items;
      s.columns = m.columns;
      s.key_blocks = launched_key_blocks(m);
      s.time_us = predict_kernel_us(truth, s);
      samples.push_back(s);
    }
    const KernelCostCoefficients got = fit_kernel_cost(samples, fit_terms(all, "backward")).coefficients;
    EXPECT_NEAR(got.per_key_block_us, truth.per_key_block_us, 1e-6);
    EXPECT_NEAR(got.per_key_list_us, truth.per_key_list_us, 1e-6);
    EXPECT_NEAR(got.per_tile_us, truth.per_tile_us, 1e-8);
    EXPECT_NEAR(got.launch_us, truth.launch_us, 1e-3);
  }
}

TEST(BenchmarkPlan, WhatThePartialKeyListsAddToADeviceRun) {
  // Kernel time of every case, 1 warm-up and 7 timed repeats of both directions, predicted by the
  // shipped H100 calibration (configs/gpus/h100-sxm.yaml), and the host time to draw the new
  // cases' indices (banded, as the shipped runs): the figures docs/calibration.md quotes.
  const GpuConfig gpu = load_gpu(std::filesystem::path(SPARSERING_SOURCE_DIR) / "configs" / "gpus" / "h100-sxm.yaml");
  ASSERT_TRUE(gpu.calibration.has_value());
  double earlier_us = 0.0;
  double added_us = 0.0;
  double added_host_s = 0.0;
  int64_t added = 0;
  for (const KernelBenchCase& c : default_kernel_cases(false, default_calibration_shapes())) {
    const CalibratedShape* entry = gpu.calibration->find(c.shape);
    ASSERT_NE(entry, nullptr);
    const KernelMeasurement m = backward_with_units(c);
    KernelSample s{m.tiles, m.column_chunks, 0.0, m.lists};
    s.key_lists = m.key_lists;
    s.column_lists = m.column_lists;
    s.column_items = m.column_items;
    s.columns = m.columns;
    s.key_blocks = launched_key_blocks(m);
    const double us = 8.0 * (predict_kernel_us(entry->forward, m.lists, m.tiles, m.column_chunks) +
                             predict_kernel_us(entry->backward, s));
    (c.key_block_stride > 1 ? added_us : earlier_us) += us;
    if (c.key_block_stride == 1) continue;
    ++added;
    SyntheticIndexSpec spec{c.q_heads, c.local_tokens, c.local_tokens, static_cast<int32_t>(c.shape.block_q),
                            static_cast<int32_t>(c.shape.block_k), c.tiles_per_list, c.chunks_per_list, 1, true};
    spec.key_block_stride = c.key_block_stride;
    const auto start = std::chrono::steady_clock::now();
    const SparseIndex index = make_synthetic_index(spec);
    added_host_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(index.tiles(), m.tiles);
  }
  std::cout << "kernel time of the grid (8 launches per direction, H100 model): " << earlier_us / 1e6 << " s for the "
            << "earlier cases, " << added_us / 1e6 << " s for the " << added << " cases with partial key lists; their "
            << "indices take " << added_host_s << " s to draw on this host\n";
  EXPECT_EQ(added, 36);
  EXPECT_LT(added_us, 0.25 * earlier_us);
}

TEST(BenchmarkPlan, DefaultShapesCoverTheTunersBlocksAtTheShippedHeadDims) {
  const std::vector<KernelShape> shapes = default_calibration_shapes();
  std::set<int64_t> head_dims;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(SPARSERING_SOURCE_DIR) / "configs" / "models")) {
    if (entry.path().extension() == ".yaml") head_dims.insert(load_model(entry.path()).head_dim);
  }
  ASSERT_FALSE(head_dims.empty());
  for (const int64_t head_dim : head_dims) {
    for (const int64_t block : SearchSpaceOptions{}.block_sizes) {
      const KernelShape wanted{block, block, head_dim};
      EXPECT_NE(std::find(shapes.begin(), shapes.end(), wanted), shapes.end()) << to_string(wanted);
    }
  }
}

TEST(BenchmarkPlan, ParsesShapeLists) {
  EXPECT_EQ(parse_kernel_shapes("64x64x128,128x128x128", "--shapes"),
            (std::vector<KernelShape>{{64, 64, 128}, {128, 128, 128}}));
  EXPECT_EQ(parse_kernel_shapes("128x64x64", "--shapes"), (std::vector<KernelShape>{{128, 64, 64}}));
  test::expect_input_error([] { parse_kernel_shapes("64x64", "--shapes"); }, {"--shapes", "\"64x64\"", "64x64x128"});
  test::expect_input_error([] { parse_kernel_shapes("", "--shapes"); }, {"--shapes", "\"\""});
  test::expect_input_error([] { parse_kernel_shapes("64x64x128,", "--shapes"); }, {"--shapes", "\"\""});
  test::expect_input_error([] { parse_kernel_shapes("64xax128", "--shapes"); }, {"\"64xax128\""});
  test::expect_input_error([] { parse_kernel_shapes("64x64x128x1", "--shapes"); }, {"\"64x64x128x1\""});
  test::expect_input_error([] { parse_kernel_shapes("64x48x128", "--shapes"); }, {"block_k", "multiple of 64", "48"});
  test::expect_input_error([] { parse_kernel_shapes("64x64x96", "--shapes"); }, {"head_dim", "96"});
  test::expect_input_error([] { parse_kernel_shapes("64x64x128,64x64x128", "--shapes"); }, {"64x64x128 is given twice"});
}

TEST(BenchmarkPlan, HopSizes) {
  const std::vector<int64_t> sizes = default_hop_sizes(false, false);
  EXPECT_EQ(sizes.front(), 65536);
  EXPECT_EQ(sizes.back(), int64_t{1} << 30);
  EXPECT_EQ(sizes.size(), 8u);
  EXPECT_EQ(default_hop_sizes(false, true).size(), 15u);
  EXPECT_EQ(default_hop_sizes(true, false).back(), int64_t{1} << 28);
}

}  // namespace
}  // namespace sparsering
