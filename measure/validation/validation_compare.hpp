// The side-by-side comparison of `sparsering validate`: the simulator's prediction of one layer
// (per ring position and step, forward and backward) against what was measured, with relative
// errors (median and worst) and the validation targets (docs/VALIDATION.md). For a replay, the
// measured compute matrix is also run through the simulator's own ring schedule
// (ring_rederive.hpp), so the per-layer attention time derived from measurements is compared
// with the one the simulator predicts from its cost model. Tested in
// tests/measure/validation/validation_compare_test.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "measure/validation/measured_layer.hpp"
#include "measure/validation/validation_problem.hpp"
#include "sim/ring/ring_simulation.hpp"
#include "sim/step/simulation.hpp"
#include "sim/work/work_counts.hpp"

namespace sparsering {

/// Target bounds (docs/VALIDATION.md).
inline constexpr double kLayerTimeMedianTarget = 0.03;  ///< median |error| of per-layer attention time
inline constexpr double kLayerTimeWorstTarget = 0.06;   ///< worst |error| of per-layer attention time
inline constexpr double kCellTimeMedianTarget = 0.05;   ///< median |error| of (rank, step) kernel times
inline constexpr double kStepOverlapTarget = 1.10;      ///< measured step / max(compute, comm)

/// Relative errors (predicted - measured) / measured over matched cells.
struct ErrorSummary {
  int64_t count = 0;           ///< cells compared (cells where both are 0 are skipped)
  double median_abs = 0.0;     ///< median of |error|
  double worst_abs = 0.0;      ///< largest |error|
  double worst_signed = 0.0;   ///< the error of that cell, with its sign (> 0: predicted too slow)
  double mean_signed = 0.0;    ///< mean error (bias)
};

/// Summarises relative errors cell by cell. Cells where both values are 0 are skipped; a cell
/// measured 0 but predicted > 0 counts as error +1 (the whole prediction is spurious).
/// Throws InputError when the sizes differ or a value is negative or not finite.
ErrorSummary summarize_errors(std::span<const double> measured, std::span<const double> predicted);

/// Relative error (predicted - measured) / measured; 0 when both are 0, +1 when only measured is 0.
double relative_error(double measured, double predicted);

/// One direction of the layer, compared.
struct PassComparison {
  bool backward = false;
  std::vector<double> predicted_compute_us;  ///< [p x W + t]
  std::vector<double> measured_compute_us;   ///< [p x W + t]
  std::vector<double> measured_sm_clock_mhz; ///< [p x W + t], the clock each cell ran at (replays; empty if not measured)
  std::vector<WorkCounts> cell_work;         ///< [p x W + t]: the work the prediction costed (empty if not kept)
  ErrorSummary compute_error;                ///< cell by cell
  std::vector<double> predicted_step_us;     ///< per step: slowest position's step time
  std::vector<double> measured_step_us;      ///< per step (ring runs; empty for a replay)
  std::vector<double> predicted_comm_us;     ///< per step: slowest delivery of the step's chunk
  std::vector<double> measured_comm_us;      ///< per step (ring runs)
  std::vector<double> step_overlap_ratio;    ///< per step >= 1 (ring runs): measured step / max(compute, comm)
  double predicted_ms = 0.0;                 ///< the simulator's attention time of the layer (its cost model)
  double measured_ms = 0.0;                  ///< ring: measured wall; replay: the simulator's schedule over the measured matrix
  double error = 0.0;                        ///< relative_error(measured_ms, predicted_ms)
  double predicted_exposed_comm_ms = 0.0;    ///< slowest position's wait for K/V (steps >= 1)
  double measured_exposed_comm_ms = 0.0;     ///< ring: measured; replay: from the re-derived schedule
  RingRun derived_run;                       ///< replay: the schedule re-run with the measured matrix
};

/// A validated layer.
struct ValidationReport {
  std::string mode;               ///< "replay" or "ring"
  std::string plan_name;
  std::string description;        ///< describe(problem)
  std::string layout;             ///< "zigzag", "striped G=64", ...
  bool dense = false;
  int64_t seq_len_tokens = 0;
  int32_t ranks = 0;
  std::vector<int64_t> level_sizes;
  int64_t layer = 0;
  int64_t sample = 0;
  int32_t iterations = 0;
  std::string cost_source;        ///< the simulator's kernel cost source (calibration or roofline)
  CalibrationStatus calibration;  ///< the prediction's calibration: source, kernel builds, shape used
  /// False when the prediction's calibration was measured on another kernel build than the one
  /// measured here (stale): its error then says nothing about the model.
  bool comparison_meaningful = true;
  /// The simulator's work of the layer: every head group (and micro batch), every rank and step.
  WorkCounts predicted_work;
  /// The work of the indexes the measurement ran: head group 0's ring only, so with head
  /// parallelism above 1 they are a part of predicted_work's.
  int64_t measured_tiles = 0;
  int64_t measured_column_chunks = 0;
  LaunchGeometry launch;          ///< the shape of every cell's launch (sets its key blocks)
  int32_t block_q = 0;            ///< the kernels' block shape and head dim (cells.csv)
  int32_t head_dim = 0;
  PassComparison forward;
  PassComparison backward;
  bool layer_time_met = false;    ///< both |errors| <= kLayerTimeWorstTarget
  bool cell_time_met = false;     ///< forward and backward cells' median |error| <= kCellTimeMedianTarget
  bool step_overlap_met = false;  ///< ring runs: every step ratio <= kStepOverlapTarget
};

/// The simulated passes of head group 0's ring in `layer` (forward, backward). Throws
/// InputError when the result kept no ring records for it.
std::pair<const RingPassResult*, const RingPassResult*> find_layer_passes(const SimulationResult& result, int64_t layer);

/// Compares `measured` with `predicted` for `problem`'s layer. `route` must be the one the
/// simulation used. Throws InputError when sizes disagree (ranks, matrix cells).
ValidationReport compare_layer(const ValidationProblem& problem, const SimulationResult& predicted,
                               const MeasuredLayer& measured, AccumulatorRoute route = AccumulatorRoute::mirror);

}  // namespace sparsering
