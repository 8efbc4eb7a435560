// Work counting without materialising the index: per row (and optionally per query block) the
// number of tiles, masked tiles, vertical columns and vertical column chunks that
// build_sparse_index would produce. This is what the cluster simulator calls for every
// (rank, ring step, head); it shares touched_key_blocks() with the builder and skips the lists.
// Tested in tests/kernels/count_sparse_index_test.cpp (equal to the materialised index).
#pragma once

#include <cstdint>
#include <span>

#include "kernels/index/step_geometry.hpp"
#include "kernels/index/row_pattern.hpp"
#include "kernels/sparse_index.hpp"

namespace sparsering {

/// Work of an index (or of part of one): what the kernel's cost depends on.
struct IndexWork {
  int64_t tiles = 0;          ///< block_q x block_k tiles
  int64_t masked_tiles = 0;   ///< of which need the in-tile causal mask
  int64_t columns = 0;        ///< vertical columns gathered outside the tiles
  int64_t column_chunks = 0;  ///< sum over lists of ceil(columns / block_k)

  /// Adds another count field by field.
  IndexWork& operator+=(const IndexWork& other) {
    tiles += other.tiles;
    masked_tiles += other.masked_tiles;
    columns += other.columns;
    column_chunks += other.column_chunks;
    return *this;
  }
  friend bool operator==(const IndexWork&, const IndexWork&) = default;
};

/// Work of one row at this ring step. When `per_block` is not empty it must hold q_blocks()
/// entries, and each query block's work is added (+=) to its entry, so calling this for every
/// row sums the rows per block. Throws InputError when `per_block` has the wrong size.
IndexWork count_sparse_index(const StepGeometry& geometry, const PreparedRowPattern& row,
                             std::span<IndexWork> per_block = {});

/// Work of all `rows` at this ring step, summed.
IndexWork count_sparse_index(const StepGeometry& geometry, std::span<const PreparedRowPattern> rows);

/// Work of a materialised index (counts its lists; masked tiles from tile_masked).
IndexWork index_work(const SparseIndex& index);

/// The units the backward kernel schedules for an index (kernels/cuda/sparse_attn_bwd.cu).
struct BackwardUnits {
  int64_t key_lists = 0;     ///< (K/V row, key block) pairs that some list of the row's group holds
  int64_t column_lists = 0;  ///< lists with at least one column
  int64_t column_items = 0;  ///< sum over lists of ceil(columns / column_item)
  /// Entries of the heaviest (K/V row, key block) segment: the tiles of the group's lists that
  /// hold that key block (the work of the key-block pass's heaviest CTA).
  int64_t longest_key_list = 0;
  friend bool operator==(const BackwardUnits&, const BackwardUnits&) = default;
};

/// Backward units of a materialised index whose consecutive `group` rows share one K/V row (GQA:
/// row r uses K/V row r / group). Throws InputError unless group >= 1 divides the rows and
/// column_item >= 1.
BackwardUnits backward_units(const SparseIndex& index, int32_t group, int64_t column_item = 64);

}  // namespace sparsering
