// GPU configs: shipped files parse with their datasheet figures, measured (several shapes) and
// published calibration sections parse and every malformed one is refused naming its key path,
// the single-shape form of earlier versions is refused with a conversion hint, write_gpu_yaml
// round-trips random configs, and set_gpu_calibration keeps the rest of the file (comments
// included) while replacing the section.
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
  source: measured
  kernel_build: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
  gemm_efficiency: 0.7
  provenance:
    gpu: NVIDIA H100 80GB HBM3
    driver: "580.159.04"
    nccl: "2.28.9"
    commit: abc1234
    date: "2025-06-01"
  shapes:
    - block_q: 64
      block_k: 64
      head_dim: 128
      forward:
        launch_us: 4.5
        per_list_us: 0.025
        per_tile_us: 0.02
        per_vertical_chunk_us: 0.03
      backward:
        launch_us: 9
        per_list_us: 0.015
        per_tile_us: 0.05
        per_vertical_chunk_us: 0.07
      fit:
        samples: 120
        median_relative_error: 0.02
        max_relative_error: 0.04
        heldout_median_relative_error: 0.025
        heldout_max_relative_error: 0.09
        folds: 5
    - block_q: 128
      block_k: 128
      head_dim: 128
      forward: {launch_us: 5, per_list_us: 0.05, per_tile_us: 0.07, per_vertical_chunk_us: 0.08}
      backward: {launch_us: 10, per_list_us: 0.03, per_tile_us: 0.2, per_vertical_chunk_us: 0.3}
      fit: {samples: 90, median_relative_error: 0.03, max_relative_error: 0.06, heldout_median_relative_error: 0.035, heldout_max_relative_error: 0.1, folds: 5}
)";

/// The single-shape, three-term section earlier versions wrote.
const std::string kSingleShapeCalibration = R"(calibration:
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
    if (gpu.calibrated() && !gpu.calibration->published()) {
      // A shipped measured calibration says where and on which kernel build it was measured, and
      // how well its fit holds out.
      EXPECT_FALSE(gpu.calibration->provenance.gpu.empty()) << file;
      EXPECT_FALSE(gpu.calibration->provenance.date.empty()) << file;
      EXPECT_FALSE(gpu.calibration->kernel_build.empty()) << file;
      for (const CalibratedShape& shape : gpu.calibration->shapes) {
        ASSERT_TRUE(shape.fit.has_value()) << file;
        EXPECT_GT(shape.fit->samples, 0) << file;
        EXPECT_GE(shape.fit->folds, 2) << file;
      }
    }
  }
  const GpuConfig h100 = load_gpu(kGpus / "h100-sxm.yaml");
  EXPECT_EQ(h100.sm_count, 132);
  EXPECT_DOUBLE_EQ(h100.peak_tflops_bf16, 989.4);
  // Both calibrate the kernel shapes the tuner searches by default.
  for (const char* file : {"h100-sxm.yaml", "h200.yaml"}) {
    const GpuConfig gpu = load_gpu(kGpus / file);
    EXPECT_NE(gpu.calibration->find({64, 64, 128}), nullptr) << file;
    EXPECT_NE(gpu.calibration->find({128, 128, 128}), nullptr) << file;
  }
  EXPECT_EQ(load_gpu(kGpus / "a100-40gb.yaml").memory_bytes(), int64_t{40} << 30);
}

TEST(GpuConfig, ParsesMeasuredCalibrationOfSeveralShapes) {
  const GpuConfig gpu = parse_gpu(kUncalibrated + kCalibration, "g.yaml");
  ASSERT_TRUE(gpu.calibrated());
  const GpuCalibration& cal = *gpu.calibration;
  EXPECT_EQ(cal.source, CalibrationSource::measured);
  EXPECT_FALSE(cal.published());
  EXPECT_EQ(cal.kernel_build, "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  ASSERT_EQ(cal.shapes.size(), 2u);
  EXPECT_EQ(cal.shapes[0].shape, (KernelShape{64, 64, 128}));
  EXPECT_DOUBLE_EQ(cal.shapes[0].forward.launch_us, 4.5);
  EXPECT_DOUBLE_EQ(cal.shapes[0].forward.per_list_us, 0.025);
  EXPECT_DOUBLE_EQ(cal.shapes[0].backward.per_vertical_chunk_us, 0.07);
  EXPECT_EQ(cal.shapes[0].fit->samples, 120);
  EXPECT_DOUBLE_EQ(cal.shapes[0].fit->heldout_max_relative_error, 0.09);
  EXPECT_EQ(cal.shapes[0].fit->folds, 5);
  EXPECT_EQ(cal.shapes[0].fit->dealings, 1) << "absent: dealt once, as earlier versions did";
  const std::string dealt = test::with_value(kCalibration, "folds", "5\n        dealings: 4");
  EXPECT_EQ(parse_gpu(kUncalibrated + dealt, "g.yaml").calibration->shapes[0].fit->dealings, 4);
  EXPECT_DOUBLE_EQ(cal.shapes[1].backward.per_tile_us, 0.2);
  EXPECT_EQ(cal.find({128, 128, 128}), &cal.shapes[1]);
  EXPECT_EQ(cal.find({128, 128, 64}), nullptr);
  EXPECT_DOUBLE_EQ(cal.gemm_efficiency, 0.7);
  EXPECT_EQ(cal.provenance.driver, "580.159.04");
  EXPECT_TRUE(cal.provenance.cuda.empty());
  EXPECT_EQ(cal.provenance.date, "2025-06-01");
  EXPECT_EQ(cal.provenance.sm_clock_mhz, 0.0) << "not recorded";
  const std::string clocked = test::with_value(kCalibration, "date", "\"2025-06-01\"\n    sm_clock_mhz: 1972.5");
  EXPECT_EQ(parse_gpu(kUncalibrated + clocked, "g.yaml").calibration->provenance.sm_clock_mhz, 1972.5);
  // "unknown": measured, but the build was not recorded.
  EXPECT_EQ(parse_gpu(kUncalibrated + test::with_value(kCalibration, "kernel_build", "unknown"), "g.yaml").calibration->kernel_build,
            "unknown");
}

TEST(GpuConfig, ThePerKeyBlockCostIsOptionalAndZeroWhenAbsent) {
  // A config without the term (the published A100 one) reads it as 0; the measured shipped
  // configs, which have it, are written back as they were; a given value is read, written back,
  // and refused when negative.
  const GpuConfig a100 = parse_gpu(read_file(kGpus / "a100-40gb.yaml"), "a100-40gb.yaml");
  for (const CalibratedShape& shape : a100.calibration->shapes) {
    EXPECT_EQ(shape.forward.per_key_block_us, 0.0);
    EXPECT_EQ(shape.backward.per_key_block_us, 0.0);
  }
  for (const char* file : {"h100-sxm.yaml", "h200.yaml"}) {
    const std::string text = read_file(kGpus / file);
    const GpuConfig gpu = parse_gpu(text, file);
    EXPECT_EQ(set_gpu_calibration(text, *gpu.calibration, file), text) << file;
  }
  const GpuConfig plain = parse_gpu(kUncalibrated + kCalibration, "g.yaml");
  EXPECT_EQ(plain.calibration->shapes[0].backward.per_key_block_us, 0.0);
  const std::string with_term =
      kUncalibrated + test::with_value(kCalibration, "per_vertical_chunk_us", "0.07\n        per_key_block_us: 0.0125");
  const GpuConfig gpu = parse_gpu(with_term, "g.yaml");
  EXPECT_DOUBLE_EQ(gpu.calibration->shapes[0].forward.per_key_block_us, 0.0125);
  EXPECT_EQ(gpu.calibration->shapes[0].backward.per_key_block_us, 0.0);
  const std::string written = write_gpu_yaml(gpu);
  EXPECT_NE(written.find("per_key_block_us: 0.0125"), std::string::npos) << written;
  EXPECT_EQ(written.find("per_key_block_us: 0,"), std::string::npos) << "a zero term is not written";
  EXPECT_DOUBLE_EQ(parse_gpu(written, "w.yaml").calibration->shapes[0].forward.per_key_block_us, 0.0125);
  expect_input_error([&] { parse_gpu(test::with_value(with_term, "per_key_block_us", "-0.5"), "g.yaml"); },
                     {"per_key_block_us", "-0.5"});
  // The critical-path term alike, in the backward; the forward has no such cost.
  EXPECT_EQ(plain.calibration->shapes[0].backward.per_critical_entry_us, 0.0);
  const std::string backward_chunk = "        per_vertical_chunk_us: 0.07\n";  // the first shape's backward
  std::string with_critical = kUncalibrated + kCalibration;
  with_critical.insert(with_critical.find(backward_chunk) + backward_chunk.size(), "        per_critical_entry_us: 2.5\n");
  const GpuConfig critical = parse_gpu(with_critical, "g.yaml");
  EXPECT_DOUBLE_EQ(critical.calibration->shapes[0].backward.per_critical_entry_us, 2.5);
  EXPECT_EQ(critical.calibration->shapes[0].forward.per_critical_entry_us, 0.0);
  const std::string critical_written = write_gpu_yaml(critical);
  EXPECT_NE(critical_written.find("per_critical_entry_us: 2.5"), std::string::npos) << critical_written;
  EXPECT_DOUBLE_EQ(parse_gpu(critical_written, "w.yaml").calibration->shapes[0].backward.per_critical_entry_us, 2.5);
  EXPECT_EQ(write_gpu_yaml(gpu).find("per_critical_entry_us"), std::string::npos) << "a zero term is not written";
  expect_input_error([&] { parse_gpu(test::with_value(with_critical, "per_critical_entry_us", "-1"), "g.yaml"); },
                     {"per_critical_entry_us", "-1"});
  const std::string in_forward =
      kUncalibrated + test::with_value(kCalibration, "per_vertical_chunk_us", "0.03\n        per_critical_entry_us: 2.5");
  expect_input_error([&] { parse_gpu(in_forward, "g.yaml"); },
                     {"gpu.calibration.shapes[0].forward", "per_critical_entry_us", "backward's"});
}

TEST(GpuConfig, ParsesPublishedCalibration) {
  const GpuConfig gpu = load_gpu(std::filesystem::path(SPARSERING_SOURCE_DIR) / "tests/config/gpus/published-a100.yaml");
  ASSERT_TRUE(gpu.calibrated());
  const GpuCalibration& cal = *gpu.calibration;
  EXPECT_TRUE(cal.published());
  EXPECT_TRUE(cal.kernel_build.empty());
  ASSERT_EQ(cal.sources.size(), 2u);
  EXPECT_NE(cal.sources[1].find("Figure 5"), std::string::npos);
  ASSERT_EQ(cal.shapes.size(), 1u);
  EXPECT_FALSE(cal.shapes[0].fit.has_value());
  EXPECT_DOUBLE_EQ(cal.shapes[0].backward.per_tile_us, 0.0546);
  // It round-trips through the writer.
  const GpuConfig back = parse_gpu(write_gpu_yaml(gpu), "back.yaml");
  EXPECT_EQ(back.calibration->sources, cal.sources);
  EXPECT_TRUE(back.calibration->published());
}

TEST(GpuConfig, RefusesTheSingleShapeFormSayingHowToConvert) {
  expect_input_error([] { parse_gpu(kUncalibrated + kSingleShapeCalibration, "old.yaml"); },
                     {"old.yaml: gpu.calibration is in the single-shape form of earlier versions",
                      "gpu.calibration.block_q at its top level", "`shapes:`", "Converting a single-shape calibration"});
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
}

/// `text` with its one occurrence of `from` replaced by `to` (fails the test if absent).
std::string replaced(const std::string& text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "no \"" << from << "\" in the test text";
  return at == std::string::npos ? text : text.substr(0, at) + to + text.substr(at + from.size());
}

TEST(GpuConfig, RejectsMalformedCalibrationSections) {
  const std::string calibrated = kUncalibrated + kCalibration;
  const auto refused = [&](const std::string& text, std::initializer_list<std::string> pieces) {
    expect_input_error([&] { parse_gpu(text, "g.yaml"); }, pieces);
  };
  refused(test::with_value(calibrated, "source", "guessed"), {"gpu.calibration.source", "measured", "published", "guessed"});
  refused(test::without_key(calibrated, "source"), {"gpu.calibration.source is required"});
  refused(test::with_value(calibrated, "gemm_efficiency", "1.2"), {"gpu.calibration.gemm_efficiency must be in (0, 1], got 1.2"});
  refused(test::with_value(calibrated, "kernel_build", "sha256:1234"),
          {"gpu.calibration.kernel_build must be the kernel build identity", "\"sha256:1234\""});
  refused(test::with_value(calibrated, "kernel_build", "\"SHA256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\""),
          {"gpu.calibration.kernel_build must be"});
  refused(test::without_key(calibrated, "kernel_build"), {"gpu.calibration.kernel_build is required"});
  refused(test::without_key(calibrated, "commit"), {"gpu.calibration.provenance.commit is required"});
  refused(test::with_value(calibrated, "date", "yesterday"), {"gpu.calibration.provenance.date must be an ISO 8601 date", "yesterday"});
  refused(test::with_value(calibrated, "date", "\"2025-06-01\"\n    sm_clock_mhz: -5"),
          {"gpu.calibration.provenance.sm_clock_mhz must be >= 0", "-5"});
  refused(calibrated + "  sources: [\"a paper\"]\n", {"gpu.calibration.sources cites published figures"});
  refused(test::with_value(calibrated, "launch_us", "-1"), {"gpu.calibration.shapes[0].forward.launch_us must be >= 0, got -1"});
  refused(test::with_value(calibrated, "per_list_us", "-0.1"), {"gpu.calibration.shapes[0].forward.per_list_us must be >= 0"});
  refused(test::without_key(calibrated, "per_list_us"), {"gpu.calibration.shapes[0].forward.per_list_us is required"});
  refused(test::with_value(calibrated, "per_tile_us", "0"), {"gpu.calibration.shapes[0].forward.per_tile_us must be > 0, got 0"});
  refused(test::with_value(calibrated, "block_q", "0"), {"gpu.calibration.shapes[0].block_q must be an integer in [1, 4096], got 0"});
  refused(test::with_value(calibrated, "block_k", "96"), {"gpu.calibration.shapes[0].block_k", "multiple of 64", "96"});
  refused(test::with_value(calibrated, "head_dim", "96"), {"gpu.calibration.shapes[0].head_dim", "96"});
  refused(test::without_key(calibrated, "heldout_max_relative_error"),
          {"gpu.calibration.shapes[0].fit.heldout_max_relative_error is required"});
  refused(test::with_value(calibrated, "median_relative_error", "0.5"),
          {"gpu.calibration.shapes[0].fit.median_relative_error (0.5) exceeds max_relative_error (0.04)"});
  refused(test::with_value(calibrated, "heldout_median_relative_error", "0.5"),
          {"heldout_median_relative_error (0.5) exceeds heldout_max_relative_error (0.09)"});
  refused(test::with_value(calibrated, "folds", "1"), {"gpu.calibration.shapes[0].fit.folds must be an integer in [2, 1000], got 1"});
  refused(test::with_value(calibrated, "folds", "5\n        dealings: 0"),
          {"gpu.calibration.shapes[0].fit.dealings must be an integer in [1, 100], got 0"});
  refused(test::with_value(calibrated, "samples", "3"), {"gpu.calibration.shapes[0].fit.folds (5) exceeds samples (3)"});
  refused(test::with_value(test::with_value(calibrated, "block_q", "128"), "block_k", "128"),
          {"gpu.calibration.shapes[1] repeats shape 128x128x128 of gpu.calibration.shapes[0]"});
  const std::string second_fit =
      "      fit: {samples: 90, median_relative_error: 0.03, max_relative_error: 0.06, heldout_median_relative_error: 0.035, "
      "heldout_max_relative_error: 0.1, folds: 5}\n";
  refused(replaced(calibrated, second_fit, ""), {"gpu.calibration.shapes[1].fit is required"});
  refused(kUncalibrated + "calibration:\n  source: measured\n  kernel_build: unknown\n  gemm_efficiency: 0.5\n"
                          "  provenance: {gpu: g, driver: d, nccl: n, commit: c, date: \"2025-01-01\"}\n  shapes: []\n",
          {"gpu.calibration.shapes must list at least one kernel shape"});
  refused(kUncalibrated + "calibration: fast\n", {"gpu.calibration must be a mapping, got \"fast\""});
  refused(kUncalibrated + "calibration: {source: measured}\n", {"gpu.calibration.gemm_efficiency is required"});

  // Published sections: no kernel build, no provenance, no fit; sources required.
  const std::string published = read_file(std::filesystem::path(SPARSERING_SOURCE_DIR) / "tests/config/gpus/published-a100.yaml");
  refused(test::with_value(published, "gemm_efficiency", "0.7\n  kernel_build: unknown"),
          {"gpu.calibration.kernel_build belongs to measured calibrations"});
  refused(test::with_value(published, "gemm_efficiency", "0.7\n  provenance: {gpu: x}"),
          {"gpu.calibration.provenance belongs to measured calibrations"});
  const std::string cited =
      "  sources:\n"
      "    - \"Test paper A, Table 2: sparse attention forward at 64 x 64 tiles, head dim 128: 21 ns per tile\"\n"
      "    - \"Test paper A, Figure 5: backward / forward time: 2.6\"\n";
  refused(replaced(published, cited, "  sources: []\n"), {"gpu.calibration.sources must cite at least one published figure"});
  refused(replaced(published, cited, ""), {"gpu.calibration.sources is required"});
  refused(replaced(published, cited, "  sources: [\"\"]\n"), {"gpu.calibration.sources[0]"});
  refused(test::with_value(published, "backward", "{launch_us: 30, per_list_us: 0, per_tile_us: 0.05, per_vertical_chunk_us: 0.1}\n      fit: {samples: 3}"),
          {"gpu.calibration.shapes[0].fit holds fit statistics of measurements"});
}

KernelCostCoefficients random_coefficients(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0.001, 1.0);
  KernelCostCoefficients c{unit(rng) * 10, (rng() % 2) ? unit(rng) * 0.1 : 0.0, unit(rng), (rng() % 2) ? unit(rng) * 0.1 : 0.0};
  // The optional terms (backward units, per key block of the chunk), each present or not.
  for (double* term : {&c.per_key_list_us, &c.per_column_list_us, &c.per_column_item_us, &c.per_column_us, &c.per_key_block_us,
                       &c.per_critical_entry_us}) {
    *term = (rng() % 2) ? unit(rng) * 0.1 : 0.0;
  }
  return c;
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
    cal.source = (rng() % 3 == 0) ? CalibrationSource::published : CalibrationSource::measured;
    cal.gemm_efficiency = unit(rng);
    if (cal.published()) {
      for (uint64_t k = 0; k <= rng() % 3; ++k) cal.sources.push_back(str("paper ", k, ", table ", rng() % 9, ": \"quoted\" #", k));
    } else {
      cal.kernel_build = (rng() % 2) ? "unknown" : "sha256:" + std::string(64, "0123456789abcdef"[rng() % 16]);
      cal.provenance = {"NVIDIA H200", "580.159.04", (rng() % 2) ? "13.0" : "", "2.28.9", "0123456", "2025-06-01T10:00:00Z",
                        (rng() % 2) ? 1000.0 + unit(rng) * 1000.0 : 0.0};
    }
    const std::vector<KernelShape> all{{64, 64, 128}, {128, 128, 128}, {128, 64, 64}, {64, 128, 64}};
    const size_t count = 1 + rng() % all.size();
    for (size_t k = 0; k < count; ++k) {
      CalibratedShape s;
      s.shape = all[k];
      s.forward = random_coefficients(rng);
      s.forward.per_critical_entry_us = 0.0;  // the backward's term
      s.backward = random_coefficients(rng);
      if (!cal.published()) {
        const double median = unit(rng) * 0.1;
        s.fit = CalibrationFit{static_cast<int64_t>(5 + rng() % 100), median, median * 3, median * 1.2, median * 4, 5};
      }
      cal.shapes.push_back(s);
    }
    gpu.calibration = cal;
  }
  return gpu;
}

void expect_same_coefficients(const KernelCostCoefficients& a, const KernelCostCoefficients& b) {
  EXPECT_EQ(a.launch_us, b.launch_us);
  EXPECT_EQ(a.per_list_us, b.per_list_us);
  EXPECT_EQ(a.per_tile_us, b.per_tile_us);
  EXPECT_EQ(a.per_vertical_chunk_us, b.per_vertical_chunk_us);
  EXPECT_EQ(a.per_key_list_us, b.per_key_list_us);
  EXPECT_EQ(a.per_column_list_us, b.per_column_list_us);
  EXPECT_EQ(a.per_column_item_us, b.per_column_item_us);
  EXPECT_EQ(a.per_column_us, b.per_column_us);
  EXPECT_EQ(a.per_key_block_us, b.per_key_block_us);
  EXPECT_EQ(a.per_critical_entry_us, b.per_critical_entry_us);
}

void expect_same_calibration(const GpuCalibration& a, const GpuCalibration& b) {
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.kernel_build, b.kernel_build);
  EXPECT_EQ(a.sources, b.sources);
  ASSERT_EQ(a.shapes.size(), b.shapes.size());
  for (size_t k = 0; k < a.shapes.size(); ++k) {
    EXPECT_EQ(a.shapes[k].shape, b.shapes[k].shape);
    expect_same_coefficients(a.shapes[k].forward, b.shapes[k].forward);
    expect_same_coefficients(a.shapes[k].backward, b.shapes[k].backward);
    ASSERT_EQ(a.shapes[k].fit.has_value(), b.shapes[k].fit.has_value());
    if (a.shapes[k].fit) {
      const CalibrationFit& x = *a.shapes[k].fit;
      const CalibrationFit& y = *b.shapes[k].fit;
      EXPECT_EQ(x.samples, y.samples);
      EXPECT_EQ(x.median_relative_error, y.median_relative_error);
      EXPECT_EQ(x.max_relative_error, y.max_relative_error);
      EXPECT_EQ(x.heldout_median_relative_error, y.heldout_median_relative_error);
      EXPECT_EQ(x.heldout_max_relative_error, y.heldout_max_relative_error);
      EXPECT_EQ(x.folds, y.folds);
    }
  }
  EXPECT_EQ(a.gemm_efficiency, b.gemm_efficiency);
  EXPECT_EQ(a.provenance.gpu, b.provenance.gpu);
  EXPECT_EQ(a.provenance.driver, b.provenance.driver);
  EXPECT_EQ(a.provenance.cuda, b.provenance.cuda);
  EXPECT_EQ(a.provenance.nccl, b.provenance.nccl);
  EXPECT_EQ(a.provenance.commit, b.provenance.commit);
  EXPECT_EQ(a.provenance.date, b.provenance.date);
  EXPECT_NEAR(a.provenance.sm_clock_mhz, b.provenance.sm_clock_mhz, 1e-6 * a.provenance.sm_clock_mhz);
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

  // Replacing a section in the middle of a file keeps the keys and comments after it; an old
  // single-shape section is replaced the same way.
  const std::string middle = "name: test-gpu\n" + kSingleShapeCalibration + "# after\nmemory_gib: 80\npeak_tflops_bf16: 989.4\n"
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
