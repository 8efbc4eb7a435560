// Brute-force oracles of the index contract (kernels/sparse_index.hpp), by token-level
// enumeration with no geometry shortcuts: the index the contract defines, the pair set it
// defines, the pair set a given index computes, and the pairs the kept pattern itself names.
// O(q_len x kv_len) per row and tiny sizes only. Tests compare build_sparse_index and the CUDA
// index build against them (tests/kernels/build_sparse_index_test.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/index/step_geometry.hpp"
#include "kernels/index/row_pattern.hpp"
#include "kernels/sparse_index.hpp"

namespace sparsering {

/// The SparseIndex the contract defines, found by enumerating every pair of every tile: tile j of
/// (row, i) iff some pair has global(q) - global(k) in the kept offsets or 0; masked iff some pair
/// has global(q) < global(k); column k of (row, i) iff its global position is a kept vertical key,
/// its block is not a tile of (row, i), and some query of block i has global(q) >= global(k).
/// Throws InputError on an invalid geometry or a kept value outside [0, N).
SparseIndex brute_force_sparse_index(const IndexGeometry& geometry, std::span<const RowPattern> rows);

/// The pairs the contract says the kernel computes for one row, as a (q_len x kv_len) row-major
/// 0/1 mask over local positions: causal and (block pair touched by a kept offset or 0, or the key
/// is a kept vertical key). Enumerated directly, independently of brute_force_sparse_index.
std::vector<uint8_t> contract_pair_mask(const IndexGeometry& geometry, const RowPattern& row);

/// The pairs index row `row` makes a kernel compute, as a (q_len x kv_len) 0/1 mask: every key of
/// every listed tile (causal ones only where the tile is flagged `masked`, all of them otherwise,
/// as the kernel does) and every listed column the query may see. Throws InputError on an entry out
/// of range or an index whose lengths differ from the layout's local length.
std::vector<uint8_t> index_pair_mask(const SparseIndex& index, const RingPosition& position, int32_t row);

/// The pairs the kept pattern names for one row (q_len x kv_len mask): causal and (global(q) -
/// global(k) a kept offset or 0, or global(k) a kept vertical key). The index must compute all of
/// them; it may compute more (the rest of a touched tile).
std::vector<uint8_t> pattern_pair_mask(const IndexGeometry& geometry, const RowPattern& row);

}  // namespace sparsering
