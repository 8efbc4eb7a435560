// Tests of measure/calibration/kernel_calibration.hpp: the under-filled rule on hand-counted
// launches, the CSV round trip and its errors, and a refit of the shipped H100 measurements
// (docs/calibration/h100-sxm-kernels.csv) that must reproduce the calibration shipped in
// configs/gpus/h100-sxm.yaml (so the file and its raw data cannot drift apart).
#include <gtest/gtest.h>

#include <cmath>

#include "tests/config/config_test_util.hpp"
#include "common/atomic_file.hpp"
#include "measure/calibration/calibration_output.hpp"
#include "measure/calibration/kernel_calibration.hpp"
#include "sim/config/gpu_config.hpp"

namespace sparsering {
namespace {

KernelMeasurement launch(const char* direction, int32_t q_heads, int32_t kv_heads, int64_t local_tokens) {
  KernelMeasurement m;
  m.direction = direction;
  m.q_heads = q_heads;
  m.kv_heads = kv_heads;
  m.local_tokens = local_tokens;
  m.lists = int64_t{q_heads} * ((local_tokens + 63) / 64);
  return m;
}

TEST(KernelCalibration, UnderFilledRule) {
  // 132 SMs: two waves of two CTAs per SM = 528 CTAs.
  EXPECT_TRUE(launch_under_filled(launch("forward", 4, 1, 8192), 132));    // 512 lists
  EXPECT_FALSE(launch_under_filled(launch("forward", 4, 1, 8448), 132));   // 528 lists
  EXPECT_TRUE(launch_under_filled(launch("backward", 16, 2, 16384), 132));  // 2 x 256 = 512 key-block CTAs
  EXPECT_FALSE(launch_under_filled(launch("backward", 32, 4, 16384), 132)); // 1024
  EXPECT_FALSE(launch_under_filled(launch("forward", 16, 2, 16384), 132));  // 4096 lists
}

TEST(KernelCalibration, CsvRoundTripAndErrors) {
  KernelMeasurement m = launch("backward", 16, 2, 4096);
  m.block_q = m.block_k = 64;
  m.head_dim = 128;
  m.tiles_per_list = 3;
  m.tiles = 3 * m.lists;
  m.column_chunks = 7;
  m.repeats = 5;
  m.median_us = 123.25;
  m.min_us = 120.5;
  m.max_us = 130.0;
  m.under_filled = true;
  const std::vector<KernelMeasurement> back = parse_kernel_measurements_csv(kernel_measurements_csv({m, m}), "t.csv");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].direction, "backward");
  EXPECT_EQ(back[1].tiles, m.tiles);
  EXPECT_EQ(back[1].median_us, 123.25);
  EXPECT_TRUE(back[1].under_filled);
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

TEST(KernelCalibration, RefitOfShippedH100MeasurementsReproducesTheShippedCalibration) {
  const std::string root = SPARSERING_SOURCE_DIR;
  std::vector<KernelMeasurement> kernels =
      parse_kernel_measurements_csv(read_file(root + "/docs/calibration/h100-sxm-kernels.csv"), "h100 csv");
  const GpuConfig gpu = load_gpu(root + "/configs/gpus/h100-sxm.yaml");
  ASSERT_TRUE(gpu.calibration.has_value());
  for (KernelMeasurement& k : kernels) k.under_filled = launch_under_filled(k, gpu.sm_count);
  const DirectionFits forward = fit_kernel_measurements(kernels, "forward");
  const DirectionFits backward = fit_kernel_measurements(kernels, "backward");
  const auto same = [](double a, double b) { return std::abs(a - b) <= 1e-3 * std::abs(b); };
  EXPECT_TRUE(same(forward.fit.coefficients.launch_us, gpu.calibration->forward.launch_us));
  EXPECT_TRUE(same(forward.fit.coefficients.per_tile_us, gpu.calibration->forward.per_tile_us));
  EXPECT_TRUE(same(forward.fit.coefficients.per_vertical_chunk_us, gpu.calibration->forward.per_vertical_chunk_us));
  EXPECT_TRUE(same(backward.fit.coefficients.launch_us, gpu.calibration->backward.launch_us));
  EXPECT_TRUE(same(backward.fit.coefficients.per_tile_us, gpu.calibration->backward.per_tile_us));
  EXPECT_TRUE(same(backward.fit.coefficients.per_vertical_chunk_us, gpu.calibration->backward.per_vertical_chunk_us));
  EXPECT_EQ(forward.fit.samples + backward.fit.samples, gpu.calibration->fit_samples);
  // The per-list form explains the forward far better than the three-term form (docs/calibration.md).
  EXPECT_LT(forward.list_fit.median_relative_error, forward.fit.median_relative_error);
  EXPECT_LT(forward.list_fit.max_relative_error, 0.1);
}

}  // namespace
}  // namespace sparsering
