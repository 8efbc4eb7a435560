#include "kernels/index/count_sparse_index.hpp"

#include <algorithm>
#include <vector>

#include "common/error.hpp"
#include "kernels/index/touched_key_blocks.hpp"

namespace sparsering {

IndexWork count_sparse_index(const StepGeometry& geometry, const PreparedRowPattern& row,
                             std::span<IndexWork> per_block) {
  require(per_block.empty() || per_block.size() == static_cast<size_t>(geometry.q_blocks()),
          "per-block work needs ", geometry.q_blocks(), " entries (query blocks), got ", per_block.size());
  const int64_t block_k = geometry.block_k();
  std::vector<KeyBlockRange> ranges;
  std::vector<int32_t> verticals;
  held_vertical_keys(geometry, row, verticals);
  // Number of held kept keys with local position < `local`.
  auto verticals_below = [&verticals](int64_t local) {
    return static_cast<int64_t>(std::lower_bound(verticals.begin(), verticals.end(), local) - verticals.begin());
  };

  IndexWork total;
  for (int32_t i = 0; i < geometry.q_blocks(); ++i) {
    touched_key_blocks(geometry, row, i, ranges);
    const int32_t first_masked = geometry.first_masked_key_block(i);
    const int64_t limit = geometry.visible_key_limit(i);
    IndexWork work;
    int64_t columns = verticals_below(limit);  // visible kept keys, minus those a tile covers:
    for (const KeyBlockRange& range : ranges) {
      work.tiles += range.last - range.first + 1;
      work.masked_tiles += std::max(0, range.last - std::max(range.first, first_masked) + 1);
      const int64_t covered_begin = std::min(int64_t{range.first} * block_k, limit);
      const int64_t covered_end = std::min((int64_t{range.last} + 1) * block_k, limit);
      columns -= verticals_below(covered_end) - verticals_below(covered_begin);
    }
    work.columns = columns;
    work.column_chunks = (columns + block_k - 1) / block_k;
    if (!per_block.empty()) per_block[static_cast<size_t>(i)] += work;
    total += work;
  }
  return total;
}

IndexWork count_sparse_index(const StepGeometry& geometry, std::span<const PreparedRowPattern> rows) {
  IndexWork total;
  for (const PreparedRowPattern& row : rows) total += count_sparse_index(geometry, row);
  return total;
}

BackwardUnits backward_units(const SparseIndex& index, int32_t group, int64_t column_item) {
  require(group >= 1 && index.rows % group == 0, "backward units: a GQA group of ", group, " rows must divide ",
          index.rows, " rows");
  require(column_item >= 1, "backward units: a column item must be >= 1 column, got ", column_item);
  const int64_t key_blocks = (index.kv_len + index.block_k - 1) / index.block_k;
  BackwardUnits units;
  std::vector<int64_t> entries(static_cast<size_t>(key_blocks), 0);  // of the current group, per key block
  for (int32_t r = 0; r < index.rows; ++r) {
    if (r % group == 0) std::fill(entries.begin(), entries.end(), 0);
    for (int32_t i = 0; i < index.q_blocks; ++i) {
      const size_t list = static_cast<size_t>(r) * static_cast<size_t>(index.q_blocks) + static_cast<size_t>(i);
      for (int32_t t = index.tile_offsets[list]; t < index.tile_offsets[list + 1]; ++t) {
        int64_t& segment = entries[static_cast<size_t>(index.tile_block[static_cast<size_t>(t)])];
        units.key_lists += segment == 0 ? 1 : 0;
        units.longest_key_list = std::max(units.longest_key_list, ++segment);
      }
      const int64_t columns = index.column_offsets[list + 1] - index.column_offsets[list];
      units.column_lists += columns > 0 ? 1 : 0;
      units.column_items += (columns + column_item - 1) / column_item;
    }
  }
  return units;
}

IndexWork index_work(const SparseIndex& index) {
  IndexWork work;
  work.tiles = index.tiles();
  for (const uint8_t masked : index.tile_masked) work.masked_tiles += masked != 0 ? 1 : 0;
  work.columns = index.columns();
  work.column_chunks = index.column_chunks();
  return work;
}

}  // namespace sparsering
