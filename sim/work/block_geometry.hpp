// The block geometry of a token layout as the sparse kernel sees it: which global positions each
// local query block and key block covers, grouped into periodic classes so the work counter can
// treat every tile of a class with one interval computation (sim/work/work_counter.hpp).
//
// A rank's local sequence is cut into segments on which the local-to-global map is periodic:
// global(l + period) = global(l) + shift. Contiguous: one segment (period lcm(bq, bk), shift = the
// period). Zigzag: its two half-chunks, each contiguous. Striped with stripe G: one segment with
// period lcm(G, bq, bk) and shift period x W. A full block inside a segment is "regular"; regular
// blocks are grouped by class (block index mod blocks-per-period), and within a class consecutive
// members are one period apart. For a pair of classes (q side, k side) the set of global
// differences global(q) - global(k) of the tile (a-th q member, b-th k member) is
//     D_pair + x0(q rank, k rank) + (a - b) x shift,
// where D_pair depends on the layout only and x0 = global(q segment start) - global(k segment start).
// Blocks that are not regular (a partial last block, a zigzag block straddling the two halves)
// are "irregular" and handled tile by tile. The same holds with the key block replaced by a whole
// segment of the K/V chunk (one "member"): the differences of query member a against every key of
// that segment are D_chunk + x0 + a x shift, which says whether a query block's list meets a kept
// offset at all. Tested in tests/sim/block_geometry_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "core/token_layout.hpp"
#include "sim/work/run_set.hpp"

namespace sparsering {

/// End (exclusive) of the run of consecutive global positions that contains local token `local`
/// of any rank: the local index where the local-to-global map next jumps (local_len at the end).
int64_t local_run_end(const TokenLayout& layout, int64_t local);

/// Smallest local index of `ring_rank` whose global position is >= `global`; local_len() if none.
int64_t first_local_at_or_after(const TokenLayout& layout, int32_t ring_rank, int64_t global);

/// Appends the global intervals covered by local tokens [local_begin, local_end) of `ring_rank`,
/// in ascending order, one per run of consecutive global positions.
void append_global_runs(const TokenLayout& layout, int32_t ring_rank, int64_t local_begin, int64_t local_end,
                        std::vector<Interval>& out);

/// A set of differences: { lo + m*stride .. hi + m*stride : m in [m_lo, m_hi] } (stride > 0 when
/// m_hi > m_lo). A single interval has m_lo == m_hi == 0.
struct DifferenceItem {
  int64_t lo = 0;
  int64_t hi = 0;
  int64_t stride = 0;
  int64_t m_lo = 0;
  int64_t m_hi = 0;
};

/// One periodic class of regular blocks of one side (queries or keys) inside one segment.
struct BlockClass {
  int32_t segment = 0;
  int64_t first_block = 0;  ///< block index of member 0
  int64_t block_stride = 0; ///< block indices between consecutive members (blocks per period)
  int64_t members = 0;      ///< number of regular blocks in the class
};

/// A (query class, key class) pair with the layout-only part of its tile difference sets.
struct ClassPair {
  int32_t q_class = 0;
  int32_t k_class = 0;
  int32_t q_segment = 0;
  int32_t k_segment = 0;
  std::vector<DifferenceItem> items;  ///< D_pair, relative to x0
  int64_t min_difference = 0;         ///< min of D_pair
  int64_t max_difference = 0;         ///< max of D_pair
};

/// One segment of a rank's local sequence.
struct LayoutSegment {
  int64_t local_begin = 0;
  int64_t local_end = 0;
};

/// Everything about a (layout, block_q, block_k) that does not depend on the sparsity pattern.
/// Built once and shared by every head, layer and sample.
struct BlockGeometry {
  TokenLayout layout;
  int64_t block_q = 64;
  int64_t block_k = 64;
  int64_t q_blocks = 0;       ///< ceil(local_len / block_q)
  int64_t k_blocks = 0;       ///< ceil(local_len / block_k)
  /// Columns per gathered item of the backward's column pass (WorkCounts::column_items): the
  /// kernels' 64-row tile. A parameter so tests can exercise it on small blocks.
  int64_t column_item = 64;
  int64_t period_shift = 0;   ///< global shift between consecutive members of a class
  std::vector<LayoutSegment> segments;
  std::vector<BlockClass> q_classes;
  std::vector<BlockClass> k_classes;
  std::vector<ClassPair> pairs;
  /// Per (query class, K/V segment), at [q_class x segments + segment]: the pair of the class's
  /// first block with every key of that segment (k_class = -1, one member), relative to x0.
  std::vector<ClassPair> chunk_pairs;
  std::vector<int64_t> irregular_q_blocks;  ///< ascending
  std::vector<int64_t> irregular_k_blocks;  ///< ascending
  /// For each q block: its class index, or -1 if irregular. Same for k blocks.
  std::vector<int32_t> q_block_class;
  std::vector<int32_t> k_block_class;

  /// Global position of the first token of segment `segment` on `ring_rank`.
  int64_t segment_start_global(int32_t ring_rank, int32_t segment) const {
    return layout.global_token(ring_rank, segments[static_cast<size_t>(segment)].local_begin);
  }
};

/// Builds the geometry. Throws InputError unless block sizes are >= 1 and the layout is valid.
BlockGeometry make_block_geometry(const TokenLayout& layout, int64_t block_q, int64_t block_k);

}  // namespace sparsering
