// Kernel cost model: the time of one sparse-attention kernel launch (one rank, one ring step, all
// heads of the launch), forward and backward:
//   time = launch + per_list x lists + per_tile x tiles + per_vertical_chunk x chunks + per_head x heads
//          + per_key_list x key lists + per_column_list x column lists + per_column_item x column items
//          + per_column x columns + per_key_block x key blocks of the chunk
//          + per_critical_entry x max(0, longest key list - tiles / SMs),
// (lists: non-empty (head, query block) lists; key lists, column lists and items: the backward's
// units, sim/work/work_counts.hpp; key blocks of the chunk: every (K/V head, key block) pair of the
// held K/V chunk, listed or not, a pure function of the launch's shape (LaunchGeometry), since the
// backward's key-block pass launches its CTAs for all of them; the last term is that pass's critical
// path: its CTAs, one per segment and one per SM at a time, start longest first, so the heaviest
// segment outlasts the others when it holds more than the per-SM share of the tiles, and the
// entries beyond that share cost what the calibration measured; a calibration lists the terms of
// each direction's kernel, the others cost 0) with the coefficients of
// the GPU config's `calibration:` section (fitted on real GPUs) when present, else a roofline
// estimate that every output marks "uncalibrated". A launch with no tile and no chunk is skipped
// (costs 0). Also the dense GEMM cost (projections, MLP) at a calibrated
// or assumed efficiency, and the time of building one layer's sparse index on one rank.
// Tested in tests/sim/cost_model_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/config/gpu_config.hpp"
#include "sim/cost/calibration_status.hpp"
#include "sim/core/sim_time.hpp"
#include "sim/work/work_counts.hpp"

namespace sparsering {

/// Coefficients of one direction (microseconds).
struct KernelCoefficients {
  double launch_us = 0.0;
  double per_list_us = 0.0;  ///< per non-empty (head, query block) list
  double per_tile_us = 0.0;
  double per_vertical_chunk_us = 0.0;
  double per_head_us = 0.0;
  double per_key_list_us = 0.0;     ///< per non-empty (K/V head, key block) segment (backward key-block pass)
  double per_column_list_us = 0.0;  ///< per list with a column (backward column pass CTAs)
  double per_column_item_us = 0.0;  ///< per 64 gathered columns of a list (forward items, backward column pass items)
  double per_column_us = 0.0;       ///< per gathered column (backward column pass: dK/dV atomics)
  double per_key_block_us = 0.0;    ///< per (K/V head, key block) of the held chunk, listed or not (LaunchGeometry)
  double per_critical_entry_us = 0.0;  ///< per entry of the longest key list beyond tiles / sm_count
  int64_t sm_count = 0;             ///< SMs the key-block CTAs share (the GPU's; >= 1 when the term above is > 0)
};

/// The shape of one launch, which sets the kernels' grids whatever its work: the backward's
/// key-block pass launches block_k / 64 CTAs for every (K/V head, key block) of the held chunk and
/// its index transposition scans them, listed or not (kernels/cuda/sparse_attn_bwd.cu).
struct LaunchGeometry {
  int64_t heads = 0;         ///< query heads x micro batch
  int64_t kv_heads = 0;      ///< K/V heads x micro batch
  int64_t chunk_tokens = 0;  ///< tokens of the held K/V chunk
  int64_t block_k = 1;       ///< key block (tokens)

  /// kv_heads x ceil(chunk_tokens / block_k): the (K/V head, key block) pairs of the chunk.
  /// Throws InputError for negative sizes or block_k < 1.
  int64_t key_blocks() const;
};

/// Assumptions of the roofline fallback (documented in docs/simulator.md).
struct RooflineAssumptions {
  double attention_efficiency = 0.4;    ///< achieved / peak bf16 rate on kept tiles
  double gather_slowdown = 2.0;         ///< a gathered vertical chunk costs this many tiles
  double backward_flop_ratio = 2.5;     ///< backward FLOPs / forward FLOPs (docs/algorithm.md section 3)
  double launch_us = 10.0;              ///< fixed cost per launch
  double gemm_efficiency = 0.6;         ///< dense GEMMs without a calibration
  /// Index preparation of one layer on one rank (docs/simulator.md section 2), three parts, each
  /// launch + per head-ktoken x query heads x tokens / 1024. Defaults: the H200 measurements in
  /// docs/PERF.md ("Index preparation: estimation by staged diagonals": 16 query heads, head dim
  /// 128, 128K and 256K tokens).
  ///  - estimation's two passes over the rank's keys, for last_q queries (scaled by the number of
  ///    64-query tiles, ceil(last_q / 64): the kernels work in whole tiles);
  double estimate_launch_us = 40.0;
  double estimate_per_head_ktoken_us = 0.162;
  ///  - the recall selection over the sequence's masses (every rank selects from all N entries);
  double select_launch_us = 44.0;
  double select_per_head_ktoken_us = 0.0137;
  ///  - the index build (every ring step's tile and column lists) over the local query tokens, at
  ///    128 x 128 blocks, scaled by 128 / sqrt(block_q x block_k) (smaller blocks, more lists).
  double index_build_launch_us = 20.0;
  double index_build_per_head_ktoken_us = 0.1006;
};

/// The attention kernel cost model for one (GPU, block shape, head dim).
struct AttentionCostModel {
  KernelCoefficients forward;
  KernelCoefficients backward;
  bool calibrated = false;
  std::string source;               ///< "calibration (<gpu>, <date>)", "published figures (<gpu>)" or "roofline (uncalibrated)"
  std::vector<std::string> notes;   ///< uncalibrated, stale, published, extrapolated
  CalibrationStatus calibration;    ///< source, kernel build comparison, shape used
};

/// Builds the model. A calibration's coefficients are those of the exact (block_q, block_k,
/// head_dim) shape when it lists that shape. Otherwise the model is marked extrapolated
/// (calibration.extrapolated, and a note): it takes the nearest calibrated shape (same head dim
/// first, then the smallest |log2| distance of the three sizes, then the first listed) and scales
/// its per-tile and per-chunk costs by the ratio of tile FLOPs (block_q x block_k x head_dim), its
/// per-list cost by the ratio of query block x head dim (the Q block loaded and the output merged
/// per list; also the per-column-list cost), its per-key-list cost by key block x head dim, its
/// per-column-item and per-column costs by head dim, its per-key-block cost by key block (the
/// 64-key CTAs launched per key block), its per-critical-entry cost by tile FLOPs (an entry is a
/// tile of the heaviest CTA), and keeps its launch cost. A measured calibration from
/// another kernel build than this one (core/kernel_build.hpp) is marked stale, a published one
/// says so (calibration_notes).
/// Roofline: a tile costs 4 x block_q x block_k x head_dim FLOPs forward (Q K^T and P V) at
/// peak x attention_efficiency; backward_flop_ratio times that backward; a chunk costs
/// gather_slowdown tiles; a list costs nothing (no evidence for a figure). Throws InputError for
/// non-positive sizes, a GPU without a peak rate, or a critical-path cost on a GPU without sm_count.
AttentionCostModel make_attention_cost_model(const GpuConfig& gpu, int64_t block_q, int64_t block_k, int64_t head_dim,
                                             const RooflineAssumptions& assumptions = {});

/// Time of one launch doing `work` (work.lists lists, work.tiles tiles, work.column_chunks chunks,
/// the backward's units) on a launch of shape `launch` with `c` (rounded once). 0 if no work.
SimNs kernel_time_ns(const KernelCoefficients& c, const WorkCounts& work, const LaunchGeometry& launch);

/// Entries of a backward launch's longest key list beyond the per-SM share of its tiles,
/// max(0, longest_key_list - tiles / sm_count); 0 for sm_count < 1. The critical-path term's count,
/// one formula for the simulator's timer and the calibration's fit.
inline double critical_entries(int64_t longest_key_list, int64_t tiles, int64_t sm_count) {
  if (sm_count < 1) return 0.0;
  const double excess =
      static_cast<double>(longest_key_list) - static_cast<double>(tiles) / static_cast<double>(sm_count);
  return excess > 0.0 ? excess : 0.0;
}

/// kernel_time_ns with the coefficients and the launch fixed, for loops over the cells of a ring:
/// the launch's terms are converted once and the sum is inline. The same arithmetic in the same
/// order, so the same nanoseconds as kernel_time_ns.
class KernelTimer {
 public:
  /// Throws InputError for an invalid launch (LaunchGeometry::key_blocks).
  KernelTimer(const KernelCoefficients& c, const LaunchGeometry& launch)
      : c_(c), heads_(static_cast<double>(launch.heads)), key_blocks_(static_cast<double>(launch.key_blocks())) {}

  SimNs operator()(const WorkCounts& work) const {
    if (work.tiles == 0 && work.column_chunks == 0) return 0;
    return ns_from_us(c_.launch_us + c_.per_list_us * static_cast<double>(work.lists) +
                      c_.per_tile_us * static_cast<double>(work.tiles) +
                      c_.per_vertical_chunk_us * static_cast<double>(work.column_chunks) + c_.per_head_us * heads_ +
                      c_.per_key_list_us * static_cast<double>(work.key_lists) +
                      c_.per_column_list_us * static_cast<double>(work.column_lists) +
                      c_.per_column_item_us * static_cast<double>(work.column_items) +
                      c_.per_column_us * static_cast<double>(work.columns) + c_.per_key_block_us * key_blocks_ +
                      c_.per_critical_entry_us * critical_entries(work));
  }

  /// The launch's critical entries (sparsering::critical_entries; 0 when the term costs nothing).
  double critical_entries(const WorkCounts& work) const {
    if (c_.per_critical_entry_us == 0.0) return 0.0;
    return sparsering::critical_entries(work.longest_key_list, work.tiles, c_.sm_count);
  }

 private:
  KernelCoefficients c_;
  double heads_;
  double key_blocks_;
};

/// The same for `heads` heads without the launch's K/V geometry: the per-key-block term is left
/// out, so this is a lower bound of the full model (what bounds that do not know the chunk use).
SimNs kernel_time_ns(const KernelCoefficients& c, const WorkCounts& work, int64_t heads);

/// Time of the pattern estimation of one layer on one rank for `heads` query heads (x micro
/// batch): both passes over `local_tokens` keys for `last_q` queries, then the recall selection
/// over `seq_tokens` entries, from the assumptions' estimate and select terms (rounded once).
/// Throws InputError for negative sizes or coefficients.
SimNs estimate_time_ns(const RooflineAssumptions& assumptions, int64_t heads, int64_t local_tokens,
                       int64_t seq_tokens, int64_t last_q);

/// Time of building one layer's sparse index on one rank for `heads` query heads (x micro batch)
/// over `local_tokens` query tokens at block_q x block_k, from the assumptions' index build terms
/// (rounded once). Throws InputError for negative sizes or coefficients, or blocks < 1.
SimNs index_build_time_ns(const RooflineAssumptions& assumptions, int64_t heads, int64_t local_tokens,
                          int64_t block_q, int64_t block_k);

/// Dense GEMM model: effective rate = peak x efficiency.
struct GemmCostModel {
  double effective_tflops = 0.0;
  bool calibrated = false;
};

/// GEMM efficiency from the calibration (gemm_efficiency > 0) or the assumption.
GemmCostModel make_gemm_cost_model(const GpuConfig& gpu, const RooflineAssumptions& assumptions = {});

/// Time of `flops` floating-point operations at the model's rate (rounded once).
SimNs gemm_time_ns(const GemmCostModel& model, double flops);

}  // namespace sparsering
