// Work matrices of a whole model for one geometry: per layer and per head group (head_parallel
// groups of consecutive query heads, each handled by its own ring), the sum over the group's heads
// of each head's work matrix (sim/work/work_counter.hpp), times the micro batch. Ring-order and
// hierarchy independent: ranks are ring positions (layout ranks), so one WorkSet serves every ring
// order and every hierarchy split of the same (layout, degree, granularity, block sizes).
// Tested in tests/sim/work_set_test.cpp (also that threads change nothing).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/work/block_geometry.hpp"
#include "sim/work/pattern_set.hpp"
#include "sim/work/work_counter.hpp"
#include "sim/work/work_counts.hpp"

namespace sparsering {

struct WorkSet {
  int64_t layers = 0;
  int64_t head_groups = 1;
  int64_t heads_per_group = 0;
  int64_t micro_batch = 1;
  std::vector<WorkMatrix> matrices;  ///< (layers x head_groups), layer-major

  const WorkMatrix& at(int64_t layer, int64_t group) const {
    return matrices[static_cast<size_t>(layer * head_groups + group)];
  }
  WorkMatrix& at(int64_t layer, int64_t group) { return matrices[static_cast<size_t>(layer * head_groups + group)]; }
};

/// Counts every layer and head group. `head_groups` must divide the pattern set's heads. Each
/// matrix is multiplied by `micro_batch` (every sequence of a micro batch has the pattern).
/// Dense pattern sets are counted once and scaled by the heads of a group.
WorkSet count_work_set(const BlockGeometry& geometry, const PatternSet& patterns, int64_t head_groups,
                       int64_t micro_batch);

/// The same on up to `threads` threads (>= 1), which take layers in turn, each with its own
/// counter. The result does not depend on `threads`. An InputError of any layer is rethrown.
/// Without `kv_group` the heads are grouped by `patterns.kv_group` for WorkCounts::key_lists
/// and longest_key_list.
WorkSet count_work_set(const BlockGeometry& geometry, const PatternSet& patterns, int64_t head_groups,
                       int64_t micro_batch, int threads);

/// The same with the model's GQA grouping: `kv_group` query heads share one K/V head (query head
/// h uses K/V head h / kv_group, as the kernels group them), so key_lists counts the (K/V head,
/// key block) pairs of each such group once and longest_key_list sums the group's tiles per key
/// block. `kv_group` must divide the query heads.
WorkSet count_work_set(const BlockGeometry& geometry, const PatternSet& patterns, int64_t head_groups,
                       int64_t micro_batch, int threads, int64_t kv_group);

/// Adds heads [first_head, first_head + heads) of layer `layer` into `sum` with `counter` (built
/// for the geometry), then multiplies the sum by `micro_batch`: the query heads sharing a K/V head
/// (h / kv_group) form one key group, cut at the range's ends. This is one head group of
/// count_work_set; sparse pattern sets only.
void count_head_group(WorkCounter& counter, const PatternSet& patterns, int64_t layer, int64_t first_head,
                      int64_t heads, int64_t kv_group, int64_t micro_batch, WorkMatrix& sum);

}  // namespace sparsering
