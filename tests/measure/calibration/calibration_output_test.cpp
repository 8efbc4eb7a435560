// Tests of measure/calibration/calibration_output.hpp: the JSON reads back with the run's
// figures, the CSVs have one row per measurement plus a header, and the fit table shows the
// coefficients and residuals.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "measure/calibration/calibration_output.hpp"

namespace sparsering {
namespace {

CalibrationRun sample_run() {
  CalibrationRun run;
  run.calibration.provenance = {"NVIDIA H100 80GB HBM3", "580.1", "13.0", "2.28.3", "abc", "2026-01-02T00:00:00Z"};
  run.calibration.gemm_efficiency = 0.65;
  run.forward_fit = evaluate_kernel_cost({10.0, 0.01, 0.02}, std::vector<KernelSample>{{100, 0, 11.0}, {1000, 10, 20.2}});
  run.backward_fit = evaluate_kernel_cost({30.0, 0.03, 0.05}, std::vector<KernelSample>{{100, 0, 33.0}});
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
  EXPECT_EQ(doc["provenance"]["nccl"], "2.28.3");
  EXPECT_EQ(doc["forward"]["coefficients"]["per_tile_us"], 0.01);
  EXPECT_EQ(doc["forward"]["samples"], 2);
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

TEST(CalibrationOutput, FitTableShowsCoefficientsAndResiduals) {
  const std::string table = fit_table(sample_run());
  EXPECT_NE(table.find("forward"), std::string::npos);
  EXPECT_NE(table.find("0.01"), std::string::npos);
  EXPECT_NE(table.find("latency 4.5 us"), std::string::npos);
  EXPECT_NE(table.find("1048576"), std::string::npos);
  EXPECT_NE(table.find("note: a note"), std::string::npos);
  // forward residuals: 11 vs 11 (0%), 10 + 10 + 0.2 = 20.2 vs 20.2 (0%)
  EXPECT_NE(table.find("0.0%"), std::string::npos);
}

}  // namespace
}  // namespace sparsering
