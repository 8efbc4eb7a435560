// GPU configs: shipped files parse with their datasheet figures, the calibration section parses and
// validates, write_gpu_yaml round-trips random configs, and set_gpu_calibration keeps the rest of
// the file (comments included) while replacing the section.
#include "sim/config/gpu_config.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "tests/config/config_test_util.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

using test::expect_input_error;

const std::filesystem::path kGpus = std::filesystem::path(SPARSERING_SOURCE_DIR) / "configs" / "gpus";

const std::string kUncalibrated = R"(# a test GPU
name: test-gpu
memory_gib: 80
peak_tflops_bf16: 989.4
memory_bandwidth_gbytes_per_s: 3350
sm_count: 132
l2_mib: 50
)";

const std::string kCalibration = R"(calibration:
  block_q: 64
  block_k: 64
  head_dim: 128
  forward:
    launch_us: 4.5
    per_tile_us: 0.02
    per_vertical_chunk_us: 0.03
  backward:
    launch_us: 9
    per_tile_us: 0.05
    per_vertical_chunk_us: 0.07
  gemm_efficiency: 0.7
  fit_samples: 120
  fit_max_relative_error: 0.04
  provenance:
    gpu: NVIDIA H100 80GB HBM3
    driver: "580.159.04"
    nccl: "2.28.9"
    commit: abc1234
    date: "2025-06-01"
)";

TEST(GpuConfig, ShippedGpusParse) {
  for (const char* file : {"a100-40gb.yaml", "h100-sxm.yaml", "h200.yaml"}) {
    const GpuConfig gpu = load_gpu(kGpus / file);
    EXPECT_EQ(gpu.source_path, kGpus / file);
    EXPECT_GT(gpu.peak_tflops_bf16, 100.0) << file;
    EXPECT_GT(gpu.memory_bandwidth_gbytes_per_s, 1000.0) << file;
    if (gpu.calibrated()) {
      // A shipped calibration was measured on that GPU and says so.
      EXPECT_FALSE(gpu.calibration->provenance.gpu.empty()) << file;
      EXPECT_FALSE(gpu.calibration->provenance.date.empty()) << file;
      EXPECT_GT(gpu.calibration->fit_samples, 0) << file;
    }
  }
  // The A100 was never lent for measurement: it stays on the roofline fallback.
  EXPECT_FALSE(load_gpu(kGpus / "a100-40gb.yaml").calibrated());
  const GpuConfig h100 = load_gpu(kGpus / "h100-sxm.yaml");
  EXPECT_EQ(h100.sm_count, 132);
  EXPECT_DOUBLE_EQ(h100.peak_tflops_bf16, 989.4);
  EXPECT_EQ(load_gpu(kGpus / "a100-40gb.yaml").memory_bytes(), int64_t{40} << 30);
}

TEST(GpuConfig, ParsesCalibration) {
  const GpuConfig gpu = parse_gpu(kUncalibrated + kCalibration, "g.yaml");
  ASSERT_TRUE(gpu.calibrated());
  const GpuCalibration& cal = *gpu.calibration;
  EXPECT_EQ(cal.block_q, 64);
  EXPECT_DOUBLE_EQ(cal.forward.launch_us, 4.5);
  EXPECT_DOUBLE_EQ(cal.backward.per_vertical_chunk_us, 0.07);
  EXPECT_DOUBLE_EQ(cal.gemm_efficiency, 0.7);
  EXPECT_EQ(cal.fit_samples, 120);
  EXPECT_EQ(cal.provenance.driver, "580.159.04");
  EXPECT_TRUE(cal.provenance.cuda.empty());
  EXPECT_EQ(cal.provenance.date, "2025-06-01");
}

TEST(GpuConfig, RejectsBadValuesNamingKeyPathAndValue) {
  expect_input_error([] { parse_gpu(test::with_value(kUncalibrated, "memory_gib", "-80"), "g.yaml"); },
                     {"g.yaml: gpu.memory_gib must be in (0, 1e+06], got -80"});
  expect_input_error([] { parse_gpu(test::with_value(kUncalibrated, "peak_tflops_bf16", ".inf"), "g.yaml"); },
                     {"gpu.peak_tflops_bf16", ".inf"});
  expect_input_error([] { parse_gpu(test::with_value(kUncalibrated, "sm_count", "many"), "g.yaml"); },
                     {"gpu.sm_count must be an integer", "\"many\""});
  expect_input_error([] { parse_gpu(test::without_key(kUncalibrated, "l2_mib"), "g.yaml"); }, {"gpu.l2_mib is required"});
  expect_input_error([] { parse_gpu(kUncalibrated + "l2_mb: 3\n", "g.yaml"); }, {"unknown key gpu.l2_mb", "l2_mib"});
  const std::string calibrated = kUncalibrated + kCalibration;
  expect_input_error([&] { parse_gpu(test::with_value(calibrated, "gemm_efficiency", "1.2"), "g.yaml"); },
                     {"gpu.calibration.gemm_efficiency must be in (0, 1], got 1.2"});
  expect_input_error([&] { parse_gpu(test::with_value(calibrated, "launch_us", "-1"), "g.yaml"); },
                     {"gpu.calibration.forward.launch_us must be >= 0, got -1"});
  expect_input_error([&] { parse_gpu(test::with_value(calibrated, "per_tile_us", "0"), "g.yaml"); },
                     {"gpu.calibration.forward.per_tile_us must be > 0, got 0"});
  expect_input_error([&] { parse_gpu(test::with_value(calibrated, "date", "yesterday"), "g.yaml"); },
                     {"gpu.calibration.provenance.date must be an ISO 8601 date", "yesterday"});
  expect_input_error([&] { parse_gpu(test::without_key(calibrated, "commit"), "g.yaml"); },
                     {"gpu.calibration.provenance.commit is required"});
  expect_input_error([&] { parse_gpu(kUncalibrated + "calibration: fast\n", "g.yaml"); },
                     {"gpu.calibration must be a mapping, got \"fast\""});
  expect_input_error([&] { parse_gpu(kUncalibrated + "calibration: {block_q: 64}\n", "g.yaml"); },
                     {"gpu.calibration.block_k is required"});
  expect_input_error([&] { parse_gpu(test::with_value(calibrated, "block_q", "0"), "g.yaml"); },
                     {"gpu.calibration.block_q must be an integer in [1, 4096], got 0"});
}

GpuConfig random_gpu(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0.001, 1.0);
  GpuConfig gpu;
  gpu.name = "gpu-" + std::to_string(rng() % 1000);
  gpu.device_name = (rng() % 2) ? "NVIDIA Test: \"quoted\" #1" : "";
  gpu.compute_capability = (rng() % 2) ? "9.0" : "";
  gpu.memory_gib = unit(rng) * 200;
  gpu.peak_tflops_bf16 = unit(rng) * 2000;
  gpu.memory_bandwidth_gbytes_per_s = unit(rng) * 8000;
  gpu.sm_count = static_cast<int64_t>(rng() % 200) + 1;
  gpu.l2_mib = unit(rng) * 100;
  if (rng() % 2) {
    GpuCalibration cal;
    cal.block_q = 128;
    cal.block_k = 64;
    cal.head_dim = 64;
    cal.forward = {unit(rng) * 10, unit(rng), unit(rng) * 0.1};
    cal.backward = {unit(rng) * 20, unit(rng) * 2, 0.0};
    cal.gemm_efficiency = unit(rng);
    cal.fit_samples = static_cast<int64_t>(rng() % 3) * 50;
    cal.fit_max_relative_error = (rng() % 2) ? unit(rng) : 0.0;
    cal.provenance = {"NVIDIA H200", "580.159.04", (rng() % 2) ? "13.0" : "", "2.28.9", "0123456", "2025-06-01T10:00:00Z"};
    gpu.calibration = cal;
  }
  return gpu;
}

void expect_same_calibration(const GpuCalibration& a, const GpuCalibration& b) {
  EXPECT_EQ(a.block_q, b.block_q);
  EXPECT_EQ(a.block_k, b.block_k);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.forward.launch_us, b.forward.launch_us);
  EXPECT_EQ(a.forward.per_tile_us, b.forward.per_tile_us);
  EXPECT_EQ(a.forward.per_vertical_chunk_us, b.forward.per_vertical_chunk_us);
  EXPECT_EQ(a.backward.launch_us, b.backward.launch_us);
  EXPECT_EQ(a.backward.per_tile_us, b.backward.per_tile_us);
  EXPECT_EQ(a.backward.per_vertical_chunk_us, b.backward.per_vertical_chunk_us);
  EXPECT_EQ(a.gemm_efficiency, b.gemm_efficiency);
  EXPECT_EQ(a.fit_samples, b.fit_samples);
  EXPECT_EQ(a.fit_max_relative_error, b.fit_max_relative_error);
  EXPECT_EQ(a.provenance.gpu, b.provenance.gpu);
  EXPECT_EQ(a.provenance.driver, b.provenance.driver);
  EXPECT_EQ(a.provenance.cuda, b.provenance.cuda);
  EXPECT_EQ(a.provenance.nccl, b.provenance.nccl);
  EXPECT_EQ(a.provenance.commit, b.provenance.commit);
  EXPECT_EQ(a.provenance.date, b.provenance.date);
}

TEST(GpuConfig, WriteRoundTripsRandomConfigs) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  for (int i = 0; i < 50; ++i) {
    const GpuConfig gpu = random_gpu(rng);
    const std::string text = write_gpu_yaml(gpu);
    const GpuConfig back = parse_gpu(text, "round-trip.yaml");
    EXPECT_EQ(back.name, gpu.name);
    EXPECT_EQ(back.device_name, gpu.device_name);
    EXPECT_EQ(back.compute_capability, gpu.compute_capability);
    EXPECT_EQ(back.memory_gib, gpu.memory_gib);
    EXPECT_EQ(back.peak_tflops_bf16, gpu.peak_tflops_bf16);
    EXPECT_EQ(back.memory_bandwidth_gbytes_per_s, gpu.memory_bandwidth_gbytes_per_s);
    EXPECT_EQ(back.sm_count, gpu.sm_count);
    EXPECT_EQ(back.l2_mib, gpu.l2_mib);
    ASSERT_EQ(back.calibrated(), gpu.calibrated()) << text;
    if (gpu.calibrated()) expect_same_calibration(*back.calibration, *gpu.calibration);
    EXPECT_EQ(write_gpu_yaml(back), text);
  }
}

TEST(GpuConfig, SetCalibrationKeepsTheRestOfTheFile) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  GpuConfig source = random_gpu(rng);
  while (!source.calibrated()) source = random_gpu(rng);
  const GpuCalibration& cal = *source.calibration;

  // Added to an uncalibrated file: the comment and every value stay.
  const std::string added = set_gpu_calibration(kUncalibrated, cal, "g.yaml");
  EXPECT_EQ(added.rfind(kUncalibrated, 0), 0U) << added;
  const GpuConfig with_added = parse_gpu(added, "g.yaml");
  ASSERT_TRUE(with_added.calibrated());
  expect_same_calibration(*with_added.calibration, cal);

  // Replacing a section in the middle of a file keeps the keys and comments after it.
  const std::string middle = "name: test-gpu\n" + kCalibration + "# after\nmemory_gib: 80\npeak_tflops_bf16: 989.4\n"
                             "memory_bandwidth_gbytes_per_s: 3350\nsm_count: 132\nl2_mib: 50\n";
  const std::string replaced = set_gpu_calibration(middle, cal, "g.yaml");
  EXPECT_NE(replaced.find("# after\nmemory_gib: 80\n"), std::string::npos) << replaced;
  EXPECT_EQ(replaced.find("abc1234"), std::string::npos) << replaced;
  const GpuConfig with_replaced = parse_gpu(replaced, "g.yaml");
  expect_same_calibration(*with_replaced.calibration, cal);
  EXPECT_EQ(with_replaced.sm_count, 132);

  // The shipped files accept a calibration.
  for (const char* file : {"a100-40gb.yaml", "h100-sxm.yaml", "h200.yaml"}) {
    const std::string text = set_gpu_calibration(read_file(kGpus / file), cal, file);
    EXPECT_TRUE(parse_gpu(text, file).calibrated());
  }
  // A broken file stays an error.
  expect_input_error([&] { set_gpu_calibration("name: x\n", cal, "broken.yaml"); }, {"broken.yaml", "gpu.memory_gib is required"});
}

}  // namespace
}  // namespace sparsering
