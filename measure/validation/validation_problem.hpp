// The attention problem that `sparsering validate` runs for one layer of a plan: the ring (size,
// hierarchy, token layout), the per-rank tensor shape after head parallelism (the query heads of
// head group 0 and their K/V heads, times the micro batch), the block shape, and the kept
// vertical-slash sets of every index row at the plan's recall (from one trace sample), or dense.
// It is exactly what the simulator counts for that layer and head group, so measured and
// predicted figures describe the same work. Tested in tests/measure/validation/validation_compare_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attention_params.hpp"
#include "kernels/index/row_pattern.hpp"
#include "sim/config/plan_config.hpp"
#include "traces/trace.hpp"

namespace sparsering {

/// One layer of a plan, as one context-parallel ring runs it.
struct ValidationProblem {
  std::string plan_name;
  int64_t layer = 0;                 ///< model layer whose patterns are used
  int64_t sample = 0;                ///< trace sample
  int64_t head_group = 0;            ///< Ulysses head group the ring serves (always 0)
  bool dense = false;                ///< every causal pair (no trace)
  TokenLayout layout;                ///< over the ring's W positions
  std::vector<int64_t> level_sizes;  ///< ring hierarchy inner -> outer (product = W)
  AttentionShape shape;              ///< per rank: batch = micro batch, heads of the group, local length
  int32_t block_q = 64;              ///< query block (tokens)
  int32_t block_k = 64;              ///< key tile (tokens)
  float softmax_scale = 0.0f;        ///< 1 / sqrt(head_dim)
  /// Kept sets of every index row (row = batch b x q_heads + local head h), global coordinates;
  /// empty when dense.
  std::vector<RowPattern> rows;

  /// Ring size W.
  int32_t ranks() const { return layout.ranks(); }
  /// Index rows: batch x local query heads.
  int32_t row_count() const { return shape.batch * shape.q_heads; }
};

/// Builds the problem of `layer` of a loaded plan. `trace` is required when the plan is sparse
/// (its sample `sample` at the plan's recall and caps gives the kept sets of the query heads of
/// head group 0) and ignored when dense. Throws InputError naming the value when the layer or
/// sample does not exist, the trace does not match the model or the plan's length, or the local
/// head counts are not a valid GQA shape.
ValidationProblem make_validation_problem(const LoadedPlan& loaded, const Trace* trace, int64_t layer, int64_t sample);

/// Kept sets padded to a common capacity, as the GPU index build takes them (rows x capacity,
/// ascending and unique per row, -1 pads). Dense problems keep every offset 0 .. N-1.
struct PaddedKeptSets {
  int32_t rows = 0;
  int32_t capacity = 1;
  std::vector<int32_t> vertical_count;  ///< (rows)
  std::vector<int32_t> vertical_keys;   ///< (rows x capacity)
  std::vector<int32_t> slash_count;     ///< (rows)
  std::vector<int32_t> slash_offsets;   ///< (rows x capacity)
};

/// The problem's kept sets in padded form (sorted, deduplicated; offset 0 kept when present).
/// Throws InputError when a value does not fit 32 bits.
PaddedKeptSets pad_kept_sets(const ValidationProblem& problem);

/// A one-line description, e.g. "W=8 zigzag, levels 8, dense, 16 heads x 16384 tokens".
std::string describe(const ValidationProblem& problem);

}  // namespace sparsering

namespace sparsering {

/// The plan with its context-parallel ring resized to `ranks` positions for a replay at another
/// scale: the data-parallel degree absorbs the change so the world (and so the cluster) is
/// unchanged; the innermost ring level is kept when its size divides `ranks` (an outer level of
/// ranks / inner with the plan's outermost link), else the ring is flat over the outermost link;
/// the ring order becomes the identity and the token layout is remade for `ranks`. Throws
/// InputError when `ranks` < 1 or the world is not a multiple of ranks x head_parallel, or the
/// layout does not divide.
PlanConfig with_ring_size(const PlanConfig& plan, int64_t ranks);

}  // namespace sparsering
