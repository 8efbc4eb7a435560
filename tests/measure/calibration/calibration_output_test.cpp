// Tests of measure/calibration/calibration_output.hpp: the JSON reads back with the run's figures
// (kernel build, per shape and direction the coefficients, in-sample, held-out and under-filled
// errors and residuals), the CSVs have one row per measurement plus a header, and the fit table
// shows coefficients, both errors, the folds and seed, and the residual lines.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "measure/calibration/calibration_output.hpp"

namespace sparsering {
namespace {

DirectionFit direction(const KernelCostCoefficients& c, const std::vector<KernelSample>& samples) {
  DirectionFit d;
  d.fit = evaluate_kernel_cost(c, samples);
  d.heldout.folds = 5;
  d.heldout.seed = 7;
  d.heldout.dealings = 3;
  d.heldout.median_relative_error = 0.031;
  d.heldout.max_relative_error = 0.125;
  d.by_local_tokens = {{16384, 9, 0.13}, {65536, 27, -0.105}};
  d.by_group = {{4, 9, 0.02}, {8, 27, -0.01}};
  return d;
}

CalibrationRun sample_run() {
  CalibrationRun run;
  run.calibration.kernel_build = "sha256:" + std::string(64, 'e');
  run.calibration.provenance = {"NVIDIA H100 80GB HBM3", "580.1", "13.0", "2.28.3", "abc", "2026-01-02T00:00:00Z"};
  run.calibration.gemm_efficiency = 0.65;
  run.fit_options = {.folds = 5, .seed = 7, .dealings = 3};
  ShapeFit fit;
  fit.shape = {128, 128, 128};
  fit.forward = direction({10.0, 0.5, 0.01, 0.02}, {{100, 0, 12.0, 2}, {1000, 10, 21.7, 3}});
  fit.backward = direction({30.0, 0.0, 0.03, 0.05}, {{100, 0, 33.0, 1}});
  run.fits = {fit};
  KernelMeasurement k;
  k.direction = "forward";
  k.q_heads = 16;
  k.tiles = 100;
  k.median_us = 11.0;
  run.kernels = {k, k, k};
  run.kernels[2].direction = "backward";
  HopMeasurement h;
  h.mode = "ring";
  h.gpus = 2;
  h.ring_size = 2;
  h.bytes = 65536;
  h.median_us = 20.0;
  h.gbytes_per_s = 3.2768;
  run.hops = {h};
  run.has_link = true;
  run.link_level = "intra_node";
  run.link.latency_us = 4.5;
  run.link.curve = {{65536, 4.2}, {1048576, 40.5}};
  run.notes = {"a note"};
  return run;
}

TEST(CalibrationOutput, JsonReadsBack) {
  const nlohmann::json doc = nlohmann::json::parse(calibration_json(sample_run()));
  EXPECT_EQ(doc["format"], "sparsering-calibration");
  EXPECT_EQ(doc["kernel_build"], "sha256:" + std::string(64, 'e'));
  EXPECT_EQ(doc["provenance"]["nccl"], "2.28.3");
  const nlohmann::json& shape = doc["shapes"][0];
  EXPECT_EQ(shape["shape"]["block_q"], 128);
  EXPECT_EQ(shape["forward"]["coefficients"]["per_list_us"], 0.5);
  EXPECT_EQ(shape["forward"]["coefficients"]["per_tile_us"], 0.01);
  EXPECT_EQ(shape["forward"]["fit"]["samples"], 2);
  EXPECT_EQ(shape["forward"]["heldout"]["folds"], 5);
  EXPECT_EQ(shape["forward"]["heldout"]["seed"], 7);
  EXPECT_EQ(shape["forward"]["heldout"]["dealings"], 3);
  EXPECT_EQ(shape["forward"]["heldout"]["max_relative_error"], 0.125);
  EXPECT_EQ(shape["backward"]["residuals_by_local_tokens"][1]["value"], 65536);
  EXPECT_EQ(shape["backward"]["residuals_by_local_tokens"][1]["median_signed_error"], -0.105);
  EXPECT_EQ(doc["kernels"].size(), 3u);
  EXPECT_EQ(doc["kernels"][2]["direction"], "backward");
  EXPECT_EQ(doc["hops"][0]["bytes"], 65536);
  EXPECT_EQ(doc["link"]["latency_us"], 4.5);
  EXPECT_EQ(doc["link"]["curve"][1]["gbytes_per_s"], 40.5);
  EXPECT_EQ(doc["notes"][0], "a note");
}

TEST(CalibrationOutput, CsvHasHeaderAndOneRowPerMeasurement) {
  const CalibrationRun run = sample_run();
  const std::string kernels = kernel_measurements_csv(run.kernels);
  EXPECT_EQ(std::count(kernels.begin(), kernels.end(), '\n'), 4);
  EXPECT_EQ(kernels.rfind("direction,q_heads,", 0), 0u);
  const std::string hops = hop_measurements_csv(run.hops);
  EXPECT_EQ(std::count(hops.begin(), hops.end(), '\n'), 2);
  EXPECT_NE(hops.find("ring,2,2,65536,"), std::string::npos);
}

TEST(CalibrationOutput, FitTableShowsCoefficientsBothErrorsAndResiduals) {
  const std::string table = fit_table(sample_run());
  EXPECT_NE(table.find("128x128x128"), std::string::npos);
  EXPECT_NE(table.find("forward"), std::string::npos);
  EXPECT_NE(table.find("0.01"), std::string::npos);
  EXPECT_NE(table.find("held-out: 5-fold by benchmark case, dealt 3 times from seed 7; medians weigh each launch as the fit does"),
            std::string::npos);
  EXPECT_NE(table.find("kernel build sha256:eeee"), std::string::npos);
  EXPECT_NE(table.find("12.5%"), std::string::npos);  // held-out max
  EXPECT_NE(table.find("16384: +13.0% (9), 65536: -10.5% (27)"), std::string::npos) << table;
  EXPECT_NE(table.find("latency 4.5 us"), std::string::npos);
  EXPECT_NE(table.find("1048576"), std::string::npos);
  EXPECT_NE(table.find("note: a note"), std::string::npos);
  // forward residuals: 10 + 1 + 1 = 12 vs 12 (0%), 10 + 1.5 + 10 + 0.2 = 21.7 vs 21.7 (0%)
  EXPECT_NE(table.find("0.0%"), std::string::npos);
}

}  // namespace
}  // namespace sparsering
