// Drawing uses one seeded 64-bit generator, so an index is a pure function of its spec (and at
// stride 1 the same draws as before strides existed, so recorded runs can be rebuilt). Blocks and
// columns are drawn over the covered blocks numbered 0, 1, ... and mapped to block k x stride.
// Random columns are rejection-sampled (tiles + chunks <= covered full blocks guarantees enough
// candidates). A banded row's pool has columns + tiles x block_k columns: a list's tiles cover at
// most tiles x block_k of them, so enough always remain.
#include "measure/calibration/synthetic_index.hpp"

#include <algorithm>
#include <random>
#include <vector>

#include "common/error.hpp"

namespace sparsering {

SparseIndex make_synthetic_index(const SyntheticIndexSpec& spec) {
  require(spec.rows >= 1 && spec.q_len_tokens >= 1 && spec.kv_len_tokens >= 1, "synthetic index needs rows, q_len and kv_len >= 1, got ",
          spec.rows, ", ", spec.q_len_tokens, ", ", spec.kv_len_tokens);
  require(spec.block_q >= 1 && spec.block_k >= 1, "synthetic index needs block_q, block_k >= 1, got ", spec.block_q, ", ",
          spec.block_k);
  require(spec.tiles_per_list >= 0 && spec.chunks_per_list >= 0, "synthetic index counts must be >= 0, got ",
          spec.tiles_per_list, " tiles and ", spec.chunks_per_list, " chunks per list");
  require(spec.key_block_stride >= 1, "synthetic index: key block stride must be >= 1, got ", spec.key_block_stride);
  const int64_t stride = spec.key_block_stride;
  const int64_t key_blocks = (spec.kv_len_tokens + spec.block_k - 1) / spec.block_k;
  const int64_t covered = (key_blocks + stride - 1) / stride;
  // Full blocks only for columns: the last block may be partial, so leave it out of the budget.
  const int64_t full_blocks = spec.kv_len_tokens / spec.block_k;
  const int64_t covered_full = (full_blocks + stride - 1) / stride;
  require(spec.tiles_per_list <= covered && (spec.chunks_per_list == 0 || spec.tiles_per_list + spec.chunks_per_list <= covered_full),
          "synthetic index: ", spec.tiles_per_list, " tiles + ", spec.chunks_per_list, " chunks per list do not fit ",
          covered_full, " full key blocks of ", spec.block_k, " tokens (every ", stride, " of ", full_blocks, ")");
  require(spec.columns_per_list < 0 ||
              int64_t{spec.chunks_per_list} == (int64_t{spec.columns_per_list} + spec.block_k - 1) / spec.block_k,
          "synthetic index: ", spec.columns_per_list, " columns per list make ",
          (int64_t{spec.columns_per_list} + spec.block_k - 1) / spec.block_k, " chunks of ", spec.block_k,
          ", not the ", spec.chunks_per_list, " given");
  const int64_t q_blocks = (spec.q_len_tokens + spec.block_q - 1) / spec.block_q;
  const int64_t lists = int64_t{spec.rows} * q_blocks;
  require(lists * (spec.tiles_per_list + int64_t{spec.chunks_per_list} * spec.block_k) < (int64_t{1} << 31),
          "synthetic index too large for int32 offsets");

  SparseIndex index;
  index.rows = spec.rows;
  index.q_len = spec.q_len_tokens;
  index.kv_len = spec.kv_len_tokens;
  index.block_q = spec.block_q;
  index.block_k = spec.block_k;
  index.q_blocks = static_cast<int32_t>(q_blocks);
  const auto list_count = static_cast<size_t>(lists);
  const auto tiles_per_list = static_cast<size_t>(spec.tiles_per_list);
  const size_t columns_per_list = spec.columns_per_list >= 0
                                      ? static_cast<size_t>(spec.columns_per_list)
                                      : static_cast<size_t>(spec.chunks_per_list) * static_cast<size_t>(spec.block_k);
  index.tile_offsets.resize(list_count + 1);
  index.column_offsets.resize(list_count + 1);
  index.tile_block.reserve(list_count * tiles_per_list);
  index.tile_masked.assign(list_count * tiles_per_list, 0);
  index.column_index.reserve(list_count * columns_per_list);

  std::mt19937_64 rng(spec.seed);
  std::uniform_int_distribution<int64_t> pick_block(0, covered - 1);
  // Column draws number the covered full blocks' columns; at stride 1 every column of the chunk.
  std::uniform_int_distribution<int64_t> pick_column(0, stride == 1 ? spec.kv_len_tokens - 1 : covered_full * spec.block_k - 1);
  const auto column_of = [&](int64_t draw) { return (draw / spec.block_k) * stride * spec.block_k + draw % spec.block_k; };
  std::vector<uint8_t> in_tiles(static_cast<size_t>(key_blocks), 0);
  std::vector<uint8_t> taken(static_cast<size_t>(spec.kv_len_tokens), 0);  // columns drawn so far (scratch)
  std::vector<int32_t> blocks;
  std::vector<int32_t> columns;
  std::vector<int64_t> offsets;   // banded: the row's diagonals
  std::vector<int32_t> pool;      // banded: the row's columns, in draw order
  for (size_t list = 0; list < list_count; ++list) {
    index.tile_offsets[list] = static_cast<int32_t>(index.tile_block.size());
    index.column_offsets[list] = static_cast<int32_t>(index.column_index.size());
    const auto q_block = static_cast<int64_t>(list % static_cast<size_t>(q_blocks));
    if (spec.banded && q_block == 0) {
      offsets.clear();
      while (offsets.size() < tiles_per_list) {
        const int64_t s = pick_block(rng);
        if (std::find(offsets.begin(), offsets.end(), s) == offsets.end()) offsets.push_back(s);
      }
      pool.clear();
      const size_t pool_size = columns_per_list == 0 ? 0 : columns_per_list + tiles_per_list * static_cast<size_t>(spec.block_k);
      std::uniform_int_distribution<int64_t> pick_full_column(0, covered_full * spec.block_k - 1);
      while (pool.size() < pool_size) {
        const auto c = static_cast<int32_t>(column_of(pick_full_column(rng)));
        if (taken[static_cast<size_t>(c)] != 0) continue;
        taken[static_cast<size_t>(c)] = 1;
        pool.push_back(c);
      }
      for (const int32_t c : pool) taken[static_cast<size_t>(c)] = 0;
    }
    blocks.clear();
    if (spec.banded) {
      for (const int64_t s : offsets) blocks.push_back(static_cast<int32_t>((q_block + s) % covered * stride));
    } else {
      while (blocks.size() < tiles_per_list) {
        const int64_t j = pick_block(rng) * stride;
        if (in_tiles[static_cast<size_t>(j)] != 0) continue;
        in_tiles[static_cast<size_t>(j)] = 1;
        blocks.push_back(static_cast<int32_t>(j));
      }
      for (const int32_t j : blocks) in_tiles[static_cast<size_t>(j)] = 0;
    }
    std::sort(blocks.begin(), blocks.end());
    for (const int32_t j : blocks) in_tiles[static_cast<size_t>(j)] = 1;
    index.tile_block.insert(index.tile_block.end(), blocks.begin(), blocks.end());
    columns.clear();
    if (spec.banded) {
      for (size_t k = 0; k < pool.size() && columns.size() < columns_per_list; ++k) {
        if (in_tiles[static_cast<size_t>(pool[k] / spec.block_k)] == 0) columns.push_back(pool[k]);
      }
      if (spec.sorted_columns) std::sort(columns.begin(), columns.end());
    }
    if (columns.size() < columns_per_list) {
      // Draw a batch, keeping each new column not under a tile; repeat until enough remain. The
      // batches (and so the draws) are those of keeping duplicates and dropping them per batch.
      for (const int32_t c : columns) taken[static_cast<size_t>(c)] = 1;
      while (columns.size() < columns_per_list) {
        const size_t missing = columns_per_list - columns.size();
        for (size_t k = 0; k < missing; ++k) {
          const int64_t c = column_of(pick_column(rng));
          if (in_tiles[static_cast<size_t>(c / spec.block_k)] == 0 && taken[static_cast<size_t>(c)] == 0) {
            taken[static_cast<size_t>(c)] = 1;
            columns.push_back(static_cast<int32_t>(c));
          }
        }
      }
      for (const int32_t c : columns) taken[static_cast<size_t>(c)] = 0;
      if (spec.sorted_columns) std::sort(columns.begin(), columns.end());
    }
    index.column_index.insert(index.column_index.end(), columns.begin(), columns.end());
    for (const int32_t j : blocks) in_tiles[static_cast<size_t>(j)] = 0;
  }
  index.tile_offsets[list_count] = static_cast<int32_t>(index.tile_block.size());
  index.column_offsets[list_count] = static_cast<int32_t>(index.column_index.size());
  return index;
}

}  // namespace sparsering
