// GPU index build: kept vertical-slash sets (in global coordinates, as the GPU recall selection
// writes them) + token layout + ring position -> the compressed SparseIndex of one ring step,
// exactly as build_sparse_index (kernels/index/build_sparse_index.hpp) builds it on the CPU:
// compact CSR lists, never a dense block mask. Tested in
// tests/kernels_gpu/sparse_index_build_test.cpp against the CPU builder on every layout.
//
// Two ways to size the output (docs/kernels.md, "Pattern estimation, selection and index build"):
//   - launch_build_sparse_index: exact arrays; the stream is synchronized once to read the totals.
//   - allocate_sparse_index + launch_build_sparse_index_into: arrays of a capacity the caller
//     chose (sparse_index_capacity_bound always suffices), no host synchronization at all (CUDA
//     graph capture works); the totals the build needed stay on the device until
//     read_sparse_index_counts, which throws if they exceeded the capacity.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "kernels/attention_params.hpp"
#include "kernels/cuda/device_buffer.hpp"

namespace sparsering {

/// Kept sets of `rows` index rows, padded to `capacity` entries per row (device arrays).
struct KeptSetsView {
  int32_t rows = 0;
  int32_t capacity = 0;
  const int32_t* vertical_count = nullptr;  ///< (rows)
  const int32_t* vertical_keys = nullptr;   ///< (rows, capacity) global key positions, ascending, unique
  const int32_t* slash_count = nullptr;     ///< (rows)
  const int32_t* slash_offsets = nullptr;   ///< (rows, capacity) offsets q - k, ascending, unique (0 implied)
};

/// Array sizes of a device index: tile entries and column entries.
struct SparseIndexCapacity {
  int64_t tiles = 0;
  int64_t columns = 0;
};

/// A SparseIndex in device memory; view() is what the attention launchers take.
struct DeviceSparseIndex {
  int32_t rows = 0;
  int32_t block_q = 64;
  int32_t block_k = 64;
  int32_t q_blocks = 0;
  /// Entries of the last build: exact after launch_build_sparse_index or read_sparse_index_counts,
  /// -1 while a launch_build_sparse_index_into has not been read back.
  int64_t tiles = 0;
  int64_t columns = 0;
  SparseIndexCapacity capacity;          ///< sizes of tile_block / tile_masked and column_index
  DeviceBuffer<int32_t> tile_offsets;    ///< (rows * q_blocks + 1)
  DeviceBuffer<int32_t> tile_block;      ///< (max(capacity.tiles, 1))
  DeviceBuffer<uint8_t> tile_masked;     ///< (max(capacity.tiles, 1))
  DeviceBuffer<int32_t> column_offsets;  ///< (rows * q_blocks + 1)
  DeviceBuffer<int32_t> column_index;    ///< (max(capacity.columns, 1))
  DeviceBuffer<int64_t> needed;          ///< (2) tiles and columns the last build needed (device)

  SparseIndexView view() const {
    SparseIndexView v;
    v.rows = rows;
    v.block_q = block_q;
    v.block_k = block_k;
    v.q_blocks = q_blocks;
    v.tile_offsets = tile_offsets.data();
    v.tile_block = tile_block.data();
    v.tile_masked = tile_masked.data();
    v.column_offsets = column_offsets.data();
    v.column_index = column_index.data();
    // The arrays' size, not the last build's count: a later build into the same arrays may hold
    // more tiles, and a view (or a captured graph) may outlive the count it was taken with.
    v.max_tiles = std::max<int64_t>(1, capacity.tiles);
    return v;
  }
};

/// Builds the index of ring step (position.q_rank, position.kv_rank) for the kept sets, with
/// q_len = kv_len = the layout's local length, in arrays of exactly the needed sizes. Queues the
/// work on `stream` and synchronizes it once (to size the output arrays). Throws InputError for a
/// bad geometry (block sizes < 1, ranks out of range, N >= 2^31, more than 2^18 key blocks,
/// block_q > 1024, an index of 2^31 entries or more), CudaError on failure.
DeviceSparseIndex launch_build_sparse_index(const KeptSetsView& kept, const RingPosition& position, int32_t block_q,
                                            int32_t block_k, cudaStream_t stream);

/// Capacity that no kept sets of `rows` rows with at most `vertical_capacity` keys and
/// `slash_capacity` offsets per row can exceed, from the geometry alone (host, O(local length)):
/// per (row, query block), tiles <= the key blocks some of its queries may see (and <= what the
/// offsets can reach), columns <= min(vertical_capacity, the keys some of its queries may see).
/// Same geometry checks as launch_build_sparse_index.
SparseIndexCapacity sparse_index_capacity_bound(const RingPosition& position, int32_t rows, int32_t block_q,
                                                int32_t block_k, int32_t vertical_capacity, int32_t slash_capacity);

/// Allocates an index for `rows` rows of this geometry with the given capacity (cudaMalloc:
/// allocate once, build many times).
DeviceSparseIndex allocate_sparse_index(const RingPosition& position, int32_t rows, int32_t block_q, int32_t block_k,
                                        const SparseIndexCapacity& capacity);

/// Tuning of launch_build_sparse_index_into. The count pass keeps each list's key-block bitmap
/// for the fill pass while it takes at most max_bitmap_bytes of scratch (rows x query blocks x
/// key blocks / 8 bytes); above that the fill pass marks the bitmap again. Two per-row tables
/// spare each list a walk while they take at most max_row_table_bytes together: the kept keys
/// before each key block (rows x (key blocks + 1) x 4 bytes; the count pass subtracts the keys
/// under the tiles instead of testing every key) and, when every block is one run of
/// consecutive tokens starting at a multiple of the block (block_q = block_k and the layout's
/// runs are whole blocks), the table of block diagonals (rows x N / block / 8 bytes; a list's
/// bitmap is read off it instead of walking the row's slash intervals).
struct SparseIndexBuildOptions {
  int64_t max_bitmap_bytes = int64_t{256} << 20;
  int64_t max_row_table_bytes = int64_t{64} << 20;
};

/// Builds into `index` (from allocate_sparse_index with this position's geometry and kept.rows
/// rows) without any host synchronization: everything, the stream-ordered scratch included, is
/// queued on `stream`. Sets index.tiles and index.columns to -1. When the lists need more entries
/// than the capacity, the lists are cut at the capacity (the offsets stay within the arrays, so
/// the attention kernels stay in bounds but compute fewer pairs) and read_sparse_index_counts
/// reports it. Throws InputError for a bad geometry or an index of another geometry.
void launch_build_sparse_index_into(const KeptSetsView& kept, const RingPosition& position, DeviceSparseIndex& index,
                                    cudaStream_t stream, const SparseIndexBuildOptions& options = {});

/// Synchronizes `stream`, reads the totals the last build into `index` needed and stores them in
/// index.tiles / index.columns. Throws InputError naming both numbers when they exceeded the
/// capacity (that index must not be used: its lists were cut).
void read_sparse_index_counts(DeviceSparseIndex& index, cudaStream_t stream);

}  // namespace sparsering
