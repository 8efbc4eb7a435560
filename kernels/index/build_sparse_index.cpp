#include "kernels/index/build_sparse_index.hpp"

#include <limits>
#include <vector>

#include "common/error.hpp"
#include "kernels/index/touched_key_blocks.hpp"

namespace sparsering {
namespace {

int32_t checked_offset(size_t size, const char* what) {
  require(size <= static_cast<size_t>(std::numeric_limits<int32_t>::max()), "sparse index has more than 2^31 - 1 ",
          what, " (", size, "); build it for fewer rows at a time");
  return static_cast<int32_t>(size);
}

}  // namespace

SparseIndex build_sparse_index(const StepGeometry& geometry, std::span<const PreparedRowPattern> rows) {
  require(rows.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()), "too many index rows: ",
          rows.size());
  SparseIndex index;
  index.rows = static_cast<int32_t>(rows.size());
  index.q_len = geometry.q_len();
  index.kv_len = geometry.kv_len();
  index.block_q = geometry.block_q();
  index.block_k = geometry.block_k();
  index.q_blocks = geometry.q_blocks();
  const size_t lists = rows.size() * static_cast<size_t>(geometry.q_blocks());
  index.tile_offsets.reserve(lists + 1);
  index.column_offsets.reserve(lists + 1);
  index.tile_offsets.push_back(0);
  index.column_offsets.push_back(0);

  const int64_t block_k = geometry.block_k();
  std::vector<KeyBlockRange> ranges;
  std::vector<int32_t> verticals;
  for (const PreparedRowPattern& row : rows) {
    held_vertical_keys(geometry, row, verticals);
    for (int32_t i = 0; i < geometry.q_blocks(); ++i) {
      touched_key_blocks(geometry, row, i, ranges);
      const int32_t first_masked = geometry.first_masked_key_block(i);
      for (const KeyBlockRange& range : ranges) {
        for (int32_t j = range.first; j <= range.last; ++j) {
          index.tile_block.push_back(j);
          index.tile_masked.push_back(j >= first_masked ? 1 : 0);
        }
      }
      index.tile_offsets.push_back(checked_offset(index.tile_block.size(), "tiles"));

      // Columns: kept keys some query of the block sees (local < limit), outside every tile.
      const int64_t limit = geometry.visible_key_limit(i);
      size_t r = 0;
      for (const int32_t key : verticals) {
        if (key >= limit) break;
        const int64_t j = key / block_k;
        while (r < ranges.size() && ranges[r].last < j) ++r;
        if (r < ranges.size() && ranges[r].first <= j) continue;  // a tile of the row covers it
        index.column_index.push_back(key);
      }
      index.column_offsets.push_back(checked_offset(index.column_index.size(), "columns"));
    }
  }
  return index;
}

SparseIndex build_sparse_index(const IndexGeometry& geometry, std::span<const RowPattern> rows) {
  const StepGeometry blocks(geometry);
  const std::vector<PreparedRowPattern> prepared =
      prepare_row_patterns(rows, geometry.position.layout.seq_len_tokens());
  return build_sparse_index(blocks, prepared);
}

}  // namespace sparsering
