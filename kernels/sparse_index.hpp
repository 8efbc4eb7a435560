// The compressed sparse index that one rank's attention kernel runs over at one ring step
// (docs/algorithm.md section 3). O(kept tiles + kept columns), never a dense block mask.
//
// Semantics (the contract shared by the index builder, the kernels, the CPU references and the
// simulator's work counting): for query slice `row` = (batch b, query head h) -> b * q_heads + h,
// and local query block i, the kernel computes every pair (q, k) with
//   q in local query block i (rows [i*block_q, min((i+1)*block_q, q_len))),
//   k a local key of the K/V chunk held at this step (k < kv_len),
//   global(q) >= global(k)  (causality, from the plan's token layout),
// and (k's key block j is in the tile list of (row, i))  or  (k is in the column list of (row, i)).
// The kept sets are per row, in global coordinates: slash offsets d = global(q) - global(k) >= 0
// and vertical key positions. The tile list of (row, i) holds, ascending, every key block j
// touched by a kept slash offset d (some pair of tile (i, j) has global(q) - global(k) == d),
// always including d == 0 (each query sees itself); such a tile always holds a causal pair.
// The column list of (row, i) holds, ascending, the kept vertical keys of this chunk whose key
// block is not in the tile list of (row, i) and that at least one query of block i may see
// (causal); the kernel still masks each column per query.
// A tile is flagged `masked` when some of its pairs fail causality, so only those tiles pay for
// the in-tile mask; an unflagged tile holds causal pairs only and runs unmasked.
// Built by kernels/index/build_sparse_index.hpp (counted without materialising by
// kernels/index/count_sparse_index.hpp); tested against brute-force enumeration
// (kernels/reference/brute_force_mask.hpp) in tests/kernels/build_sparse_index_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

namespace sparsering {

struct SparseIndexView;  // kernels/attention_params.hpp

struct SparseIndex {
  int32_t rows = 0;       ///< batch x query heads: one tile/column list per (row, query block)
  int64_t q_len = 0;      ///< local query tokens of this rank
  int64_t kv_len = 0;     ///< tokens of the K/V chunk held at this step
  int32_t block_q = 64;   ///< query block size (tokens)
  int32_t block_k = 64;   ///< key tile size (tokens); vertical columns are gathered block_k at a time
  int32_t q_blocks = 0;   ///< ceil(q_len / block_q)

  // CSR over (row, query block) in row-major order: list r*q_blocks + i spans
  // [tile_offsets[r*q_blocks+i], tile_offsets[r*q_blocks+i+1]).
  std::vector<int32_t> tile_offsets;    ///< (rows * q_blocks + 1)
  std::vector<int32_t> tile_block;      ///< (tiles) key block index j, ascending within a list
  std::vector<uint8_t> tile_masked;     ///< (tiles) 1 if the tile needs the in-tile causal mask
  std::vector<int32_t> column_offsets;  ///< (rows * q_blocks + 1)
  std::vector<int32_t> column_index;    ///< (columns) local key position, ascending within a list

  int64_t tiles() const { return static_cast<int64_t>(tile_block.size()); }
  int64_t columns() const { return static_cast<int64_t>(column_index.size()); }
  /// Vertical chunks the kernel gathers: sum over lists of ceil(columns / block_k).
  int64_t column_chunks() const;
};

/// Checks the structure of an index: array sizes agree with rows x q_blocks, offsets start at 0
/// and never decrease, tile blocks lie in [0, ceil(kv_len / block_k)) and ascend strictly within a
/// list, masked flags are 0 or 1, columns lie in [0, kv_len) and ascend strictly within a list.
/// Does not check that the lists match a pattern (tests do that by brute force).
/// Throws InputError naming the array, the position and the value.
void validate_sparse_index(const SparseIndex& index);

/// A view of the index's host arrays, as the CPU references take it.
SparseIndexView host_view(const SparseIndex& index);

}  // namespace sparsering
