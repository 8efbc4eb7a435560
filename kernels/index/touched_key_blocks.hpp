// Per (row, query block): which key blocks the row's kept slashes touch, and which kept vertical
// keys the held K/V chunk contains. The one computation the index builder
// (build_sparse_index.hpp) and the work counter (count_sparse_index.hpp) share, so they cannot
// disagree. Tested against brute-force enumeration in tests/kernels/build_sparse_index_test.cpp.
//
// Geometry: a slash interval D = [d_lo, d_hi] touches key k from a query run R = [r_lo, r_hi]
// (consecutive global positions) iff global(k) is in [r_lo - d_hi, r_hi - d_lo]; the keys of the
// chunk with global positions in that interval are one local range (global positions increase
// with the local index), hence one range of key blocks. The union over runs and intervals is the
// tile list. Per query run it walks either the slash intervals that can reach the chunk or the
// key runs that some interval can reach, whichever is fewer, so the cost per query block is
// O(runs x min(relevant intervals, relevant key runs) x log), never per token.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/index/step_geometry.hpp"
#include "kernels/index/row_pattern.hpp"

namespace sparsering {

/// A closed range [first, last] of key block indices.
struct KeyBlockRange {
  int32_t first = 0;
  int32_t last = 0;
  friend bool operator==(const KeyBlockRange&, const KeyBlockRange&) = default;
};

/// Replaces `ranges` with the key blocks that some kept slash of `row` (offset 0 included) touches
/// in local query block `q_block`, as ascending, disjoint, non-adjacent ranges.
/// Precondition: 0 <= q_block < geometry.q_blocks().
void touched_key_blocks(const StepGeometry& geometry, const PreparedRowPattern& row, int32_t q_block,
                        std::vector<KeyBlockRange>& ranges);

/// Replaces `locals` with the local positions, ascending, of the row's kept vertical keys that
/// the held K/V chunk (the geometry's kv_rank) owns.
void held_vertical_keys(const StepGeometry& geometry, const PreparedRowPattern& row, std::vector<int32_t>& locals);

}  // namespace sparsering
