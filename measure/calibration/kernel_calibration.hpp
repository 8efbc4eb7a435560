// From raw kernel measurements to the fitted cost model, the step shared by `sparsering calibrate`
// and by anyone refitting recorded data (docs/calibration/*.csv): which launches are under-filled
// (kept out of the fit), the four-term fit of every kernel shape and direction with its in-sample
// and held-out error, its residuals by local length and GQA group, the GPU config entry it makes,
// and reading measurements back from CSV.
// Tested in tests/measure/calibration/kernel_calibration_test.cpp (including refits of the
// shipped H100 and H200 measurements that must reproduce configs/gpus/h100-sxm.yaml and h200.yaml).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "measure/calibration/calibration_records.hpp"
#include "measure/calibration/heldout_error.hpp"
#include "measure/calibration/kernel_fit.hpp"
#include "sim/config/gpu_config.hpp"

namespace sparsering {

/// True when a launch runs fewer than two full waves of CTAs on a GPU of `sm_count` SMs (2 CTAs
/// per SM): forward CTAs are one per list of a 64- or 128-query block (block_q / 128 per list for
/// multiples of 128), backward CTAs those of the key-block pass (KV heads x key blocks x
/// block_k / 64). Such launches are latency-bound, not throughput-bound. (The benchmark's lists
/// that meet a part of the key blocks keep at least 1024 CTAs with entries, benchmark_plan.hpp.)
bool launch_under_filled(const KernelMeasurement& m, int64_t sm_count);

/// The (K/V head, key block) pairs of a launch's K/V chunk (sim/cost/kernel_cost.hpp
/// LaunchGeometry): what the backward's key-block pass launches, listed or not.
int64_t launched_key_blocks(const KernelMeasurement& m);

/// True when a launch's key lists cover at least one but at most half of its chunk's key blocks
/// (key_block_stride > 1 in the benchmark): such launches separate a cost per launched key block
/// from the cost per key list.
bool lists_part_of_the_chunk(const KernelMeasurement& m);

/// Median signed residual (fit - measured) / measured of the launches sharing one value of a
/// benchmark dimension.
struct ResidualGroup {
  int64_t value = 0;
  int64_t samples = 0;
  double median_signed_error = 0.0;
};

/// The fit of one direction of one shape.
struct DirectionFit {
  KernelFit fit;                               ///< filled launches; coefficients rounded to 4 digits
  KernelFit under;                             ///< the same coefficients on the under-filled launches
  HeldOutError heldout;                        ///< k-fold by benchmark case, filled launches
  std::vector<ResidualGroup> by_local_tokens;  ///< fit residuals by local length, ascending
  std::vector<ResidualGroup> by_group;         ///< by query heads per KV head, ascending
  /// With replayed ring cells (replayed_cells.hpp) among the launches: how many replays, the weight
  /// of the benchmark grid chosen for them (fit_kernel_measurements), the coefficients on the cells
  /// alone, and each replay's cells predicted by a fit without that replay at the chosen weight
  /// (folds = replays): the selection's own criterion, so its minimum over kGridWeights; `heldout`
  /// is the held-out error of the whole procedure (each fold chooses its weight again).
  int64_t replays = 0;
  double grid_weight = 1.0;
  KernelFit replayed;
  HeldOutError replayed_heldout;
};

struct ShapeFit {
  KernelShape shape;
  DirectionFit forward;
  DirectionFit backward;
};

struct FitOptions {
  int64_t folds = 5;     ///< k of the held-out error
  uint64_t seed = 1;     ///< shuffles the benchmark cases into folds (the first dealing)
  int64_t sm_count = 0;  ///< SMs of the GPU measured: the backward's critical-path term (0: no such term)
  int64_t dealings = 5;  ///< times the cases are dealt into folds (heldout_error.hpp)
};

/// Entries by which a backward launch's heaviest key-block segment exceeds the per-SM share of its
/// tiles, as the simulator counts them (sim/cost/kernel_cost.hpp critical_entries; kernel_fit.hpp
/// KernelSample); 0 for a forward, a launch without a recorded longest segment, or sm_count < 1.
double critical_entries(const KernelMeasurement& m, int64_t sm_count);

/// The median SM clock of the benchmark's own launches (replayed cells left out), MHz: what a
/// calibration records as the clock it was measured at (GpuConfig calibration provenance
/// `sm_clock_mhz`). 0 when none of them recorded a clock (records written before the probe).
double benchmark_sm_clock_mhz(const std::vector<KernelMeasurement>& kernels);

/// The relative weights of the benchmark grid against replayed ring cells that a fit with replays
/// chooses from (fit_kernel_measurements).
inline constexpr double kGridWeights[] = {0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0};

/// The fit's weights of one shape and direction's filled launches when some are replayed ring
/// cells: every replay together weighs as much as the grid's launches divided by the replays (its
/// cells alike; with no grid launch, as one launch), and every grid launch `grid_weight`. Without
/// replayed cells every weight is 1.
std::vector<double> launch_weights(const std::vector<const KernelMeasurement*>& launches, double grid_weight);

/// Fits every kernel shape of `kernels` (in order of first appearance), both directions, on the
/// launches whose under_filled flag is false (and the backward's under-filled launches too when its
/// critical-path term is fitted, some launch has critical entries and two or more replays choose
/// the grid's weight: their time is their heaviest CTA's, which that term describes),
/// and fills every measurement's predicted_us. Where
/// replayed ring cells of two or more replays are among the launches, the grid's weight is the one
/// of kGridWeights whose fits, each without one replay, predict the left-out replays' cells best
/// (smallest median |error|, each replay weighing as much as any other; the smaller weight on a
/// tie): how much the synthetic grid should pull is decided by cells it was not fitted to, not
/// assumed. Every median |error| weighs each launch by its fit weight (launch_weights). The k-fold
/// held-out error, dealt options.dealings times, runs the whole procedure (weights and the choice
/// of the grid's weight) on each fold's training launches.
/// Throws InputError (naming shape and direction) when a direction has fewer filled launches
/// than the fit or the folds need.
std::vector<ShapeFit> fit_kernel_measurements(std::vector<KernelMeasurement>& kernels, const FitOptions& options = {});

/// The GPU config entry of `fit`: its coefficients, and fit statistics that are the worse of the
/// two directions (samples: both), rounded to 3 significant digits.
CalibratedShape calibrated_shape(const ShapeFit& fit);

/// Reads the CSV that kernel_measurements_csv writes (header row first, columns found by name).
/// Throws InputError naming `source_name`, the line and the column for a missing column or a bad value.
std::vector<KernelMeasurement> parse_kernel_measurements_csv(const std::string& text, std::string_view source_name);

/// The terms the fit of `launches` (one shape and direction) uses: the forward's units
/// (KernelTerms::forward_units: lists, tiles, 64-column items) when every forward launch records
/// its items, else the four terms; the backward's units
/// (KernelTerms::backward_units, with the per-column term when some launch has a partly filled
/// 64-column item, and the per-key-block term when some filled launch lists a part of its chunk,
/// lists_part_of_the_chunk) when every backward launch records them, else the four terms; with the
/// critical-path term when `sm_count` >= 1 and every backward launch records its longest key-block
/// segment.
KernelTerms fit_terms(const std::vector<KernelMeasurement>& launches, const std::string& direction,
                      int64_t sm_count = 0);

/// Fills the backward units (key_lists, column_lists, column_items, columns, longest_key_list) of
/// measurements that lack them (CSVs written before they were recorded) by rebuilding each case's synthetic index
/// (measure/calibration/synthetic_index.hpp) as the benchmark drew it: the rows in the
/// benchmark's order, forward then backward per case, case n with seed bench_seed + n (1 + n by
/// default, `calibrate` has no other) and the case's key block stride. Throws InputError when the
/// rows are not in that order or a rebuilt index does not have the recorded tiles, chunks and lists
/// (or the recorded units, where only the longest segment is missing). Replayed ring cells are
/// left as they are.
void restore_backward_units(std::vector<KernelMeasurement>& kernels, uint64_t bench_seed = 1);

}  // namespace sparsering
