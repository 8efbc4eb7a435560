// Outputs: result JSON carries every per-rank per-step figure, the Chrome trace has one process
// per rank with compute/send/recv tracks and respects its event budget, the summary prints, and
// per-sample results line up with their statistics (sim/output/).
#include <gtest/gtest.h>

#include <set>
#include <vector>
#include <sstream>

#include "common/error.hpp"
#include "sim/output/result_json.hpp"
#include "sim/output/sample_summary.hpp"
#include "sim/output/summary_table.hpp"
#include "sim/output/timeline_json.hpp"
#include "tests/sim/sim_test_inputs.hpp"

namespace sparsering {
namespace {

SimulationResult small_result() {
  const ModelConfig model = testing::small_model();
  const ClusterConfig cluster = testing::small_cluster(2, 2);
  const Trace trace = testing::small_trace(2, 4, 4096, 4);
  SimulationContext context;
  return simulate(context, testing::small_plan(4096, 4, "striped", 64, true, {{2, "nvlink"}, {2, "infiniband"}}), model,
                  cluster, &trace);
}

TEST(OutputTest, ResultJsonHasEveryRankAndStep) {
  const SimulationResult r = small_result();
  const nlohmann::json j = result_to_json(r);
  EXPECT_EQ(j["format"], "sparsering-simulation");
  EXPECT_EQ(j["step"]["step_ns"].get<int64_t>(), r.step.step_ns);
  ASSERT_EQ(j["layers"].size(), 2U);
  ASSERT_EQ(j["rings"].size(), 2U * 2U * r.ring_classes.size());
  for (const auto& ring : j["rings"]) {
    ASSERT_EQ(ring["ranks"].size(), 4U);
    for (const auto& rank : ring["ranks"]) {
      EXPECT_EQ(rank["compute_start_ns"].size(), 4U);
      EXPECT_EQ(rank["comm_exposed"].size(), 4U);
    }
  }
  EXPECT_FALSE(result_summary_json(r).contains("rings"));
}

TEST(OutputTest, TimelineTracksAndBudget) {
  const SimulationResult r = small_result();
  const nlohmann::json t = timeline_json(r);
  std::set<std::pair<int64_t, int64_t>> tracks;
  int64_t complete = 0;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "X") {
      ++complete;
      tracks.insert({e["pid"].get<int64_t>(), e["tid"].get<int64_t>()});
      EXPECT_GT(e["dur"].get<double>(), 0.0);
    }
  }
  EXPECT_EQ(tracks.size(), 12U) << "4 ranks x (compute, send, recv)";
  EXPECT_FALSE(t["otherData"].contains("ring_detail_note"));
  TimelineOptions tight;
  tight.max_events = 10;
  const nlohmann::json small = timeline_json(r, tight);
  EXPECT_TRUE(small["otherData"].contains("ring_detail_note"));
  int64_t small_complete = 0;
  for (const auto& e : small["traceEvents"]) small_complete += e["ph"] == "X" ? 1 : 0;
  EXPECT_LT(small_complete, complete);
}

TEST(OutputTest, SummaryPrints) {
  std::ostringstream out;
  print_summary(out, small_result());
  EXPECT_NE(out.str().find("training step"), std::string::npos);
  EXPECT_NE(out.str().find("tokens/s"), std::string::npos);
  EXPECT_NE(out.str().find("memory per GPU"), std::string::npos);
}

TEST(OutputTest, SamplesSideBySideWithTheirStatistics) {
  // Two hand-set results: steps of 10 and 30 ms.
  std::vector<SimulationResult> results(2);
  results[0].step.step_ns = 10'000'000;
  results[1].step.step_ns = 30'000'000;
  results[0].step.tokens_per_s = 300.0;
  results[1].step.tokens_per_s = 100.0;
  results[1].memory.peak_bytes = int64_t{2} << 30;
  const nlohmann::json j = sample_summary_json({4, 1}, results);
  ASSERT_EQ(j.at("samples").size(), 2U);
  EXPECT_EQ(j.at("samples")[0].at("sample"), 4);
  EXPECT_DOUBLE_EQ(j.at("samples")[1].at("step_ms").get<double>(), 30.0);
  const nlohmann::json& step = j.at("aggregate").at("step_ms");
  EXPECT_DOUBLE_EQ(step.at("mean").get<double>(), 20.0);
  EXPECT_DOUBLE_EQ(step.at("p50").get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(step.at("max").get<double>(), 30.0);
  EXPECT_DOUBLE_EQ(step.at("min").get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(step.at("stdev").get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(j.at("aggregate").at("peak_memory_gib").at("max").get<double>(), 2.0);
  std::ostringstream out;
  print_sample_summary(out, {4, 1}, results);
  EXPECT_NE(out.str().find("per trace sample (2)"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("20.000"), std::string::npos) << out.str();  // the mean step
  EXPECT_THROW(sample_summary_json({0}, results), InputError);
}

}  // namespace
}  // namespace sparsering
