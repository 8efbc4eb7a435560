// Tests of measure/calibration/calibration_refit.hpp: a refit of measurements timed by a known
// model (with partial key lists, so the per-key-block term is fitted) gives back the model and
// keeps the config's kernel build, provenance and GEMM efficiency; notes on dropped shapes and
// launches flagged otherwise than recorded; refusal of configs without a measured calibration and
// of unreadable CSVs. (Refits of the shipped runs into the shipped configs:
// kernel_calibration_test.cpp, RefitsOfTheShippedMeasurementsReproduceTheShippedCalibrations.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/config/config_test_util.hpp"
#include "measure/calibration/calibration_refit.hpp"
#include "sim/config/gpu_config.hpp"

namespace sparsering {
namespace {

const char* kGpuYaml = R"(# a config written by a calibrate run
name: refit-gpu
memory_gib: 80
peak_tflops_bf16: 1000
memory_bandwidth_gbytes_per_s: 3000
sm_count: 132
l2_mib: 50
calibration:
  source: measured
  kernel_build: "unknown"
  gemm_efficiency: 0.7
  provenance: {gpu: "Test GPU", driver: "1", nccl: "2", commit: "abc", date: "2026-01-01"}
  shapes:
    - block_q: 64
      block_k: 64
      head_dim: 128
      forward: {launch_us: 1, per_list_us: 0, per_tile_us: 0.1, per_vertical_chunk_us: 0}
      backward: {launch_us: 1, per_list_us: 0, per_tile_us: 0.1, per_vertical_chunk_us: 0}
      fit: {samples: 10, median_relative_error: 0.1, max_relative_error: 0.2, heldout_median_relative_error: 0.1, heldout_max_relative_error: 0.2, folds: 5}
    - block_q: 128
      block_k: 128
      head_dim: 128
      forward: {launch_us: 1, per_list_us: 0, per_tile_us: 0.1, per_vertical_chunk_us: 0}
      backward: {launch_us: 1, per_list_us: 0, per_tile_us: 0.1, per_vertical_chunk_us: 0}
      fit: {samples: 10, median_relative_error: 0.1, max_relative_error: 0.2, heldout_median_relative_error: 0.1, heldout_max_relative_error: 0.2, folds: 5}
)";

const KernelCostCoefficients kForward{.launch_us = 8.0, .per_list_us = 0.03, .per_tile_us = 0.01, .per_vertical_chunk_us = 0.01};
const KernelCostCoefficients kBackward{.launch_us = 150.0, .per_tile_us = 0.026, .per_key_list_us = 0.2,
                                       .per_column_list_us = 0.02, .per_column_item_us = 0.06, .per_key_block_us = 0.05};

/// Measurements of one 64x64x128 grid with recorded units, timed by kForward and kBackward: key
/// lists over all, a half or a quarter of the key blocks (key_block_stride 1, 2, 4).
std::vector<KernelMeasurement> measurements() {
  std::vector<KernelMeasurement> out;
  for (const auto& [q_heads, kv_heads] : std::vector<std::pair<int32_t, int32_t>>{{16, 2}, {32, 4}, {32, 8}}) {
    for (const int64_t local : {int64_t{32768}, int64_t{65536}}) {
      for (const int32_t stride : {1, 2, 4}) {
        for (const auto& [tiles, chunks] : std::vector<std::pair<int32_t, int32_t>>{{4, 0}, {16, 1}, {0, 2}}) {
          KernelMeasurement m;
          m.q_heads = q_heads;
          m.kv_heads = kv_heads;
          m.local_tokens = local;
          m.block_q = m.block_k = 64;
          m.head_dim = 128;
          m.tiles_per_list = tiles;
          m.chunks_per_list = chunks;
          m.columns_per_list = chunks * 64;
          m.key_block_stride = stride;
          m.placement = "banded";
          m.lists = int64_t{q_heads} * (local / 64);
          m.tiles = m.lists * tiles;
          m.column_chunks = m.lists * chunks;
          m.columns = m.column_chunks * 64;
          m.column_lists = chunks > 0 ? m.lists : 0;
          m.column_items = m.column_chunks;
          m.key_lists = tiles > 0 ? int64_t{kv_heads} * (local / 64) / stride : 0;
          m.repeats = 7;
          m.direction = "forward";
          m.median_us = m.min_us = m.max_us = predict_kernel_us(kForward, m.lists, m.tiles, m.column_chunks);
          out.push_back(m);
          KernelSample s{m.tiles, m.column_chunks, 0.0, m.lists};
          s.key_lists = m.key_lists;
          s.column_lists = m.column_lists;
          s.column_items = m.column_items;
          s.columns = m.columns;
          s.key_blocks = launched_key_blocks(m);
          m.direction = "backward";
          m.median_us = m.min_us = m.max_us = predict_kernel_us(kBackward, s);
          out.push_back(m);
        }
      }
    }
  }
  return out;
}

TEST(CalibrationRefit, GivesBackTheModelThatTimedTheMeasurementsAndKeepsTheMeasurementsIdentity) {
  const GpuConfig gpu = parse_gpu(kGpuYaml, "refit-gpu.yaml");
  std::vector<KernelMeasurement> recorded = measurements();
  recorded.front().under_filled = true;  // recorded otherwise than this version flags it
  const CalibrationRun run = refit_kernel_calibration(kernel_measurements_csv(recorded), "run.csv", gpu);
  ASSERT_EQ(run.calibration.shapes.size(), 1u);
  const CalibratedShape& shape = run.calibration.shapes.front();
  EXPECT_EQ(shape.shape, (KernelShape{64, 64, 128}));
  EXPECT_NEAR(shape.forward.per_list_us, kForward.per_list_us, 1e-9);
  EXPECT_NEAR(shape.forward.per_tile_us, kForward.per_tile_us, 1e-9);
  EXPECT_NEAR(shape.backward.per_key_block_us, kBackward.per_key_block_us, 1e-9);
  EXPECT_NEAR(shape.backward.per_key_list_us, kBackward.per_key_list_us, 1e-9);
  EXPECT_NEAR(shape.backward.per_column_item_us, kBackward.per_column_item_us, 1e-9);
  EXPECT_NEAR(shape.backward.launch_us, kBackward.launch_us, 1e-6);
  ASSERT_TRUE(shape.fit.has_value());
  EXPECT_LT(shape.fit->max_relative_error, 1e-6);
  EXPECT_EQ(run.calibration.kernel_build, "unknown");
  EXPECT_EQ(run.calibration.provenance.commit, "abc");
  EXPECT_EQ(run.calibration.gemm_efficiency, 0.7);
  EXPECT_EQ(run.kernels.size(), recorded.size());
  for (const KernelMeasurement& k : run.kernels) EXPECT_GT(k.predicted_us, 0.0);
  ASSERT_EQ(run.notes.size(), 3u);
  EXPECT_NE(run.notes[0].find("refit of run.csv (108 measurements)"), std::string::npos) << run.notes[0];
  EXPECT_NE(run.notes[1].find("shape 128x128x128 of refit-gpu is not in run.csv: dropped"), std::string::npos) << run.notes[1];
  EXPECT_NE(run.notes[2].find("1 launch(es) flagged under-filled otherwise than recorded"), std::string::npos) << run.notes[2];
  // The section it makes is one the config format reads back.
  const GpuConfig back = parse_gpu(set_gpu_calibration(kGpuYaml, run.calibration, "refit-gpu.yaml"), "refit-gpu.yaml");
  ASSERT_TRUE(back.calibration.has_value());
  EXPECT_EQ(back.calibration->shapes.front().backward.per_key_block_us, shape.backward.per_key_block_us);
  EXPECT_EQ(back.calibration->provenance.sm_clock_mhz, 0.0) << "records without a clock: none recorded";
}

TEST(CalibrationRefit, TheClockIsTheMedianOfTheRefittedRecordsWhenTheyHaveOne) {
  GpuConfig gpu = parse_gpu(kGpuYaml, "refit-gpu.yaml");
  gpu.calibration->provenance.sm_clock_mhz = 1500.0;  // what the config said before
  std::vector<KernelMeasurement> recorded = measurements();
  EXPECT_EQ(refit_kernel_calibration(kernel_measurements_csv(recorded), "run.csv", gpu).calibration.provenance.sm_clock_mhz,
            1500.0) << "records without a clock keep the config's";
  for (size_t k = 0; k < recorded.size(); ++k) recorded[k].sm_clock_mhz = k % 3 == 0 ? 0.0 : 1900.0 + static_cast<double>(k % 2) * 60.0;
  std::vector<KernelMeasurement> clocked;
  for (const KernelMeasurement& k : recorded) {
    if (k.sm_clock_mhz > 0.0) clocked.push_back(k);
  }
  const double expected = benchmark_sm_clock_mhz(clocked);
  EXPECT_GE(expected, 1900.0);
  EXPECT_LE(expected, 1960.0);
  const CalibrationRun run = refit_kernel_calibration(kernel_measurements_csv(recorded), "run.csv", gpu);
  EXPECT_EQ(run.calibration.provenance.sm_clock_mhz, expected);
  const GpuConfig back = parse_gpu(set_gpu_calibration(kGpuYaml, run.calibration, "refit-gpu.yaml"), "refit-gpu.yaml");
  EXPECT_EQ(back.calibration->provenance.sm_clock_mhz, expected);
}

TEST(CalibrationRefit, RefusesWhatCannotBeRefitted) {
  const std::string csv = kernel_measurements_csv(measurements());
  std::string bare = kGpuYaml;
  bare = bare.substr(0, bare.find("calibration:"));
  test::expect_input_error([&] { refit_kernel_calibration(csv, "run.csv", parse_gpu(bare, "bare.yaml")); },
                           {"'refit-gpu' has no calibration section", "run.csv"});
  const GpuConfig published = load_gpu(std::string(SPARSERING_SOURCE_DIR) + "/tests/config/gpus/published-a100.yaml");
  test::expect_input_error([&] { refit_kernel_calibration(csv, "run.csv", published); }, {"published figures"});
  const GpuConfig gpu = parse_gpu(kGpuYaml, "refit-gpu.yaml");
  test::expect_input_error([&] { refit_kernel_calibration(csv.substr(0, csv.find('\n') + 1), "empty.csv", gpu); },
                           {"empty.csv", "no kernel measurement"});
  test::expect_input_error([&] { refit_kernel_calibration("direction\nforward\n", "bad.csv", gpu); },
                           {"bad.csv", "no column"});
}

}  // namespace
}  // namespace sparsering
