// Kernel and GEMM cost models: exact times against hand-computed formulas, calibrated and
// roofline (sim/cost/kernel_cost.hpp); the key blocks of a launch's chunk against brute force; which calibrated shape supplies the coefficients and how an
// uncalibrated shape is extrapolated and marked; stale and published calibrations
// (sim/cost/calibration_status.hpp).
#include "sim/cost/kernel_cost.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "core/kernel_build.hpp"
#include "tests/config/config_test_util.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

GpuConfig roofline_gpu() {
  GpuConfig gpu;
  gpu.name = "test-gpu";
  gpu.peak_tflops_bf16 = 1000.0;
  gpu.memory_gib = 80;
  gpu.memory_bandwidth_gbytes_per_s = 3000;
  return gpu;
}

CalibratedShape shape_entry(KernelShape shape, KernelCostCoefficients forward, KernelCostCoefficients backward) {
  CalibratedShape s;
  s.shape = shape;
  s.forward = forward;
  s.backward = backward;
  return s;
}

/// Calibrated on this build's kernels at 64x64x128 (and, with `more`, at 128x128x128 and 64x64x64).
GpuConfig calibrated_gpu(bool more = false) {
  GpuConfig gpu = roofline_gpu();
  GpuCalibration cal;
  cal.kernel_build = std::string(this_kernel_build());
  cal.shapes.push_back(shape_entry({64, 64, 128}, {5.0, 0.0, 0.01, 0.02}, {7.0, 0.0, 0.025, 0.05}));
  if (more) {
    cal.shapes.push_back(shape_entry({128, 128, 128}, {6.0, 0.05, 0.035, 0.045}, {8.0, 0.02, 0.09, 0.2}));
    cal.shapes.push_back(shape_entry({64, 64, 64}, {4.0, 0.01, 0.006, 0.011}, {5.0, 0.01, 0.015, 0.03}));
  }
  cal.gemm_efficiency = 0.75;
  cal.provenance.date = "2025-01-01";
  gpu.calibration = cal;
  return gpu;
}

TEST(CostModelTest, CalibratedKernelTime) {
  const AttentionCostModel m = make_attention_cost_model(calibrated_gpu(), 64, 64, 128);
  EXPECT_TRUE(m.calibrated);
  EXPECT_TRUE(m.notes.empty());
  WorkCounts work;
  work.tiles = 1000;
  work.column_chunks = 10;
  EXPECT_EQ(kernel_time_ns(m.forward, work, 16), 15200);   // 5 + 1000 x 0.01 + 10 x 0.02 us
  EXPECT_EQ(kernel_time_ns(m.backward, work, 16), 32500);  // 7 + 25 + 0.5 us
  EXPECT_EQ(kernel_time_ns(m.forward, WorkCounts{}, 16), 0) << "no work: no launch";
  work.lists = 500;
  EXPECT_EQ(kernel_time_ns(m.forward, work, 16), 15200) << "the calibration has no per-list cost";
}

TEST(CostModelTest, PerListCostIsChargedPerNonEmptyList) {
  const KernelCoefficients c{.launch_us = 8.0, .per_list_us = 0.03, .per_tile_us = 0.01, .per_vertical_chunk_us = 0.02};
  WorkCounts work{.tiles = 1000, .column_chunks = 10, .lists = 700};
  EXPECT_EQ(kernel_time_ns(c, work, 16), 8000 + 21000 + 10000 + 200);  // 8 + 700 x 0.03 + 1000 x 0.01 + 10 x 0.02 us
  work.lists = 0;
  EXPECT_EQ(kernel_time_ns(c, work, 16), 8000 + 10000 + 200);
  EXPECT_EQ(kernel_time_ns(c, WorkCounts{}, 16), 0) << "no list, no tile, no chunk: no launch";
}

TEST(CostModelTest, BackwardUnitsAreChargedAndScaled) {
  // The backward's own units: key lists, column lists, column items and columns.
  KernelCoefficients c{.launch_us = 100.0, .per_tile_us = 0.02};
  c.per_key_list_us = 0.2;
  c.per_column_list_us = 0.01;
  c.per_column_item_us = 0.05;
  c.per_column_us = 0.001;
  WorkCounts work{.tiles = 1000, .columns = 300, .column_chunks = 4, .lists = 700};
  work.key_lists = 50;
  work.column_lists = 3;
  work.column_items = 6;
  // 100 + 1000 x 0.02 + 50 x 0.2 + 3 x 0.01 + 6 x 0.05 + 300 x 0.001 us; lists and chunks cost 0.
  EXPECT_EQ(kernel_time_ns(c, work, 16), 100000 + 20000 + 10000 + 30 + 300 + 300);
  // Extrapolated from 64x64x128 to 128x128x128: key lists x2 (key block x head dim), column lists
  // x2 (query block x head dim), items and columns x1 (an item is a 64 x 64 step at any block).
  GpuConfig gpu = calibrated_gpu();
  CalibratedShape& entry = gpu.calibration->shapes.front();
  entry.backward.per_key_list_us = 0.2;
  entry.backward.per_column_list_us = 0.01;
  entry.backward.per_column_item_us = 0.05;
  entry.backward.per_column_us = 0.001;
  const AttentionCostModel m = make_attention_cost_model(gpu, 128, 128, 128);
  ASSERT_EQ(m.calibration.calibrated_shape, (KernelShape{64, 64, 128}));
  EXPECT_DOUBLE_EQ(m.backward.per_key_list_us, 0.4);
  EXPECT_DOUBLE_EQ(m.backward.per_column_list_us, 0.02);
  EXPECT_DOUBLE_EQ(m.backward.per_column_item_us, 0.05);
  EXPECT_DOUBLE_EQ(m.backward.per_column_us, 0.001);
  EXPECT_NE(m.calibration.scaling.find("backward per key list x2"), std::string::npos) << m.calibration.scaling;
}

TEST(CostModelTest, KeyBlocksOfTheChunkAgainstBruteForce) {
  // The (K/V head, key block) pairs the backward's key-block pass launches for a chunk: counted
  // here by walking the chunk's tokens block by block for every K/V head.
  EXPECT_EQ((LaunchGeometry{.heads = 16, .kv_heads = 2, .chunk_tokens = 16384, .block_k = 64}.key_blocks()), 512);
  EXPECT_EQ((LaunchGeometry{.heads = 16, .kv_heads = 2, .chunk_tokens = 16385, .block_k = 128}.key_blocks()), 2 * 129);
  EXPECT_EQ((LaunchGeometry{.heads = 4}.key_blocks()), 0) << "no K/V geometry: no key block";
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  for (int trial = 0; trial < 200; ++trial) {
    const LaunchGeometry g{.heads = 1, .kv_heads = static_cast<int64_t>(rng() % 9),
                           .chunk_tokens = static_cast<int64_t>(rng() % 5000), .block_k = 64 * static_cast<int64_t>(1 + rng() % 4)};
    int64_t pairs = 0;
    for (int64_t head = 0; head < g.kv_heads; ++head) {
      for (int64_t token = 0; token < g.chunk_tokens; token += g.block_k) ++pairs;
    }
    ASSERT_EQ(g.key_blocks(), pairs) << g.kv_heads << " K/V heads, " << g.chunk_tokens << " tokens, block " << g.block_k;
  }
  EXPECT_THROW((LaunchGeometry{.kv_heads = -1, .chunk_tokens = 64, .block_k = 64}.key_blocks()), InputError);
  EXPECT_THROW((LaunchGeometry{.kv_heads = 1, .chunk_tokens = 64, .block_k = 0}.key_blocks()), InputError);
}

TEST(CostModelTest, PerKeyBlockCostIsChargedPerKeyBlockOfTheChunk) {
  // 100 + 1000 x 0.02 + 50 key lists x 0.2 + 512 key blocks x 0.01 us: every key block of the
  // chunk, listed or not; a launch without work still costs 0; without the K/V geometry (the
  // heads-only form, a lower bound) the term is left out.
  KernelCoefficients c{.launch_us = 100.0, .per_tile_us = 0.02};
  c.per_key_list_us = 0.2;
  c.per_key_block_us = 0.01;
  WorkCounts work{.tiles = 1000};
  work.key_lists = 50;
  const LaunchGeometry launch{.heads = 16, .kv_heads = 2, .chunk_tokens = 16384, .block_k = 64};
  EXPECT_EQ(kernel_time_ns(c, work, launch), 100000 + 20000 + 10000 + 5120);
  EXPECT_EQ(kernel_time_ns(c, work, 16), 100000 + 20000 + 10000);
  EXPECT_EQ(kernel_time_ns(c, WorkCounts{}, launch), 0) << "no tile, no chunk: no launch";
  // Extrapolated from 64x64x128 to 128x128x128: x2, the 64-key CTAs launched per key block.
  GpuConfig gpu = calibrated_gpu();
  gpu.calibration->shapes.front().backward.per_key_block_us = 0.01;
  const AttentionCostModel m = make_attention_cost_model(gpu, 128, 128, 128);
  EXPECT_DOUBLE_EQ(m.backward.per_key_block_us, 0.02);
  EXPECT_EQ(m.forward.per_key_block_us, 0.0);
  EXPECT_NE(m.calibration.scaling.find("per key block of the chunk x2"), std::string::npos) << m.calibration.scaling;
  // Calibrated at the exact shape: as listed.
  EXPECT_EQ(make_attention_cost_model(gpu, 64, 64, 128).backward.per_key_block_us, 0.01);
}

TEST(CostModelTest, TheHeaviestKeySegmentCostsItsEntriesBeyondThePerSmShare) {
  // 4000 tiles on 100 SMs: 40 entries each. A longest key list of 70 is 30 entries beyond:
  // 50 + 4000 x 0.01 + 30 x 2 us; at 40 or below, nothing. Forward coefficients have no such term.
  KernelCoefficients c{.launch_us = 50.0, .per_tile_us = 0.01};
  c.per_critical_entry_us = 2.0;
  c.sm_count = 100;
  WorkCounts work{.tiles = 4000};
  work.longest_key_list = 70;
  const LaunchGeometry launch{.heads = 8, .kv_heads = 1, .chunk_tokens = 4096, .block_k = 64};
  EXPECT_EQ(kernel_time_ns(c, work, launch), 50000 + 40000 + 60000);
  EXPECT_EQ(KernelTimer(c, launch).critical_entries(work), 30.0);
  work.longest_key_list = 40;
  EXPECT_EQ(kernel_time_ns(c, work, launch), 50000 + 40000);
  work.longest_key_list = 3;
  EXPECT_EQ(kernel_time_ns(c, work, launch), 50000 + 40000);
  work.longest_key_list = 70;
  c.sm_count = 0;  // no SMs to share the tiles over: no critical path charged
  EXPECT_EQ(kernel_time_ns(c, work, launch), 50000 + 40000);
  c.sm_count = 100;
  // The model takes the GPU's SMs; extrapolated, the cost scales with the tile's FLOPs (from
  // 64x64x128 to 128x128x128: x4); a GPU without an SM count cannot charge it.
  GpuConfig gpu = calibrated_gpu();
  gpu.calibration->shapes.front().backward.per_critical_entry_us = 1.5;
  gpu.sm_count = 132;
  const AttentionCostModel exact = make_attention_cost_model(gpu, 64, 64, 128);
  EXPECT_EQ(exact.backward.per_critical_entry_us, 1.5);
  EXPECT_EQ(exact.backward.sm_count, gpu.sm_count);
  EXPECT_EQ(exact.forward.per_critical_entry_us, 0.0);
  const AttentionCostModel scaled = make_attention_cost_model(gpu, 128, 128, 128);
  EXPECT_DOUBLE_EQ(scaled.backward.per_critical_entry_us, 6.0);
  EXPECT_NE(scaled.calibration.scaling.find("per critical entry x4"), std::string::npos) << scaled.calibration.scaling;
  gpu.sm_count = 0;
  test::expect_input_error([&] { make_attention_cost_model(gpu, 64, 64, 128); }, {"per_critical_entry_us", "sm_count"});
}

TEST(CostModelTest, ExactShapeIsUsedWhenCalibrated) {
  const GpuConfig gpu = calibrated_gpu(true);
  for (const KernelShape& shape : {KernelShape{64, 64, 128}, KernelShape{128, 128, 128}, KernelShape{64, 64, 64}}) {
    const AttentionCostModel m = make_attention_cost_model(gpu, shape.block_q, shape.block_k, shape.head_dim);
    const CalibratedShape& entry = *gpu.calibration->find(shape);
    EXPECT_EQ(m.forward.per_list_us, entry.forward.per_list_us) << to_string(shape);
    EXPECT_EQ(m.forward.per_tile_us, entry.forward.per_tile_us) << to_string(shape);
    EXPECT_EQ(m.backward.per_vertical_chunk_us, entry.backward.per_vertical_chunk_us) << to_string(shape);
    EXPECT_FALSE(m.calibration.extrapolated);
    EXPECT_EQ(m.calibration.calibrated_shape, shape);
    EXPECT_TRUE(m.notes.empty()) << m.notes.front();
  }
}

TEST(CostModelTest, UncalibratedShapeIsExtrapolatedAndMarked) {
  // 128x64x128 from 64x64x128: tile FLOPs x2, query block x head dim x2, launch kept.
  const AttentionCostModel m = make_attention_cost_model(calibrated_gpu(), 128, 64, 128);
  EXPECT_TRUE(m.calibrated);
  EXPECT_TRUE(m.calibration.extrapolated);
  EXPECT_EQ(m.calibration.shape, (KernelShape{128, 64, 128}));
  EXPECT_EQ(m.calibration.calibrated_shape, (KernelShape{64, 64, 128}));
  EXPECT_DOUBLE_EQ(m.forward.per_tile_us, 0.02);
  EXPECT_DOUBLE_EQ(m.forward.per_vertical_chunk_us, 0.04);
  EXPECT_DOUBLE_EQ(m.forward.launch_us, 5.0);
  ASSERT_EQ(m.notes.size(), 1U);
  EXPECT_NE(m.notes[0].find("extrapolated: kernel shape 128x64x128"), std::string::npos) << m.notes[0];
  EXPECT_NE(m.notes[0].find("coefficients of 64x64x128"), std::string::npos) << m.notes[0];
  EXPECT_NE(m.calibration.scaling.find("x2 (tile FLOPs)"), std::string::npos) << m.calibration.scaling;
}

TEST(CostModelTest, ExtrapolationTakesTheNearestCalibratedShape) {
  const GpuConfig gpu = calibrated_gpu(true);
  // 256x256x128: same head dim first; 128x128x128 is one doubling per block away, 64x64x128 two.
  const AttentionCostModel wide = make_attention_cost_model(gpu, 256, 256, 128);
  EXPECT_EQ(wide.calibration.calibrated_shape, (KernelShape{128, 128, 128}));
  EXPECT_DOUBLE_EQ(wide.forward.per_tile_us, 0.035 * 4.0);
  EXPECT_DOUBLE_EQ(wide.forward.per_list_us, 0.05 * 2.0);
  EXPECT_DOUBLE_EQ(wide.backward.launch_us, 8.0);
  // 128x128x64: same head dim (64x64x64) wins over the same blocks at another head dim.
  const AttentionCostModel narrow = make_attention_cost_model(gpu, 128, 128, 64);
  EXPECT_EQ(narrow.calibration.calibrated_shape, (KernelShape{64, 64, 64}));
  EXPECT_DOUBLE_EQ(narrow.forward.per_tile_us, 0.006 * 4.0);
  EXPECT_DOUBLE_EQ(narrow.forward.per_list_us, 0.01 * 2.0);
  // Brute force over every supported shape: the chosen entry is calibrated, has the wanted head
  // dim whenever one does, and no entry of that head dim is nearer.
  for (const int64_t bq : {64, 128, 192, 256, 512}) {
    for (const int64_t bk : {64, 128, 256}) {
      for (const int64_t dim : {64, 128}) {
        const AttentionCostModel m = make_attention_cost_model(gpu, bq, bk, dim);
        ASSERT_TRUE(m.calibration.calibrated_shape.has_value());
        const KernelShape used = *m.calibration.calibrated_shape;
        EXPECT_EQ(used.head_dim, dim);
        const auto distance = [&](const KernelShape& s) {
          return std::abs(std::log2(static_cast<double>(s.block_q) / static_cast<double>(bq))) +
                 std::abs(std::log2(static_cast<double>(s.block_k) / static_cast<double>(bk)));
        };
        for (const CalibratedShape& other : gpu.calibration->shapes) {
          if (other.shape.head_dim == dim) {
            EXPECT_LE(distance(used), distance(other.shape)) << bq << "x" << bk << "x" << dim;
          }
        }
        EXPECT_EQ(m.calibration.extrapolated, !(used == KernelShape{bq, bk, dim}));
      }
    }
  }
}

TEST(CostModelTest, StaleAndPublishedCalibrationsAreMarked) {
  GpuConfig gpu = calibrated_gpu();
  EXPECT_FALSE(make_attention_cost_model(gpu, 64, 64, 128).calibration.stale);
  gpu.calibration->kernel_build = "unknown";
  const AttentionCostModel stale = make_attention_cost_model(gpu, 64, 64, 128);
  EXPECT_TRUE(stale.calibration.stale);
  EXPECT_EQ(stale.calibration.kernel_build, "unknown");
  EXPECT_EQ(stale.calibration.this_kernel_build, this_kernel_build());
  ASSERT_EQ(stale.notes.size(), 1U);
  EXPECT_NE(stale.notes[0].find("stale calibration"), std::string::npos);
  const std::string warning = stale_calibration_warning(stale.calibration);
  EXPECT_NE(warning.find("measured on kernel build unknown (not recorded)"), std::string::npos) << warning;
  EXPECT_NE(warning.find(std::string(this_kernel_build())), std::string::npos) << warning;
  EXPECT_NE(warning.find("run_calibrate_on_device.sh"), std::string::npos) << warning;
  // Another recorded build is stale too; this build's is not.
  const CalibrationStatus other = kernel_build_status(gpu, "sha256:" + std::string(64, 'f'));
  EXPECT_TRUE(other.stale);
  gpu.calibration->kernel_build = "sha256:" + std::string(64, 'f');
  EXPECT_FALSE(kernel_build_status(gpu, "sha256:" + std::string(64, 'f')).stale);
  EXPECT_TRUE(stale_calibration_warning(kernel_build_status(gpu, "sha256:" + std::string(64, 'f'))).empty());
  // Published figures are never compared with a build, and say what they are.
  gpu.calibration->source = CalibrationSource::published;
  gpu.calibration->kernel_build.clear();
  gpu.calibration->sources = {"a paper, table 1: 20 ns per tile"};
  const AttentionCostModel published = make_attention_cost_model(gpu, 64, 64, 128);
  EXPECT_FALSE(published.calibration.stale);
  EXPECT_TRUE(published.calibration.published());
  EXPECT_NE(published.source.find("published figures"), std::string::npos);
  ASSERT_EQ(published.notes.size(), 1U);
  EXPECT_NE(published.notes[0].find("published figures"), std::string::npos);
  // No calibration: roofline, nothing to compare.
  EXPECT_FALSE(make_attention_cost_model(roofline_gpu(), 64, 64, 128).calibration.stale);
  EXPECT_EQ(make_attention_cost_model(roofline_gpu(), 64, 64, 128).calibration.source, "roofline");
}

TEST(CostModelTest, RooflineKernelTime) {
  RooflineAssumptions a;
  a.attention_efficiency = 0.5;
  a.launch_us = 10.0;
  a.backward_flop_ratio = 2.5;
  a.gather_slowdown = 2.0;
  const AttentionCostModel m = make_attention_cost_model(roofline_gpu(), 64, 64, 128, a);
  EXPECT_FALSE(m.calibrated);
  ASSERT_FALSE(m.notes.empty());
  EXPECT_NE(m.notes[0].find("uncalibrated"), std::string::npos);
  EXPECT_EQ(m.forward.per_list_us, 0.0);
  EXPECT_EQ(m.backward.per_list_us, 0.0);
  EXPECT_NE(m.notes[0].find("no cost per (head, query block) list"), std::string::npos) << m.notes[0];
  // A tile: 4 x 64 x 64 x 128 = 2097152 FLOP at 500 TFLOP/s = 4.194304 ns.
  WorkCounts work;
  work.tiles = 1000;
  EXPECT_EQ(kernel_time_ns(m.forward, work, 1), 14194);   // 10 us + 4194.304 ns
  EXPECT_EQ(kernel_time_ns(m.backward, work, 1), 20486);  // 10 us + 10485.76 ns
  work.tiles = 0;
  work.column_chunks = 1000;
  EXPECT_EQ(kernel_time_ns(m.forward, work, 1), 18389);   // 10 us + 8388.608 ns
}

TEST(CostModelTest, GemmTime) {
  RooflineAssumptions a;
  a.gemm_efficiency = 0.6;
  EXPECT_EQ(gemm_time_ns(make_gemm_cost_model(roofline_gpu(), a), 1.2e12), 2000000);  // 600 TFLOP/s
  const GemmCostModel calibrated = make_gemm_cost_model(calibrated_gpu(), a);
  EXPECT_TRUE(calibrated.calibrated);
  EXPECT_EQ(gemm_time_ns(calibrated, 1.5e12), 2000000);  // 750 TFLOP/s
}

TEST(CostModelTest, IndexBuildTime) {
  // launch + per head-ktoken x heads x tokens / 1024 x 128 / sqrt(block_q x block_k):
  // 16 heads x 16384 tokens = 256 head-ktokens.
  RooflineAssumptions a;
  a.index_build_launch_us = 100.0;
  a.index_build_per_head_ktoken_us = 0.5;
  EXPECT_EQ(index_build_time_ns(a, 16, 16384, 128, 128), 100000 + 128000);
  EXPECT_EQ(index_build_time_ns(a, 16, 16384, 64, 64), 100000 + 256000);
  EXPECT_EQ(index_build_time_ns(a, 16, 16384, 64, 256), 100000 + 128000);
  EXPECT_EQ(index_build_time_ns(a, 1, 512, 128, 128), 100250);
  EXPECT_EQ(index_build_time_ns(a, 0, 512, 128, 128), 0);
  EXPECT_EQ(index_build_time_ns(a, 4, 0, 128, 128), 0);
  // The defaults reproduce the H200 measurements they were fitted on (docs/PERF.md, "Index
  // preparation: estimation by staged diagonals": 16 heads, builds into an allocated index of
  // 0.242 / 0.421 ms at 128K and 0.419 / 0.852 ms at 256K, blocks 128 / 64) within 7%.
  const RooflineAssumptions defaults;
  for (const auto& [tokens, block, ms] : std::vector<std::tuple<int64_t, int64_t, double>>{
           {131072, 128, 0.242}, {131072, 64, 0.421}, {262144, 128, 0.419}, {262144, 64, 0.852}}) {
    EXPECT_NEAR(ns_to_ms(index_build_time_ns(defaults, 16, tokens, block, block)), ms, 0.07 * ms) << tokens;
  }
  a.index_build_per_head_ktoken_us = -1.0;
  EXPECT_THROW(index_build_time_ns(a, 1, 1, 128, 128), InputError);
  EXPECT_THROW(index_build_time_ns(defaults, -1, 1, 128, 128), InputError);
  EXPECT_THROW(index_build_time_ns(defaults, 1, 1, 0, 128), InputError);
}

TEST(CostModelTest, EstimateTime) {
  // Passes: launch + per head-ktoken x heads x local tokens / 1024 x ceil(last_q / 64); selection:
  // launch + per head-ktoken x heads x sequence tokens / 1024.
  RooflineAssumptions a;
  a.estimate_launch_us = 40.0;
  a.estimate_per_head_ktoken_us = 0.25;
  a.select_launch_us = 10.0;
  a.select_per_head_ktoken_us = 0.125;
  // 8 heads x 4096 local tokens = 32 head-ktokens, last_q 128: 40 + 0.25 x 32 x 2 = 56 us; the
  // selection over 16384 tokens: 10 + 0.125 x 128 = 26 us.
  EXPECT_EQ(estimate_time_ns(a, 8, 4096, 16384, 128), 56000 + 26000);
  EXPECT_EQ(estimate_time_ns(a, 8, 4096, 16384, 64), 48000 + 26000);
  EXPECT_EQ(estimate_time_ns(a, 8, 4096, 16384, 100), 56000 + 26000);  // two whole 64-query tiles
  EXPECT_EQ(estimate_time_ns(a, 8, 4096, 16384, 1), 48000 + 26000);
  EXPECT_EQ(estimate_time_ns(a, 8, 0, 16384, 64), 26000);  // a rank without keys still selects
  EXPECT_EQ(estimate_time_ns(a, 0, 4096, 16384, 64), 0);
  // The defaults reproduce the H200 measurements (the same section: 16 heads, last_q 64, passes
  // 0.372 / 0.704 ms and selection 0.072 / 0.100 ms at 128K / 256K): a two-point fit of each.
  const RooflineAssumptions defaults;
  EXPECT_NEAR(ns_to_ms(estimate_time_ns(defaults, 16, 131072, 131072, 64)), 0.372 + 0.072, 0.005);
  EXPECT_NEAR(ns_to_ms(estimate_time_ns(defaults, 16, 262144, 262144, 64)), 0.704 + 0.100, 0.005);
  a.select_launch_us = -1.0;
  EXPECT_THROW(estimate_time_ns(a, 1, 1, 1, 64), InputError);
  EXPECT_THROW(estimate_time_ns(defaults, 1, 2, 1, 64), InputError);  // more local than sequence tokens
}

TEST(CostModelTest, RejectsBadInputs) {
  GpuConfig no_peak = roofline_gpu();
  no_peak.peak_tflops_bf16 = 0;
  EXPECT_THROW(make_attention_cost_model(no_peak, 64, 64, 128), InputError);
  EXPECT_THROW(make_attention_cost_model(roofline_gpu(), 0, 64, 128), InputError);
  EXPECT_THROW(gemm_time_ns(make_gemm_cost_model(roofline_gpu()), -1.0), InputError);
}

}  // namespace
}  // namespace sparsering
