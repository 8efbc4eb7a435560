// The measured-vs-predicted comparison (see validation_compare.hpp).
#include "measure/validation/validation_compare.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "common/median.hpp"
#include "measure/validation/ring_rederive.hpp"

namespace sparsering {
namespace {

size_t cell(int32_t p, int32_t t, int32_t w) {
  return static_cast<size_t>(p) * static_cast<size_t>(w) + static_cast<size_t>(t);
}

/// Per step, the slowest position's step time of a run (compute end minus the previous end).
std::vector<double> step_times_us(const RingRun& run) {
  const int32_t w = run.ranks;
  std::vector<double> out(static_cast<size_t>(w), 0.0);
  for (int32_t p = 0; p < w; ++p) {
    for (int32_t t = 0; t < w; ++t) {
      const SimNs previous = t == 0 ? 0 : run.at(p, t - 1).compute_end_ns;
      out[static_cast<size_t>(t)] = std::max(out[static_cast<size_t>(t)], ns_to_us(run.at(p, t).compute_end_ns - previous));
    }
  }
  return out;
}

/// Per step, the slowest delivery of the step's chunk (0 at step 0).
std::vector<double> comm_times_us(const RingRun& run) {
  const int32_t w = run.ranks;
  std::vector<double> out(static_cast<size_t>(w), 0.0);
  for (int32_t p = 0; p < w; ++p) {
    for (int32_t t = 1; t < w; ++t) {
      const RingStepRecord& r = run.at(p, t);
      out[static_cast<size_t>(t)] = std::max(out[static_cast<size_t>(t)], ns_to_us(r.recv_end_ns - r.recv_start_ns));
    }
  }
  return out;
}

/// The slowest position's total wait for K/V at steps >= 1.
double exposed_comm_ms(const RingRun& run) {
  SimNs worst = 0;
  for (int32_t p = 0; p < run.ranks; ++p) {
    SimNs sum = 0;
    for (int32_t t = 1; t < run.ranks; ++t) sum += run.at(p, t).wait_ns;
    worst = std::max(worst, sum);
  }
  return ns_to_ms(worst);
}

/// Per step, the slowest position of a measured [p x W + t] vector.
std::vector<double> per_step_max(const std::vector<double>& values, int32_t w) {
  std::vector<double> out(static_cast<size_t>(w), 0.0);
  for (int32_t p = 0; p < w; ++p) {
    for (int32_t t = 0; t < w; ++t) {
      out[static_cast<size_t>(t)] = std::max(out[static_cast<size_t>(t)], values[cell(p, t, w)]);
    }
  }
  return out;
}

PassComparison compare_pass(const RingSchedule& schedule, const RingPassResult& pass, const MeasuredPass& measured,
                            bool replay, bool backward, AccumulatorRoute route) {
  const int32_t w = schedule.ranks();
  const auto cells = static_cast<size_t>(w) * static_cast<size_t>(w);
  require(pass.compute_ns.size() == cells, "the simulation kept ", pass.compute_ns.size(),
          " compute cells for a ring of ", w);
  require(measured.compute_us.size() == cells, "the measurement has ", measured.compute_us.size(),
          " compute cells, a ring of ", w, " needs ", cells);
  PassComparison out;
  out.backward = backward;
  out.predicted_compute_us.reserve(cells);
  for (SimNs ns : pass.compute_ns) out.predicted_compute_us.push_back(ns_to_us(ns));
  out.measured_compute_us = measured.compute_us;
  require(measured.sm_clock_mhz.empty() || measured.sm_clock_mhz.size() == cells, "the measurement has ",
          measured.sm_clock_mhz.size(), " clock cells, a ring of ", w, " needs ", cells);
  out.measured_sm_clock_mhz = measured.sm_clock_mhz;
  require(pass.cell_work.empty() || pass.cell_work.size() == cells, "the simulation kept ", pass.cell_work.size(),
          " cell work counts for a ring of ", w);
  out.cell_work = pass.cell_work;
  out.compute_error = summarize_errors(out.measured_compute_us, out.predicted_compute_us);
  out.predicted_step_us = step_times_us(pass.run);
  out.predicted_comm_us = comm_times_us(pass.run);
  out.predicted_ms = ns_to_ms(pass.run.end_ns);
  out.predicted_exposed_comm_ms = exposed_comm_ms(pass.run);
  if (replay) {
    std::vector<SimNs> compute(cells);
    for (size_t k = 0; k < cells; ++k) compute[k] = ns_from_us(measured.compute_us[k]);
    out.derived_run = resimulate_ring(schedule, pass.run, backward, route, std::move(compute));
    out.measured_ms = ns_to_ms(out.derived_run.end_ns);
    out.measured_exposed_comm_ms = exposed_comm_ms(out.derived_run);
  } else {
    out.measured_ms = measured.wall_ms;
    out.measured_exposed_comm_ms = measured.exposed_comm_ms;
    if (measured.step_us.size() == cells) out.measured_step_us = per_step_max(measured.step_us, w);
    if (measured.comm_us.size() == cells) out.measured_comm_us = per_step_max(measured.comm_us, w);
    if (measured.step_us.size() == cells && measured.comm_us.size() == cells) {
      for (int32_t t = 1; t < w; ++t) {
        double ratio = 0.0;
        for (int32_t p = 0; p < w; ++p) {
          const size_t k = cell(p, t, w);
          const double bound = std::max(measured.compute_us[k], measured.comm_us[k]);
          if (bound > 0.0) ratio = std::max(ratio, measured.step_us[k] / bound);
        }
        out.step_overlap_ratio.push_back(ratio);
      }
    }
  }
  out.error = relative_error(out.measured_ms, out.predicted_ms);
  return out;
}

}  // namespace

double relative_error(double measured, double predicted) {
  if (measured == 0.0) return predicted == 0.0 ? 0.0 : 1.0;
  return (predicted - measured) / measured;
}

ErrorSummary summarize_errors(std::span<const double> measured, std::span<const double> predicted) {
  require(measured.size() == predicted.size(), "measured has ", measured.size(), " cells, predicted ",
          predicted.size());
  ErrorSummary summary;
  std::vector<double> magnitudes;
  double sum = 0.0;
  for (size_t k = 0; k < measured.size(); ++k) {
    require(std::isfinite(measured[k]) && measured[k] >= 0.0, "measured cell ", k, " is ", measured[k]);
    require(std::isfinite(predicted[k]) && predicted[k] >= 0.0, "predicted cell ", k, " is ", predicted[k]);
    if (measured[k] == 0.0 && predicted[k] == 0.0) continue;
    const double e = relative_error(measured[k], predicted[k]);
    magnitudes.push_back(std::fabs(e));
    sum += e;
    if (std::fabs(e) > summary.worst_abs || summary.count == 0) {
      summary.worst_abs = std::fabs(e);
      summary.worst_signed = e;
    }
    ++summary.count;
  }
  if (summary.count > 0) summary.mean_signed = sum / static_cast<double>(summary.count);
  summary.median_abs = median(std::move(magnitudes));
  return summary;
}

std::pair<const RingPassResult*, const RingPassResult*> find_layer_passes(const SimulationResult& result,
                                                                          int64_t layer) {
  int32_t ring_class = -1;
  for (size_t c = 0; c < result.ring_classes.size(); ++c) {
    const auto& rings = result.ring_classes[c].rings;
    if (std::find(rings.begin(), rings.end(), int64_t{0}) != rings.end()) ring_class = static_cast<int32_t>(c);
  }
  const RingPassResult* forward = nullptr;
  const RingPassResult* backward = nullptr;
  for (const RingPassResult& pass : result.rings) {
    if (pass.layer != layer || pass.ring_class != ring_class) continue;
    (pass.backward ? backward : forward) = &pass;
  }
  require(forward != nullptr && backward != nullptr, "the simulation kept no ring records of layer ", layer,
          " (simulate with keep_ring_records)");
  return {forward, backward};
}

ValidationReport compare_layer(const ValidationProblem& problem, const SimulationResult& predicted,
                               const MeasuredLayer& measured, AccumulatorRoute route) {
  require(measured.ranks == problem.ranks(), "the measurement has ", measured.ranks, " ring positions, the plan ",
          problem.ranks());
  require(measured.mode == "replay" || measured.mode == "ring", "unknown measurement mode '", measured.mode, "'");
  const RingSchedule schedule(problem.level_sizes);
  const auto [forward, backward] = find_layer_passes(predicted, problem.layer);
  const bool replay = measured.mode == "replay";

  ValidationReport report;
  report.mode = measured.mode;
  report.plan_name = problem.plan_name;
  report.description = describe(problem);
  report.layout = predicted.layout;
  report.dense = problem.dense;
  report.seq_len_tokens = problem.layout.seq_len_tokens();
  report.ranks = problem.ranks();
  report.level_sizes = problem.level_sizes;
  report.layer = problem.layer;
  report.sample = problem.sample;
  report.iterations = measured.iterations;
  report.cost_source = predicted.cost_source;
  report.calibration = predicted.calibration;
  report.comparison_meaningful = !predicted.calibration.stale;
  for (const LayerResult& layer : predicted.layers) {
    if (layer.layer == problem.layer) report.predicted_work = layer.work;
  }
  report.measured_tiles = measured.tiles;
  report.measured_column_chunks = measured.column_chunks;
  report.launch = predicted.launch;
  report.block_q = problem.block_q;
  report.head_dim = problem.shape.head_dim;
  report.forward = compare_pass(schedule, *forward, measured.forward, replay, false, route);
  report.backward = compare_pass(schedule, *backward, measured.backward, replay, true, route);
  report.layer_time_met = std::fabs(report.forward.error) <= kLayerTimeWorstTarget &&
                          std::fabs(report.backward.error) <= kLayerTimeWorstTarget;
  report.cell_time_met = report.forward.compute_error.median_abs <= kCellTimeMedianTarget &&
                         report.backward.compute_error.median_abs <= kCellTimeMedianTarget;
  bool overlap = !replay && !report.forward.step_overlap_ratio.empty();
  for (const PassComparison* pass : {&report.forward, &report.backward}) {
    for (double ratio : pass->step_overlap_ratio) overlap = overlap && ratio <= kStepOverlapTarget;
  }
  report.step_overlap_met = overlap;
  return report;
}

}  // namespace sparsering
