// Synthetic sparse indices for the kernel cost benchmarks: every (row, query block) list holds
// exactly `tiles_per_list` key tiles and `chunks_per_list` x block_k (or `columns_per_list`) vertical columns, drawn at
// random (seeded) from a K/V chunk that lies wholly before the queries (an off-diagonal ring step:
// no pair fails causality, so no tile is masked). Controlled counts let the fit separate the cost
// of a tile from the cost of a gathered chunk. Two placements: uniformly random per list (no reuse
// between lists: the worst case for caches), or banded like real vertical-slash patterns (each
// head's tiles lie on fixed diagonals, so list i + 1 meets the key blocks of list i shifted by one,
// and each head gathers its columns from one pool shared by all its lists). With a key block
// stride s > 1 the lists meet only the key blocks j with j mod s = 0 (a 1/s part of the chunk, as
// the steps of a large ring whose patterns miss most of a chunk): the backward's key lists are
// then fewer than the (K/V head, key block) pairs its key-block pass launches, which every other
// case makes equal.
// Tested in tests/measure/calibration/synthetic_index_test.cpp.
#pragma once

#include <cstdint>

#include "kernels/sparse_index.hpp"

namespace sparsering {

/// What to draw. Sizes in tokens; counts per (row, query block) list.
struct SyntheticIndexSpec {
  int32_t rows = 1;              ///< batch x query heads
  int64_t q_len_tokens = 0;      ///< local query tokens
  int64_t kv_len_tokens = 0;     ///< tokens of the held K/V chunk
  int32_t block_q = 64;
  int32_t block_k = 64;
  int32_t tiles_per_list = 0;    ///< distinct key blocks in each tile list
  int32_t chunks_per_list = 0;   ///< each column list holds chunks_per_list x block_k columns
  uint64_t seed = 0;
  bool banded = false;           ///< banded placement (see above) instead of random per list
  /// Columns per list when >= 0, instead of chunks_per_list x block_k (chunks_per_list must then
  /// be ceil(columns / block_k)): lists whose last gathered chunk or 64-column item is partly filled
  int32_t columns_per_list = -1;
  /// Tiles and columns lie only in key blocks j with j mod key_block_stride = 0 (1: every block).
  int32_t key_block_stride = 1;
  /// false: each list's columns stay in draw order (the same columns; for counting units only,
  /// where sorting them is most of the time).
  bool sorted_columns = true;
};

/// Draws the index. The covered key blocks are j = k x stride (k = 0, 1, ...): ceil(key_blocks /
/// stride) of them, of which the full ones (j < kv_len / block_k) hold columns. Tile blocks are
/// distinct, covered and ascending; columns are distinct, ascending (unless sorted_columns is
/// false), in covered blocks (any
/// column of the chunk at stride 1, as before strides existed) and outside the list's tile blocks;
/// no tile is masked. Banded: list i of a row holds covered blocks stride x ((i + s) mod covered)
/// for the row's tiles_per_list distinct offsets s, and its columns are the first columns of the
/// row's pool (drawn once from the covered full blocks, columns + tiles x block_k of them) that lie
/// outside its tiles. The result passes validate_sparse_index, has rows x q_blocks x
/// tiles_per_list tiles and rows x q_blocks x chunks_per_list column chunks. Throws InputError
/// when a count is negative, tiles exceed the covered key blocks or tiles + chunks the covered
/// full ones, the stride is < 1, or for non-positive sizes.
SparseIndex make_synthetic_index(const SyntheticIndexSpec& spec);

}  // namespace sparsering
