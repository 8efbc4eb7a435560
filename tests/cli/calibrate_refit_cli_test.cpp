// `sparsering calibrate --refit CSV`, end to end through the built binary (no GPU, any build):
// the recorded measurements of a run are fitted again into the GPU config that run wrote (its
// kernel build and provenance kept), the fit and the measurements with their predictions go to
// --out; replacing the section needs --force, options that choose what to measure are refused,
// and so are a missing CSV and a config without a measured calibration (exit code 2). Library
// side: tests/measure/calibration/calibration_refit_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "tests/cli/cli_process.hpp"

namespace sparsering {
namespace {

namespace fs = std::filesystem;
using test::contains;
using test::run_cli;

const char* kGpu = R"(# written by a calibrate run
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
  provenance: {gpu: "Test GPU", driver: "1", nccl: "2", commit: "abc1234", date: "2026-01-01"}
  shapes:
    - block_q: 64
      block_k: 64
      head_dim: 128
      forward: {launch_us: 1, per_list_us: 0, per_tile_us: 0.5, per_vertical_chunk_us: 0}
      backward: {launch_us: 1, per_list_us: 0, per_tile_us: 0.5, per_vertical_chunk_us: 0}
      fit: {samples: 10, median_relative_error: 0.1, max_relative_error: 0.2, heldout_median_relative_error: 0.1, heldout_max_relative_error: 0.2, folds: 5}
)";

/// A run's kernel CSV at 64x64x128 with the backward's units recorded: forward 8 us + 0.03 us per
/// list + 0.01 us per tile, backward 150 us + 0.2 us per key list + 0.025 us per tile, exactly.
std::string kernels_csv() {
  std::ostringstream out;
  out.precision(12);
  out << "direction,q_heads,kv_heads,local_tokens,block_q,block_k,head_dim,tiles_per_list,chunks_per_list,lists,tiles,"
         "column_chunks,repeats,median_us,min_us,max_us,under_filled,predicted_us,placement,columns_per_list,key_lists,"
         "column_lists,column_items,columns,key_block_stride\n";
  for (const auto& [q_heads, kv_heads] : {std::pair{16, 2}, std::pair{32, 4}}) {
    for (const int64_t local : {int64_t{32768}, int64_t{65536}}) {
      for (const int64_t tiles_per_list : {int64_t{1}, int64_t{4}, int64_t{16}}) {
        const int64_t lists = q_heads * (local / 64);
        const int64_t tiles = lists * tiles_per_list;
        const int64_t key_lists = kv_heads * (local / 64);
        const double fwd = 8.0 + 0.03 * static_cast<double>(lists) + 0.01 * static_cast<double>(tiles);
        const double bwd = 150.0 + 0.2 * static_cast<double>(key_lists) + 0.025 * static_cast<double>(tiles);
        for (const auto& [direction, us] : {std::pair{"forward", fwd}, std::pair{"backward", bwd}}) {
          out << direction << ',' << q_heads << ',' << kv_heads << ',' << local << ",64,64,128," << tiles_per_list << ",0,"
              << lists << ',' << tiles << ",0,7," << us << ',' << us << ',' << us << ",0,0,banded,0," << key_lists
              << ",0,0,0,1\n";
        }
      }
    }
  }
  return out.str();
}

class CalibrateRefitCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparsering_cli_refit_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write_file_atomically(dir_ / "gpu.yaml", kGpu, true);
    write_file_atomically(dir_ / "run.csv", kernels_csv(), true);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(CalibrateRefitCli, RefitsTheRecordedRunIntoItsConfig) {
  const test::CliResult r = run_cli("--out " + path("out") + " --force calibrate --gpu " + path("gpu.yaml") + " --refit " +
                                        path("run.csv"),
                                    120);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "kernel cost fit (Test GPU, kernel build unknown)")) << r.output;
  EXPECT_TRUE(contains(r.output, "refit of ")) << r.output;
  const std::string config = read_file(dir_ / "gpu.yaml");
  EXPECT_TRUE(contains(config, "# written by a calibrate run")) << "the rest of the file is kept";
  EXPECT_TRUE(contains(config, "forward: {launch_us: 8, per_list_us: 0.03, per_tile_us: 0.01, per_vertical_chunk_us: 0}"))
      << config;
  EXPECT_TRUE(contains(config, "per_tile_us: 0.025, per_vertical_chunk_us: 0, per_key_list_us: 0.2}")) << config;
  EXPECT_TRUE(contains(config, "commit: \"abc1234\"")) << "provenance kept: " << config;
  EXPECT_TRUE(fs::exists(dir_ / "out" / "calibration-refit-gpu.json"));
  const std::string csv = read_file(dir_ / "out" / "calibration-refit-gpu-kernels.csv");
  EXPECT_TRUE(contains(csv, ",key_block_stride,key_pass_us,longest_key_list,sm_clock_mhz\n")) << csv.substr(0, 400);
  // The outputs exist now: a second refit without --force is refused before writing anything.
  const test::CliResult again =
      run_cli("--out " + path("out") + " calibrate --gpu " + path("gpu.yaml") + " --refit " + path("run.csv"), 120);
  EXPECT_EQ(again.code, 2) << again.output;
  EXPECT_TRUE(contains(again.output, "already exists; pass --force")) << again.output;
}

TEST_F(CalibrateRefitCli, FoldDealingsAreRecordedAndBoundsRefused) {
  test::CliResult r = run_cli("--out " + path("out") + " --force calibrate --gpu " + path("gpu.yaml") + " --refit " +
                                  path("run.csv") + " --fold-dealings 3 --fold-seed 4",
                              120);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "held-out: 5-fold by benchmark case, dealt 3 times from seed 4")) << r.output;
  EXPECT_TRUE(contains(read_file(dir_ / "gpu.yaml"), "folds: 5, dealings: 3}")) << read_file(dir_ / "gpu.yaml");
  for (const char* bad : {"0", "101"}) {
    r = run_cli("--out " + path("out") + " --force calibrate --gpu " + path("gpu.yaml") + " --refit " + path("run.csv") +
                    " --fold-dealings " + bad,
                120);
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_TRUE(contains(r.output, std::string("--fold-dealings must be in [1, 100], got ") + bad)) << r.output;
  }
}

/// A replay's files: cells.csv at 64x64x128, 32 heads over 4 K/V heads, 32K-token chunks (2048
/// key blocks), the forward timed by the run's model with tiles 20% cheaper, the backward by its
/// model; and the validation.json that names `build`.
void write_replay(const fs::path& dir, const std::string& name, const std::string& build, int32_t tiles_per_list) {
  fs::create_directories(dir);
  std::ostringstream cells;
  cells.precision(12);
  cells << "direction,position,step,block_q,block_k,head_dim,heads,kv_heads,chunk_tokens,lists,tiles,masked_tiles,"
           "columns,column_chunks,key_lists,column_lists,column_items,key_blocks,measured_us,predicted_us\n";
  for (int32_t step = 0; step < 8; ++step) {
    const int64_t lists = 32 * 512;
    const int64_t tiles = lists * (tiles_per_list + step);
    const double fwd = 8.0 + 0.03 * static_cast<double>(lists) + 0.008 * static_cast<double>(tiles);
    const double bwd = 150.0 + 0.2 * 2048.0 + 0.025 * static_cast<double>(tiles);
    cells << "forward,0," << step << ",64,64,128,32,4,32768," << lists << ',' << tiles << ",0,0,0,0,0,0,2048," << fwd
          << ",0\n";
    cells << "backward,0," << step << ",64,64,128,32,4,32768," << lists << ',' << tiles << ",0,0,0,2048,0,0,2048," << bwd
          << ",0\n";
  }
  write_file_atomically(dir / "cells.csv", cells.str(), true);
  write_file_atomically(dir / "validation.json",
                        R"({"format": "sparsering-validation", "mode": "replay", "plan": ")" + name +
                            R"(", "calibration": {"this_kernel_build": ")" + build + R"("}})",
                        true);
}

TEST_F(CalibrateRefitCli, FitsReplayedCellsOfTheSameKernelsWithTheRun) {
  for (int r = 0; r < 3; ++r) write_replay(dir_ / str("r", r), str("r", r), "unknown", 2 + 3 * r);
  const std::string cells = " --cells " + path("r0/cells.csv") + " " + path("r1/cells.csv") + " " + path("r2/cells.csv");
  test::CliResult r = run_cli("--out " + path("out") + " --force calibrate --gpu " + path("gpu.yaml") + " --refit " +
                                  path("run.csv") + cells,
                              120);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "with 48 replayed ring cells")) << r.output;
  EXPECT_TRUE(contains(r.output, "64x64x128 forward: 24 replayed ring cells of 3 replays, grid weight")) << r.output;
  EXPECT_TRUE(contains(read_file(dir_ / "out" / "calibration-refit-gpu-kernels.csv"), ",replay:r1,")) << "cells recorded";
  // That CSV refits again as it is, its cells (written before the longest key list was counted)
  // with them.
  r = run_cli("--out " + path("out2") + " --force calibrate --gpu " + path("gpu.yaml") + " --refit " +
                  path("out/calibration-refit-gpu-kernels.csv"),
              120);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "64x64x128 forward: 24 replayed ring cells of 3 replays, grid weight")) << r.output;
  // --backward-cells: that replay's backward cells alone.
  r = run_cli("--out " + path("out") + " --force calibrate --gpu " + path("gpu.yaml") + " --refit " + path("run.csv") +
                  " --cells " + path("r0/cells.csv") + " " + path("r1/cells.csv") + " --backward-cells " +
                  path("r2/cells.csv"),
              120);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "with 40 replayed ring cells")) << r.output;
  EXPECT_TRUE(contains(r.output, "64x64x128 forward: 16 replayed ring cells of 2 replays")) << r.output;
  EXPECT_TRUE(contains(r.output, "64x64x128 backward: 24 replayed ring cells of 3 replays")) << r.output;
  r = run_cli("--out " + path("out") + " --force calibrate --gpu " + path("gpu.yaml") + " --refit " + path("run.csv") +
                  " --cells " + path("r0/cells.csv") + " --backward-cells " + path("r0/cells.csv"),
              120);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "--backward-cells")) << r.output;
  EXPECT_TRUE(contains(r.output, "plan r0 is already given by another cells file")) << r.output;
  // Cells of other kernels, or without the validation.json that says which, cannot enter the fit.
  write_replay(dir_ / "old", "old", "sha256:0ld", 3);
  r = run_cli("--out " + path("out") + " --force calibrate --gpu " + path("gpu.yaml") + " --refit " + path("run.csv") +
                  " --cells " + path("old/cells.csv"),
              120);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "replayed on kernel build sha256:0ld")) << r.output;
  fs::remove(dir_ / "old" / "validation.json");
  r = run_cli("--out " + path("out") + " --force calibrate --gpu " + path("gpu.yaml") + " --refit " + path("run.csv") +
                  " --cells " + path("old/cells.csv"),
              120);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "no validation.json beside it")) << r.output;
  // The same plan twice (here a copy in another folder) would count its cells twice.
  write_replay(dir_ / "copy", "r1", "unknown", 5);
  r = run_cli("--out " + path("out") + " --force calibrate --gpu " + path("gpu.yaml") + " --refit " + path("run.csv") +
                  " --cells " + path("r1/cells.csv") + " " + path("copy/cells.csv"),
              120);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "plan r1 is already given by another cells file")) << r.output;
  r = run_cli("--out " + path("out") + " --force calibrate --gpu " + path("gpu.yaml") + " --cells " + path("r0/cells.csv"),
              120);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "--cells requires --refit")) << r.output;
  r = run_cli("--out " + path("out") + " --force calibrate --gpu " + path("gpu.yaml") + " --backward-cells " +
                  path("r0/cells.csv"),
              120);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "--backward-cells requires --refit")) << r.output;
}

TEST_F(CalibrateRefitCli, RefusesWhatARefitCannotDo) {
  const std::string refit = " --refit " + path("run.csv");
  // Replacing a calibration section needs --force, as a measurement does.
  test::CliResult r = run_cli("--out " + path("out") + " calibrate --gpu " + path("gpu.yaml") + refit, 120);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "already has a calibration section; pass --force")) << r.output;
  EXPECT_EQ(read_file(dir_ / "gpu.yaml"), kGpu);
  // Options that choose what to measure do not apply to measurements already made.
  for (const std::string option : {"--quick", "--banded", "--repeats 3", "--shapes 64x64x128", "--cluster c.yaml"}) {
    r = run_cli("--out " + path("out") + " --force calibrate --gpu " + path("gpu.yaml") + refit + " " + option, 120);
    EXPECT_EQ(r.code, 2) << option << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "excludes")) << option << ": " << r.output;
  }
  r = run_cli("--out " + path("out") + " --force calibrate --gpu " + path("gpu.yaml") + " --refit " + path("missing.csv"), 120);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "missing.csv")) << r.output;
  // A config without a measured calibration says nothing of the kernels the CSV measured.
  std::string bare = kGpu;
  write_file_atomically(dir_ / "bare.yaml", bare.substr(0, bare.find("calibration:")), true);
  r = run_cli("--out " + path("out") + " --force calibrate --gpu " + path("bare.yaml") + refit, 120);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "has no calibration section")) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "out" / "calibration-refit-gpu.json")) << "nothing written on refusal";
}

}  // namespace
}  // namespace sparsering
