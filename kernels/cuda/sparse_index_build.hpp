// GPU index build: kept vertical-slash sets (in global coordinates, as the GPU recall selection
// writes them) + token layout + ring position -> the compressed SparseIndex of one ring step,
// exactly as build_sparse_index (kernels/index/build_sparse_index.hpp) builds it on the CPU:
// compact CSR lists, never a dense block mask. Tested in
// tests/kernels_gpu/sparse_index_build_test.cpp against the CPU builder on every layout.
#pragma once

#include <cuda_runtime_api.h>

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

/// A SparseIndex in device memory; view() is what the attention launchers take.
struct DeviceSparseIndex {
  int32_t rows = 0;
  int32_t block_q = 64;
  int32_t block_k = 64;
  int32_t q_blocks = 0;
  int64_t tiles = 0;
  int64_t columns = 0;
  DeviceBuffer<int32_t> tile_offsets;    ///< (rows * q_blocks + 1)
  DeviceBuffer<int32_t> tile_block;      ///< (max(tiles, 1))
  DeviceBuffer<uint8_t> tile_masked;     ///< (max(tiles, 1))
  DeviceBuffer<int32_t> column_offsets;  ///< (rows * q_blocks + 1)
  DeviceBuffer<int32_t> column_index;    ///< (max(columns, 1))

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
    return v;
  }
};

/// Builds the index of ring step (position.q_rank, position.kv_rank) for the kept sets, with
/// q_len = kv_len = the layout's local length. Queues the work on `stream` and synchronizes it
/// once (to size the output arrays). Throws InputError for a bad geometry (block sizes < 1,
/// ranks out of range, N >= 2^31, more than 2^18 key blocks, block_q > 1024), CudaError on failure.
DeviceSparseIndex launch_build_sparse_index(const KeptSetsView& kept, const RingPosition& position, int32_t block_q,
                                            int32_t block_k, cudaStream_t stream);

}  // namespace sparsering
