// Least-squares fit of the kernel cost model of sim/cost/kernel_cost.hpp to measured launches:
//   forward:  time_us = launch_us + per_list_us x lists + per_tile_us x tiles + per_column_item_us x column_items
//             (per_vertical_chunk_us x column_chunks instead, for launches recorded without items)
//   backward: time_us = launch_us + per_key_list_us x key_lists + per_tile_us x tiles
//                       + per_column_list_us x column_lists + per_column_item_us x column_items
//                       (+ per_column_us x columns when the launches separate it from the items)
//                       (+ per_key_block_us x key blocks of the chunk when some launches list
//                          only a part of them)
//                       (+ per_critical_entry_us x critical entries when the launches record the
//                          longest key-block segment)
// (counts summed over every head of the launch; lists = non-empty (head, query block) lists: the
// forward's CTAs; the backward's units are those its two passes schedule, sim/work/work_counts.hpp,
// docs/calibration.md), with the residual
// report that `sparsering calibrate` prints and docs/calibration.md quotes. The fit minimises the
// squared relative error (each launch counts the same whether it takes 20 us or 20 ms), each
// times its sample's weight, and keeps every coefficient >= 0. Tested in tests/measure/calibration/kernel_fit_test.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/config/gpu_config.hpp"

namespace sparsering {

/// One measured launch (one direction).
struct KernelSample {
  int64_t tiles = 0;          ///< key tiles of the launch, all heads
  int64_t column_chunks = 0;  ///< gathered vertical chunks of the launch, all heads
  double time_us = 0.0;       ///< measured time (median of repeats), > 0
  int64_t lists = 0;          ///< non-empty (head, query block) lists of the launch
  int64_t key_lists = 0;      ///< non-empty (K/V head, key block) segments (backward key-block pass)
  int64_t column_lists = 0;   ///< lists with a column (backward column pass CTAs per 64 queries)
  int64_t column_items = 0;   ///< sum over lists of ceil(columns / 64) (forward items, backward column pass items)
  int64_t columns = 0;        ///< gathered columns, all lists
  int64_t key_blocks = 0;     ///< (K/V head, key block) pairs of the held chunk, listed or not (key-block pass grid)
  /// Entries by which the heaviest key-block segment exceeds the per-SM share of the tiles,
  /// max(0, longest - tiles / SMs): the critical path of the key-block pass, whose CTAs (one per
  /// segment, one per SM at a time) start longest first (sim/cost/kernel_cost.hpp).
  double critical_entries = 0.0;
  /// How much the sample's squared relative error counts in the fit (>= 0; 0: not fitted, only
  /// scored). The median |error| weighs each sample by this weight (weight 0: only in the largest
  /// error); R^2 counts every sample once.
  double weight = 1.0;
};

/// Which terms a fit may use (the launch term always).
struct KernelTerms {
  bool list = true;
  bool tile = true;
  bool chunk = true;
  bool key_list = false;
  bool column_list = false;
  bool column_item = false;
  bool column = false;
  bool key_block = false;
  bool critical = false;

  /// The forward's (and the earlier backward's) four terms.
  static KernelTerms four_terms() { return {}; }
  /// The forward's units (kernels/cuda/sparse_attn_fwd*.cu): lists, tiles and the 64-column items
  /// its CTAs gather columns in, whatever the key block (a block_k chunk of 128 columns is two
  /// items, a list of 70 columns two as well).
  static KernelTerms forward_units() { return {.list = true, .tile = true, .chunk = false, .column_item = true}; }
  /// The backward's units (kernels/cuda/sparse_attn_bwd.cu); `columns` adds the per-column term,
  /// which only launches with partly filled 64-column items separate from the items, and
  /// `key_blocks` the per-key-block term, which only launches whose key lists cover a part of the
  /// chunk's key blocks separate from the per-key-list one; `critical` adds the critical-path term
  /// (launches that record their longest key-block segment).
  static KernelTerms backward_units(bool columns, bool key_blocks = false, bool critical = false) {
    return {.list = false, .tile = true, .chunk = false, .key_list = true, .column_list = true, .column_item = true,
            .column = columns, .key_block = key_blocks, .critical = critical};
  }
};

/// The fitted coefficients and how well they reproduce the samples.
struct KernelFit {
  KernelCostCoefficients coefficients;
  int64_t samples = 0;
  double max_relative_error = 0.0;     ///< max |fit - measured| / measured
  double median_relative_error = 0.0;  ///< median of the same, each sample weighed as the fit weighs it
  double r_squared = 0.0;              ///< 1 - SS_res / SS_tot on the times (1 for a perfect fit)
  std::vector<double> relative_errors; ///< signed (fit - measured) / measured, one per sample
};

/// Time the model predicts for a launch of `lists`, `tiles` and `column_chunks` (microseconds,
/// not rounded).
double predict_kernel_us(const KernelCostCoefficients& c, int64_t lists, int64_t tiles, int64_t column_chunks);

/// Time the model predicts for `s` with every term of `c` (microseconds, not rounded).
double predict_kernel_us(const KernelCostCoefficients& c, const KernelSample& s);

/// Fits the coefficients of `terms` to `samples`. A term whose count is zero in every sample of
/// positive weight gets 0; a coefficient that would come out negative is pinned at 0 and the others refitted. Throws
/// InputError with fewer than 3 samples of positive weight, a non-positive or non-finite time,
/// negative counts or weight, or no weighted sample with a tile (per_tile_us must be > 0 for a GPU config).
KernelFit fit_kernel_cost(std::span<const KernelSample> samples, const KernelTerms& terms = KernelTerms::four_terms());

/// Residuals of `c` on `samples` (for the samples kept out of a fit), same fields as the fit.
KernelFit evaluate_kernel_cost(const KernelCostCoefficients& c, std::span<const KernelSample> samples);

/// `c` with every coefficient rounded to 4 significant digits, as GPU configs record them.
KernelCostCoefficients rounded_coefficients(const KernelCostCoefficients& c);

/// Median and largest of |values| (0 and 0 when empty).
std::pair<double, double> median_and_max_magnitude(std::span<const double> values);
/// The weighted median of |values| (common/median.hpp weighted_median) and the largest |value|
/// whatever its weight. InputError when the sizes differ.
std::pair<double, double> median_and_max_magnitude(std::span<const double> values, std::span<const double> weights);

}  // namespace sparsering
