// The kernel work of one (query rank, K/V chunk) pair, counted exactly as the index builder lays it
// out (kernels/sparse_index.hpp): key tiles in the tile lists, how many of them need the in-tile
// causal mask, vertical columns outside the tiles, the block_k-column chunks the kernel gathers
// them in, and the non-empty (head, query block) lists (each costs the kernel one CTA that loads
// its Q block and merges its output; an empty list returns at once). For the backward, which
// schedules other units (kernels/cuda/sparse_attn_bwd.cu): the non-empty (KV head, key block)
// segments of its transposed index (key-block pass CTAs, one per 64-key sub-block), the lists
// with a column (column pass CTAs, one per 64-query tile) and the 64-column items the column
// pass gathers, and the entries of the longest such segment (the work of the heaviest key-block
// CTA, which bounds the pass's duration when it exceeds the per-SM average). Also the W x W
// matrix of these counts for one head or one head group.
// Tested through tests/sim/work_counter_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

namespace sparsering {

struct WorkCounts {
  int64_t tiles = 0;          ///< block_q x block_k tiles in the tile lists (slash + diagonal)
  int64_t masked_tiles = 0;   ///< of those, tiles with a pair that fails causality (in-tile mask)
  int64_t columns = 0;        ///< vertical columns not covered by a tile, summed over query blocks
  int64_t column_chunks = 0;  ///< sum over query blocks of ceil(columns / block_k)
  int64_t lists = 0;          ///< (head, query block) lists with at least one tile or column
  /// (KV head, key block) pairs whose key block is in the tile list of some query block of some
  /// query head of the KV head's GQA group: the backward's non-empty transposed-index segments
  /// (count_work_set groups heads by KV head; one head counted alone is its own group).
  int64_t key_lists = 0;
  int64_t column_lists = 0;   ///< (head, query block) lists with at least one column
  /// sum over lists of ceil(columns / column_item) (BlockGeometry::column_item, 64 = the
  /// backward column pass's gather width): its items per 64-query tile
  int64_t column_items = 0;
  /// Entries of the longest (K/V head, key block) segment: the most work one backward key-block
  /// CTA does. A segment's entries are the (query head of the GQA group, query block) pairs whose
  /// tile list holds the key block. Not a sum: combining different K/V heads (or sequences) takes
  /// the maximum, as the segments stay separate.
  int64_t longest_key_list = 0;

  /// Sums every count; the maximum for longest_key_list (the other side's segments are others).
  WorkCounts& operator+=(const WorkCounts& other) {
    tiles += other.tiles;
    masked_tiles += other.masked_tiles;
    columns += other.columns;
    column_chunks += other.column_chunks;
    lists += other.lists;
    key_lists += other.key_lists;
    column_lists += other.column_lists;
    column_items += other.column_items;
    longest_key_list = longest_key_list > other.longest_key_list ? longest_key_list : other.longest_key_list;
    return *this;
  }
  /// Every count times `factor` (the same work repeated, e.g. for each sequence of a micro batch),
  /// except longest_key_list: the repeats are separate segments, so the longest stays the same.
  WorkCounts& operator*=(int64_t factor) {
    tiles *= factor;
    masked_tiles *= factor;
    columns *= factor;
    column_chunks *= factor;
    lists *= factor;
    key_lists *= factor;
    column_lists *= factor;
    column_items *= factor;
    return *this;
  }
  friend bool operator==(const WorkCounts&, const WorkCounts&) = default;
};

/// Work of every (query rank, K/V owner rank) pair of one ring, indexed by ring-local ranks:
/// at(q, kv) is what rank q computes when it holds the K/V chunk of rank kv.
class WorkMatrix {
 public:
  WorkMatrix() = default;
  explicit WorkMatrix(int32_t ranks) : ranks_(ranks), cells_(static_cast<size_t>(ranks) * static_cast<size_t>(ranks)) {}

  int32_t ranks() const { return ranks_; }
  WorkCounts& at(int32_t q_rank, int32_t kv_rank) { return cells_[index(q_rank, kv_rank)]; }
  const WorkCounts& at(int32_t q_rank, int32_t kv_rank) const { return cells_[index(q_rank, kv_rank)]; }
  /// Sets every cell to zero (keeps the size).
  void clear() { cells_.assign(cells_.size(), WorkCounts{}); }
  /// Adds `other` cell by cell. Precondition: same ranks.
  WorkMatrix& operator+=(const WorkMatrix& other) {
    for (size_t k = 0; k < cells_.size(); ++k) cells_[k] += other.cells_[k];
    return *this;
  }
  /// Sum over every cell (longest_key_list: the maximum).
  WorkCounts total() const {
    WorkCounts sum;
    for (const WorkCounts& cell : cells_) sum += cell;
    return sum;
  }
  friend bool operator==(const WorkMatrix&, const WorkMatrix&) = default;

 private:
  size_t index(int32_t q_rank, int32_t kv_rank) const {
    return static_cast<size_t>(q_rank) * static_cast<size_t>(ranks_) + static_cast<size_t>(kv_rank);
  }
  int32_t ranks_ = 0;
  std::vector<WorkCounts> cells_;
};

}  // namespace sparsering
