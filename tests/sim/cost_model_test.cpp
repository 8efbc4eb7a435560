// Kernel and GEMM cost models: exact times against hand-computed formulas, calibrated and
// roofline (sim/cost/kernel_cost.hpp).
#include "sim/cost/kernel_cost.hpp"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "common/error.hpp"

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

GpuConfig calibrated_gpu() {
  GpuConfig gpu = roofline_gpu();
  GpuCalibration cal;
  cal.block_q = 64;
  cal.block_k = 64;
  cal.head_dim = 128;
  cal.forward = {5.0, 0.01, 0.02};
  cal.backward = {7.0, 0.025, 0.05};
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

TEST(CostModelTest, CalibrationRescaledToOtherBlocks) {
  const AttentionCostModel m = make_attention_cost_model(calibrated_gpu(), 128, 64, 128);
  ASSERT_EQ(m.notes.size(), 1U);
  EXPECT_DOUBLE_EQ(m.forward.per_tile_us, 0.02);
  EXPECT_DOUBLE_EQ(m.forward.per_vertical_chunk_us, 0.04);
  EXPECT_DOUBLE_EQ(m.forward.launch_us, 5.0);
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
  // launch + per head-ktoken x heads x tokens / 1024: 16 heads x 16384 tokens = 256 head-ktokens.
  RooflineAssumptions a;
  a.index_build_launch_us = 100.0;
  a.index_build_per_head_ktoken_us = 0.5;
  EXPECT_EQ(index_build_time_ns(a, 16, 16384), 100000 + 128000);
  EXPECT_EQ(index_build_time_ns(a, 1, 512), 100250);
  EXPECT_EQ(index_build_time_ns(a, 0, 512), 0);
  EXPECT_EQ(index_build_time_ns(a, 4, 0), 0);
  // The defaults reproduce the H200 measurements they were fitted on (docs/PERF.md: 16 heads at
  // 32K, 64K and 128K tokens took 0.331, 0.586 and 1.008 ms) within 6%.
  const RooflineAssumptions defaults;
  for (const auto& [tokens, ms] : std::vector<std::pair<int64_t, double>>{{32768, 0.331}, {65536, 0.586}, {131072, 1.008}}) {
    EXPECT_NEAR(ns_to_ms(index_build_time_ns(defaults, 16, tokens)), ms, 0.06 * ms) << tokens;
  }
  a.index_build_per_head_ktoken_us = -1.0;
  EXPECT_THROW(index_build_time_ns(a, 1, 1), InputError);
  EXPECT_THROW(index_build_time_ns(defaults, -1, 1), InputError);
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
