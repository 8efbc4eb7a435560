// What `sparsering simulate` and `sparsering tune` say about the calibration behind their kernel
// costs, end to end through the built binary: a calibration measured on another kernel build warns
// on stderr and is marked stale in the output and its JSON, one measured on this build is not, a
// published one says its figures are published, a plan shape the calibration does not cover is
// marked extrapolated, tune leaves uncalibrated blocks out (or ranks them marked when allowed,
// or refuses when none is left), and a calibration section in the old single-shape form is
// refused with exit code 2. Library sides: tests/sim/cost_model_test.cpp,
// tests/tuner_search/calibrated_blocks_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "common/atomic_file.hpp"
#include "core/kernel_build.hpp"
#include "tests/cli/cli_process.hpp"

namespace sparsering {
namespace {

namespace fs = std::filesystem;
using test::contains;
using test::run_cli;
using test::source_path;

/// The JSON document in a run's output (stderr lines before it are skipped).
nlohmann::json json_of(const std::string& output) {
  const size_t start = output.find('{');
  return start == std::string::npos ? nlohmann::json() : nlohmann::json::parse(output.substr(start), nullptr, false);
}

class CalibrationStatusCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparsering_cli_calibration_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// The 32K golden plan (Qwen2.5-3B, 2 x H200, the bundled trace) with blocks of `block` tokens,
  /// on `gpu_file` (default: the shipped H200 config) through a copy of the pair cluster.
  std::string plan(int block = 64, const std::string& gpu_file = "") {
    std::string cluster = read_file(source_path("configs/clusters/h200-2x-nvlink.yaml"));
    const std::string gpu = gpu_file.empty() ? source_path("configs/gpus/h200.yaml") : gpu_file;
    cluster.replace(cluster.find("gpu: h200"), 9, "gpu: " + gpu);
    write_file_atomically(dir_ / "cluster.yaml", cluster, true);
    std::string text = read_file(source_path("tests/golden/data/qwen2.5-3b-32k-h200x2-striped.yaml"));
    for (const auto& [from, to] :
         std::vector<std::pair<std::string, std::string>>{{"../../../configs/models/qwen2.5-3b.yaml", source_path("configs/models/qwen2.5-3b.yaml")},
                                                          {"../../../configs/clusters/h200-2x-nvlink.yaml", (dir_ / "cluster.yaml").string()},
                                                          {"../../../traces/samples/", source_path("traces/samples/")},
                                                          {"block_q: 64", "block_q: " + std::to_string(block)},
                                                          {"block_k: 64", "block_k: " + std::to_string(block)},
                                                          {"granularity_tokens: 64", "granularity_tokens: " + std::to_string(block)}}) {
      text.replace(text.find(from), from.size(), to);
    }
    write_file_atomically(dir_ / "plan.yaml", text, true);
    return (dir_ / "plan.yaml").string();
  }

  /// The shipped H200 config with its kernel_build replaced and, with `only_64`, its
  /// 128x128x128 shape removed (the calibration then covers 64x64x128 only).
  std::string h200_variant(const std::string& build, bool only_64 = false) {
    std::string text = read_file(source_path("configs/gpus/h200.yaml"));
    const size_t start = text.find("kernel_build: \"") + 15;
    text.replace(start, text.find('"', start) - start, build);
    if (only_64) text = text.substr(0, text.find("    - block_q: 128"));
    write_file_atomically(dir_ / "gpu.yaml", text, true);
    return (dir_ / "gpu.yaml").string();
  }

  std::string tune_args() const {
    return "tune --model " + source_path("configs/models/qwen2.5-3b.yaml") + " --cluster " + (dir_ / "cluster.yaml").string() +
           " --trace " + source_path("traces/samples/qwen2.5-3b-32k.safetensors") + " --seq-len 32K --threads 2 --zero 1";
  }

  fs::path dir_;
};

TEST_F(CalibrationStatusCli, SimulateWarnsAboutACalibrationOfAnotherKernelBuild) {
  const std::string plan_path = plan(64, h200_variant("unknown"));
  const test::CliResult text = run_cli("simulate --plan " + plan_path, 120);
  ASSERT_EQ(text.code, 0) << text.output;
  EXPECT_TRUE(contains(text.output, "warning: the calibration in " + (dir_ / "gpu.yaml").string() +
                                        " was measured on kernel build unknown (not recorded)"))
      << text.output;
  EXPECT_TRUE(contains(text.output, std::string(this_kernel_build()))) << text.output;
  EXPECT_TRUE(contains(text.output, "[STALE CALIBRATION]")) << text.output;
  const test::CliResult json = run_cli("--format json simulate --plan " + plan_path, 120);
  ASSERT_EQ(json.code, 0) << json.output;
  const nlohmann::json doc = json_of(json.output);
  ASSERT_TRUE(doc.is_object()) << json.output;
  EXPECT_EQ(doc["calibration"]["stale"], true);
  EXPECT_EQ(doc["calibration"]["kernel_build"], "unknown");
  EXPECT_EQ(doc["calibration"]["this_kernel_build"], std::string(this_kernel_build()));
  EXPECT_EQ(doc["calibration"]["extrapolated"], false);
}

TEST_F(CalibrationStatusCli, SimulateOnThisBuildsCalibrationIsNotStale) {
  const test::CliResult run =
      run_cli("--format json simulate --plan " + plan(64, h200_variant(std::string(this_kernel_build()))), 120);
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_FALSE(contains(run.output, "warning:")) << run.output;
  EXPECT_EQ(json_of(run.output)["calibration"]["stale"], false);
  // Any other recorded build is stale.
  const test::CliResult other = run_cli("simulate --plan " + plan(64, h200_variant("sha256:" + std::string(64, '0'))), 120);
  EXPECT_TRUE(contains(other.output, "measured on kernel build sha256:0000")) << other.output;
}

TEST_F(CalibrationStatusCli, SimulateMarksAnExtrapolatedShape) {
  // The shipped H200 calibrates 64x64x128 and 128x128x128: 256-token blocks are extrapolated from
  // the nearer 128x128x128.
  const test::CliResult run = run_cli("--format json simulate --plan " + plan(256), 120);
  ASSERT_EQ(run.code, 0) << run.output;
  const nlohmann::json doc = json_of(run.output);
  EXPECT_EQ(doc["calibration"]["extrapolated"], true);
  EXPECT_EQ(doc["calibration"]["shape"]["block_q"], 256);
  EXPECT_EQ(doc["calibration"]["calibrated_shape"]["block_q"], 128);
  EXPECT_TRUE(contains(doc["calibration"]["scaling"].get<std::string>(), "x4 (tile FLOPs)"));
  bool noted = false;
  for (const auto& note : doc["notes"]) noted = noted || contains(note.get<std::string>(), "extrapolated: kernel shape 256x256x128");
  EXPECT_TRUE(noted) << doc["notes"].dump();
  EXPECT_TRUE(contains(run_cli("simulate --plan " + plan(256), 120).output, "[EXTRAPOLATED SHAPE]"));
  // A calibrated shape is not.
  EXPECT_EQ(json_of(run_cli("--format json simulate --plan " + plan(128), 120).output)["calibration"]["extrapolated"], false);
}

TEST_F(CalibrationStatusCli, SimulateSaysFiguresArePublished) {
  const test::CliResult run = run_cli("simulate --plan " + plan(64, source_path("tests/config/gpus/published-a100.yaml")), 120);
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "kernel costs: published figures (test-a100-published)  [PUBLISHED FIGURES]")) << run.output;
  EXPECT_FALSE(contains(run.output, "warning:")) << run.output;
  EXPECT_FALSE(contains(run.output, "STALE")) << run.output;
}

TEST_F(CalibrationStatusCli, SimulateRefusesTheOldSingleShapeForm) {
  std::string text = read_file(source_path("configs/gpus/h200.yaml"));
  text = text.substr(0, text.find("calibration:")) +
         "calibration:\n  block_q: 64\n  block_k: 64\n  head_dim: 128\n  forward: {launch_us: 37, per_tile_us: 0.01, "
         "per_vertical_chunk_us: 0.01}\n  backward: {launch_us: 282, per_tile_us: 0.03, per_vertical_chunk_us: 0.05}\n"
         "  gemm_efficiency: 0.76\n  provenance: {gpu: x, driver: y, nccl: z, commit: c, date: \"2026-01-01\"}\n";
  write_file_atomically(dir_ / "old.yaml", text, true);
  const test::CliResult run = run_cli("simulate --plan " + plan(64, (dir_ / "old.yaml").string()), 120);
  EXPECT_EQ(run.code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "single-shape form of earlier versions")) << run.output;
  EXPECT_TRUE(contains(run.output, "Converting a single-shape calibration")) << run.output;
}

TEST_F(CalibrationStatusCli, TuneSearchesCalibratedBlocksOnly) {
  plan(64, h200_variant("unknown", true));
  const test::CliResult run = run_cli(tune_args(), 300);
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "warning: the calibration in")) << run.output;
  EXPECT_TRUE(contains(run.output, "note: block 128 left out of the search: h200 is calibrated for 64x64x128 only"))
      << run.output;
  // Asked for an uncalibrated block alone: nothing to search.
  const test::CliResult refused = run_cli(tune_args() + " --blocks 128", 300);
  EXPECT_EQ(refused.code, 2) << refused.output;
  EXPECT_TRUE(contains(refused.output, "no block size to search")) << refused.output;
  EXPECT_TRUE(contains(refused.output, "--allow-extrapolated-shapes")) << refused.output;
}

TEST_F(CalibrationStatusCli, TuneRanksExtrapolatedBlocksMarkedWhenAllowed) {
  plan(64, h200_variant("unknown", true));
  const test::CliResult json = run_cli("--format json " + tune_args() + " --blocks 128 --allow-extrapolated-shapes --top 2", 300);
  ASSERT_EQ(json.code, 0) << json.output;
  const nlohmann::json doc = json_of(json.output);
  ASSERT_TRUE(doc.is_object()) << json.output;
  EXPECT_EQ(doc["calibration"]["extrapolated_blocks"], nlohmann::json::array({128}));
  EXPECT_EQ(doc["calibration"]["stale"], true);
  ASSERT_FALSE(doc["ranked"].empty());
  for (const auto& ranked : doc["ranked"]) EXPECT_EQ(ranked["extrapolated"], true);
  const test::CliResult text = run_cli(tune_args() + " --blocks 128 --allow-extrapolated-shapes --top 2", 300);
  EXPECT_TRUE(contains(text.output, "128 extrapolated")) << text.output;
}

}  // namespace
}  // namespace sparsering
