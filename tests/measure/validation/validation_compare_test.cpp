// Tests of the validation's CPU side: the problem built from a plan and a trace
// (measure/validation/validation_problem.hpp), the comparison (validation_compare.hpp), the ring
// runtime bridge (ring_measurement.hpp) and the outputs (validation_json.hpp, validation_table.hpp).
// Oracles: the simulator's own prediction fed back as the "measurement" gives zero error and the
// same layer time; scaled measurements give the hand-derived errors; kept sets against the
// trace's recall selection.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <sstream>

#include "common/error.hpp"
#include "measure/validation/ring_measurement.hpp"
#include "measure/validation/validation_compare.hpp"
#include "measure/validation/validation_json.hpp"
#include "measure/validation/validation_problem.hpp"
#include "measure/validation/validation_table.hpp"
#include "sim/step/simulation.hpp"
#include "traces/recall.hpp"
#include "traces/safetensors_trace.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

const std::filesystem::path kRoot = SPARSERING_SOURCE_DIR;

LoadedPlan plan_32k(const std::string& layout, int ranks, bool sparse, const std::string& levels = "") {
  const std::string text = str(
      "name: t\nmodel: qwen2.5-3b\ncluster: h200-8x-nvlink\nseq_len_tokens: 32768\ncontext_parallel: ", ranks,
      "\nhead_parallel: 1\ndata_parallel: ", 8 / ranks, "\n",
      str("ring:\n  levels: ", levels.empty() ? str("[{size: ", ranks, ", link: nvlink}]") : levels, "\n"), "layout:\n  kind: ", layout,
      layout == "striped" ? "\n  granularity_tokens: 64" : "", "\nsparse:\n  enabled: ", sparse ? "true" : "false",
      "\n  block_q: 64\n  block_k: 64\n  recall: 0.9\n");
  LoadedPlan loaded;
  loaded.plan = parse_plan(text, "test plan");
  loaded.model = load_model(kRoot / "configs/models/qwen2.5-3b.yaml");
  loaded.cluster = load_cluster(kRoot / "configs/clusters/h200-8x-nvlink.yaml");
  check_plan_against(loaded.plan, loaded.model, loaded.cluster);
  return loaded;
}

const Trace& sample_trace() {
  static const Trace trace = read_trace(kRoot / "traces/samples/qwen2.5-3b-32k.safetensors");
  return trace;
}

SimulationResult predict(const LoadedPlan& loaded, const Trace* trace) {
  SimulationContext context;
  SimulationOptions options;
  options.keep_ring_records = true;
  return simulate(context, loaded.plan, loaded.model, loaded.cluster, trace, options);
}

/// The prediction of `layer` as if it had been measured by a replay, times `scale`.
MeasuredLayer echo(const SimulationResult& result, int64_t layer, double scale) {
  const auto [fwd, bwd] = find_layer_passes(result, layer);
  MeasuredLayer m;
  m.mode = "replay";
  m.ranks = fwd->run.ranks;
  m.iterations = 1;
  for (SimNs ns : fwd->compute_ns) m.forward.compute_us.push_back(ns_to_us(ns) * scale);
  for (SimNs ns : bwd->compute_ns) m.backward.compute_us.push_back(ns_to_us(ns) * scale);
  return m;
}

TEST(ValidationProblem, KeptSetsAreTheTracesRecallSelection) {
  const LoadedPlan loaded = plan_32k("zigzag", 4, true);
  const ValidationProblem problem = make_validation_problem(loaded, &sample_trace(), 5, 0);
  EXPECT_EQ(problem.ranks(), 4);
  EXPECT_EQ(problem.shape.q_heads, 16);
  EXPECT_EQ(problem.shape.kv_heads, 2);
  EXPECT_EQ(problem.shape.q_len, 8192);
  ASSERT_EQ(problem.kept.rows(), 16);
  RecallSettings settings;
  settings.recall = 0.9;
  for (int64_t h = 0; h < 16; ++h) {
    const HeadSelection kept = select_head(sample_trace(), 0, 5, h, settings);
    EXPECT_EQ(problem.kept.row(static_cast<int32_t>(h)).slash_offsets.size(), kept.slash_offsets.size());
    EXPECT_EQ(problem.kept.row(static_cast<int32_t>(h)).vertical_keys.size(), kept.vertical_keys.size());
  }
  const PaddedKeptSet padded = problem.kept.padded();
  for (int32_t r = 0; r < padded.rows; ++r) {
    const auto* s = &padded.slash_offsets[static_cast<size_t>(r * padded.capacity)];
    for (int32_t k = 1; k < padded.slash_count[static_cast<size_t>(r)]; ++k) EXPECT_LT(s[k - 1], s[k]);
  }
  EXPECT_THROW(make_validation_problem(loaded, &sample_trace(), 36, 0), InputError);
  EXPECT_THROW(make_validation_problem(loaded, &sample_trace(), 0, 1), InputError);
  EXPECT_THROW(make_validation_problem(loaded, nullptr, 0, 0), InputError);
}

TEST(ValidationProblem, ResizedRingKeepsTheWorld) {
  const LoadedPlan loaded = plan_32k("striped", 8, false, "[{size: 2, link: nvlink}, {size: 4, link: nvlink}]");
  const PlanConfig four = with_ring_size(loaded.plan, 4);
  EXPECT_EQ(four.context_parallel, 4);
  EXPECT_EQ(four.data_parallel, 2);
  ASSERT_EQ(four.ring_levels.size(), 2U);
  EXPECT_EQ(four.ring_levels[0].size, 2);
  EXPECT_EQ(four.layout.ranks(), 4);
  check_plan_against(four, loaded.model, loaded.cluster);
  EXPECT_THROW(with_ring_size(loaded.plan, 3), InputError);
  EXPECT_THROW(with_ring_size(loaded.plan, 0), InputError);
}

TEST(ValidationCompare, ThePredictionAsMeasurementHasNoError) {
  for (const std::string layout : {"contiguous", "zigzag", "striped"}) {
    const LoadedPlan loaded = plan_32k(layout, 8, true, "[{size: 4, link: nvlink}, {size: 2, link: nvlink}]");
    const SimulationResult result = predict(loaded, &sample_trace());
    const ValidationProblem problem = make_validation_problem(loaded, &sample_trace(), 3, 0);
    const ValidationReport report = compare_layer(problem, result, echo(result, 3, 1.0));
    EXPECT_EQ(report.forward.compute_error.median_abs, 0.0) << layout;
    EXPECT_EQ(report.backward.compute_error.worst_abs, 0.0) << layout;
    EXPECT_DOUBLE_EQ(report.forward.measured_ms, report.forward.predicted_ms) << layout;
    EXPECT_DOUBLE_EQ(report.backward.measured_ms, report.backward.predicted_ms) << layout;
    EXPECT_TRUE(report.layer_time_met);
    EXPECT_TRUE(report.cell_time_met);
    EXPECT_FALSE(report.step_overlap_met);  // replays do not measure steps
    EXPECT_EQ(report.forward.derived_run.end_ns, find_layer_passes(result, 3).first->run.end_ns);
  }
}

TEST(ValidationCompare, SlowerKernelsGiveTheHandDerivedErrors) {
  // Dense, compute bound: measured kernels 1.25 x the predicted ones -> every cell -20%.
  const LoadedPlan loaded = plan_32k("zigzag", 4, false);
  const SimulationResult result = predict(loaded, nullptr);
  const ValidationProblem problem = make_validation_problem(loaded, nullptr, 0, 0);
  const ValidationReport report = compare_layer(problem, result, echo(result, 0, 1.25));
  EXPECT_NEAR(report.forward.compute_error.median_abs, 0.2, 1e-3);
  EXPECT_NEAR(report.forward.compute_error.worst_signed, -0.2, 1e-3);
  EXPECT_NEAR(report.forward.compute_error.mean_signed, -0.2, 1e-3);
  EXPECT_LT(report.forward.error, 0.0);
  EXPECT_GT(report.backward.measured_ms, report.backward.predicted_ms);
  EXPECT_FALSE(report.cell_time_met);  // 20% > the 5% cell target
}

TEST(ValidationCompare, ErrorSummaryOnRandomCells) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  std::uniform_real_distribution<double> value(1.0, 100.0);
  std::vector<double> measured(101);
  std::vector<double> predicted(101);
  std::vector<double> errors;
  for (size_t k = 0; k < measured.size(); ++k) {
    measured[k] = value(rng);
    predicted[k] = value(rng);
    errors.push_back(std::fabs((predicted[k] - measured[k]) / measured[k]));
  }
  measured.push_back(0.0);  // skipped: both 0
  predicted.push_back(0.0);
  const ErrorSummary summary = summarize_errors(measured, predicted);
  EXPECT_EQ(summary.count, 101);
  std::sort(errors.begin(), errors.end());
  EXPECT_DOUBLE_EQ(summary.median_abs, errors[50]);
  EXPECT_DOUBLE_EQ(summary.worst_abs, errors.back());
  EXPECT_THROW(summarize_errors(std::vector<double>{1.0}, std::vector<double>{}), InputError);
  EXPECT_THROW(summarize_errors(std::vector<double>{-1.0}, std::vector<double>{1.0}), InputError);
  EXPECT_EQ(relative_error(0.0, 3.0), 1.0);
}

TEST(RingMeasurement, GlobalRanksBecomePositionsAndTransfersAreInferred) {
  // W = 2, ring order [1, 0]: global rank 1 sits at position 0.
  RingLayerMeasurement m;
  m.ranks = 2;
  for (RingPassTimes* pass : {&m.forward, &m.backward}) {
    pass->compute_ms = {1.0, 2.0, 3.0, 4.0};   // [g x W + t]
    pass->step_ms = {1.0, 2.5, 3.0, 4.0};
    pass->recv_wait_ms = {0.0, 0.5, 0.0, 0.0};
    pass->wall_ms = 7.0;
    pass->exposed_comm_ms = 0.5;
  }
  m.index_tiles = {1, 2, 3, 4};
  const MeasuredLayer out = measured_from_ring(m, {1, 0}, 3);
  EXPECT_EQ(out.mode, "ring");
  EXPECT_EQ(out.tiles, 10);
  EXPECT_EQ(out.forward.compute_us, (std::vector<double>{3000.0, 4000.0, 1000.0, 2000.0}));
  // Position 1 is global rank 0: waited 0.5 ms at step 1 after a 1 ms compute -> 1.5 ms transfer.
  EXPECT_DOUBLE_EQ(out.forward.comm_us[3], 1500.0);
  EXPECT_DOUBLE_EQ(out.forward.comm_us[1], 0.0);
  EXPECT_DOUBLE_EQ(out.forward.compute_start_us[3], 1500.0);
  EXPECT_THROW(measured_from_ring(m, {0}, 1), InputError);
  EXPECT_THROW(measured_from_ring(m, {0, 2}, 1), InputError);
}

TEST(RingMeasurement, ProblemCarriesKeptSetsOrDense) {
  const LoadedPlan sparse = plan_32k("striped", 2, true);
  const ValidationProblem problem = make_validation_problem(sparse, &sample_trace(), 1, 0);
  const RingLayerProblem ring = make_ring_layer_problem(problem, validation_ring_order(sparse.plan), 2);
  EXPECT_EQ(ring.pattern, PatternSource::kept_sets);
  ASSERT_EQ(ring.kept.rows(), 16);
  EXPECT_EQ(ring.kept, problem.kept);
  EXPECT_EQ(ring.ring_order, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(ring.iterations, 2);
  const LoadedPlan dense = plan_32k("zigzag", 2, false);
  const RingLayerProblem dense_ring =
      make_ring_layer_problem(make_validation_problem(dense, nullptr, 0, 0), validation_ring_order(dense.plan), 1);
  EXPECT_EQ(dense_ring.pattern, PatternSource::dense);
  const ValidationProblem dense_problem = make_validation_problem(dense, nullptr, 0, 0);
  EXPECT_EQ(dense_problem.kept, KeptSet::dense(dense_problem.row_count(), 32768));
  EXPECT_THROW(make_ring_layer_problem(problem, {0, 1}, 0), InputError);
}

TEST(ValidationOutputs, JsonTimelineAndTableCarryTheFigures) {
  const LoadedPlan loaded = plan_32k("zigzag", 4, true);
  const SimulationResult result = predict(loaded, &sample_trace());
  const ValidationProblem problem = make_validation_problem(loaded, &sample_trace(), 2, 0);
  const MeasuredLayer measured = echo(result, 2, 1.1);
  const ValidationReport report = compare_layer(problem, result, measured);
  const nlohmann::json doc = validation_to_json(report, nlohmann::json{{"commit", "abc"}});
  EXPECT_EQ(doc["format"], "sparsering-validation");
  EXPECT_EQ(doc["ranks"], 4);
  EXPECT_EQ(doc["forward"]["measured_compute_us"].size(), 16U);
  EXPECT_DOUBLE_EQ(doc["forward"]["error"].get<double>(), report.forward.error);
  EXPECT_EQ(doc["provenance"]["commit"], "abc");
  EXPECT_TRUE(doc["targets"]["step_overlap_met"].is_null());
  const nlohmann::json timeline = measured_timeline_json(report, measured);
  int64_t kernels = 0;
  for (const auto& e : timeline["traceEvents"]) kernels += e["ph"] == "X" && e["tid"] == 0 ? 1 : 0;
  EXPECT_EQ(kernels, 2 * 16);  // every (position, step), forward and backward
  std::ostringstream table;
  print_validation(table, report);
  EXPECT_NE(table.str().find("attention fwd (ms)"), std::string::npos);
  EXPECT_NE(table.str().find("target per-layer attention time"), std::string::npos);
}

TEST(ValidationOutputs, TheClockOfEveryCellTravelsToJsonCsvAndTable) {
  // A replay records the SM clock each cell's timed launches ran at: JSON keeps the vector, cells.csv
  // its last column, the table the median and the lowest over the cells that launched (0: none).
  const LoadedPlan loaded = plan_32k("zigzag", 4, true);
  const SimulationResult result = predict(loaded, &sample_trace());
  const ValidationProblem problem = make_validation_problem(loaded, &sample_trace(), 2, 0);
  MeasuredLayer measured = echo(result, 2, 1.0);
  for (size_t k = 0; k < 16; ++k) {
    measured.forward.sm_clock_mhz.push_back(k == 3 ? 0.0 : 1700.0 + 10.0 * static_cast<double>(k));
    measured.backward.sm_clock_mhz.push_back(1980.0);
  }
  const ValidationReport report = compare_layer(problem, result, measured);
  const nlohmann::json doc = validation_to_json(report, nlohmann::json{{"commit", "abc"}});
  ASSERT_EQ(doc["forward"]["measured_sm_clock_mhz"].size(), 16U);
  EXPECT_EQ(doc["forward"]["measured_sm_clock_mhz"][5].get<double>(), 1750.0);
  std::istringstream csv(validation_cells_csv(report));
  std::string line;
  std::getline(csv, line);
  for (int row = 0; row <= 5; ++row) std::getline(csv, line);  // forward, position 1, step 1: cell 5
  EXPECT_EQ(line.substr(line.rfind(',') + 1), "1750") << line;
  std::ostringstream table;
  print_validation(table, report);
  // Forward: the 15 clocks 1700..1850 but 1730 (cell 3 launched nothing): median 1780, lowest 1700.
  EXPECT_NE(table.str().find("median 1780 MHz, lowest 1700 MHz"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("median 1980 MHz, lowest 1980 MHz"), std::string::npos) << table.str();
  EXPECT_EQ(table.str().find("calibrated at"), std::string::npos) << "the calibration recorded no clock";
  // A calibration that recorded its clock is set beside the cells' (the JSON's calibration block has it).
  ValidationReport calibrated = report;
  calibrated.calibration.sm_clock_mhz = 1972.0;
  std::ostringstream with_calibration;
  print_validation(with_calibration, calibrated);
  EXPECT_NE(with_calibration.str().find("calibrated at 1972 MHz"), std::string::npos) << with_calibration.str();
  EXPECT_EQ(validation_to_json(calibrated, nlohmann::json::object())["calibration"]["sm_clock_mhz"].get<double>(), 1972.0);
  // The forward's median 1780 MHz is 9.7% below 1972: noted; the backward's 1980 is not.
  EXPECT_NE(with_calibration.str().find("note: the forward's kernels ran at a median 1780 MHz, 9.7% below the 1972 MHz"),
            std::string::npos) << with_calibration.str();
  EXPECT_EQ(with_calibration.str().find("note: the backward's"), std::string::npos) << with_calibration.str();
  calibrated.calibration.sm_clock_mhz = 1830.0;  // within 3% of 1780: not noted
  std::ostringstream close_clock;
  print_validation(close_clock, calibrated);
  EXPECT_EQ(close_clock.str().find("note: the forward's"), std::string::npos) << close_clock.str();
  // Without clocks (an older record) neither JSON nor the table has them, and the CSV column is empty.
  const ValidationReport bare = compare_layer(problem, result, echo(result, 2, 1.0));
  EXPECT_FALSE(validation_to_json(bare, nlohmann::json::object())["forward"].contains("measured_sm_clock_mhz"));
  std::ostringstream bare_table;
  print_validation(bare_table, bare);
  EXPECT_EQ(bare_table.str().find("SM clock"), std::string::npos);
  std::istringstream bare_csv(validation_cells_csv(bare));
  std::getline(bare_csv, line);
  std::getline(bare_csv, line);
  EXPECT_EQ(line.back(), ',') << line;
  // A clock vector of the wrong size is refused.
  measured.backward.sm_clock_mhz.pop_back();
  EXPECT_THROW(compare_layer(problem, result, measured), InputError);
}

TEST(ValidationOutputs, CellsCsvRowsReproduceTheirPredictionFromTheirWork) {
  // Every row's predicted time is the cost model applied to the row's own work counts and key
  // blocks: the columns are exactly what the prediction rests on.
  const LoadedPlan loaded = plan_32k("striped", 4, true);
  const SimulationResult result = predict(loaded, &sample_trace());
  const ValidationProblem problem = make_validation_problem(loaded, &sample_trace(), 1, 0);
  const ValidationReport report = compare_layer(problem, result, echo(result, 1, 1.25));
  const AttentionCostModel cost = make_attention_cost_model(loaded.cluster.gpu_config, 64, 64, 128);
  std::istringstream csv(validation_cells_csv(report));
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line,
            "direction,position,step,block_q,block_k,head_dim,heads,kv_heads,chunk_tokens,lists,tiles,masked_tiles,"
            "columns,column_chunks,key_lists,column_lists,column_items,longest_key_list,key_blocks,measured_us,"
            "predicted_us,measured_sm_clock_mhz");
  int64_t rows = 0;
  int64_t backward_rows = 0;
  WorkCounts total;
  while (std::getline(csv, line)) {
    std::istringstream fields(line);
    std::string direction;
    std::getline(fields, direction, ',');
    std::vector<double> v;
    for (std::string field; std::getline(fields, field, ',');) v.push_back(std::stod(field));
    ASSERT_EQ(v.size(), 20U) << line;
    EXPECT_EQ(v[2], 64);   // block_q
    EXPECT_EQ(v[3], 64);   // block_k
    EXPECT_EQ(v[4], 128);  // head dim
    EXPECT_EQ(static_cast<int64_t>(v[5]), result.launch.heads);
    EXPECT_EQ(static_cast<int64_t>(v[6]), result.launch.kv_heads);
    EXPECT_EQ(v[7], 32768 / 4);
    v.erase(v.begin() + 2, v.begin() + 8);
    const WorkCounts work{.tiles = static_cast<int64_t>(v[3]), .masked_tiles = static_cast<int64_t>(v[4]),
                          .columns = static_cast<int64_t>(v[5]), .column_chunks = static_cast<int64_t>(v[6]),
                          .lists = static_cast<int64_t>(v[2]), .key_lists = static_cast<int64_t>(v[7]),
                          .column_lists = static_cast<int64_t>(v[8]), .column_items = static_cast<int64_t>(v[9]),
                          .longest_key_list = static_cast<int64_t>(v[10])};
    const bool backward = direction == "backward";
    ASSERT_TRUE(backward || direction == "forward") << line;
    // A segment holds at most one tile per (query head of the group, query block) and needs one.
    EXPECT_LE(work.longest_key_list, work.tiles) << line;
    EXPECT_EQ(work.longest_key_list > 0, work.key_lists > 0) << line;
    EXPECT_EQ(static_cast<int64_t>(v[11]), result.launch.key_blocks());
    const double predicted_us = ns_to_us(kernel_time_ns(backward ? cost.backward : cost.forward, work, result.launch));
    EXPECT_NEAR(v[13], predicted_us, 1e-6 * predicted_us + 1e-9) << line;
    EXPECT_NEAR(v[12], 1.25 * v[13], 1e-6 * v[12] + 1e-9) << line;
    if (!backward) total += work;
    backward_rows += backward ? 1 : 0;
    ++rows;
  }
  EXPECT_EQ(rows, 2 * 16);
  EXPECT_EQ(backward_rows, 16);
  EXPECT_GT(total.tiles, 0);
  EXPECT_GT(total.columns, 0);
  // A report without cell work (a simulation that kept no records of it) is refused, not written short.
  ValidationReport bare = report;
  bare.backward.cell_work.clear();
  EXPECT_THROW(validation_cells_csv(bare), InputError);
}

TEST(ValidationOutputs, AStaleCalibrationMakesTheComparisonNotMeaningful) {
  // A prediction from a calibration measured on an unrecorded kernel build.
  LoadedPlan loaded = plan_32k("zigzag", 2, true);
  loaded.cluster.gpu_config.calibration->kernel_build = "unknown";
  SimulationResult result = predict(loaded, &sample_trace());
  const ValidationProblem problem = make_validation_problem(loaded, &sample_trace(), 0, 0);
  ASSERT_TRUE(result.calibration.stale);
  const ValidationReport stale = compare_layer(problem, result, echo(result, 0, 1.0));
  EXPECT_FALSE(stale.comparison_meaningful);
  const nlohmann::json doc = validation_to_json(stale, nlohmann::json::object());
  EXPECT_EQ(doc["comparison_meaningful"], false);
  EXPECT_EQ(doc["calibration"]["stale"], true);
  EXPECT_EQ(doc["calibration"]["kernel_build"], "unknown");
  std::ostringstream table;
  print_validation(table, stale);
  EXPECT_NE(table.str().find("NOT MEANINGFUL: the prediction's calibration was measured on kernel build unknown"),
            std::string::npos)
      << table.str();
  EXPECT_NE(table.str().find("(not meaningful: stale calibration)"), std::string::npos);
  // The same prediction from a calibration of this build is a meaningful comparison.
  result.calibration.stale = false;
  const ValidationReport current = compare_layer(problem, result, echo(result, 0, 1.0));
  EXPECT_TRUE(current.comparison_meaningful);
  std::ostringstream current_table;
  print_validation(current_table, current);
  EXPECT_EQ(current_table.str().find("NOT MEANINGFUL"), std::string::npos);
  EXPECT_EQ(validation_to_json(current, nlohmann::json::object())["comparison_meaningful"], true);
}

TEST(ValidationJson, TheKernelBuildAValidationMeasured) {
  // A replay's own file: the build that ran it. Predicted again: the build its predicted_again
  // block names as measured, whatever build predicted it; none when that block names none.
  const auto doc = [](const std::string& text) { return nlohmann::json::parse(text); };
  EXPECT_EQ(measured_kernel_build(doc(R"({"calibration": {"this_kernel_build": "sha256:aa"}})")), "sha256:aa");
  EXPECT_EQ(measured_kernel_build(doc(R"({"calibration": {"this_kernel_build": "sha256:new"},
      "provenance": {"commit": "c1", "predicted_again": {"commit": "c2", "measured_kernel_build": "sha256:old"}}})")),
            "sha256:old");
  EXPECT_EQ(measured_kernel_build(doc(R"({"calibration": {"this_kernel_build": "sha256:new"},
      "provenance": {"predicted_again": {"commit": "c2"}}})")),
            std::nullopt);
  EXPECT_EQ(measured_kernel_build(doc(R"({"provenance": {"commit": "c1"}})")), std::nullopt);
  EXPECT_EQ(measured_kernel_build(doc(R"({"calibration": {"this_kernel_build": 7}})")), std::nullopt);
  EXPECT_EQ(measured_kernel_build(doc("[1, 2]")), std::nullopt);
}

}  // namespace
}  // namespace sparsering
