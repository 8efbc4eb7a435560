// Transposition of the sparse tile index for the backward pass (see sparse_index_transpose.hpp):
// device code, launcher. Every tile becomes one 64-bit key (segment << entry_bits | entry code);
// a CUB radix sort over the used bits orders them by (segment, head, query block), and an
// exclusive scan of per-segment counts gives the CSR offsets.
// Tested in tests/kernels_gpu/sparse_index_transpose_test.cpp.
#include "kernels/cuda/sparse_index_transpose.hpp"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <bit>

#include "common/error.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace sparsering {
namespace {

constexpr int kTransposeThreads = 256;

/// One warp per (row, query block) list: writes each tile's packed key and counts its segment.
__global__ void __launch_bounds__(kTransposeThreads)
    sparse_index_transpose_keys_kernel(const SparseIndexView index, int32_t q_heads, int32_t group,
                                       int32_t key_blocks, int entry_bits, uint64_t* keys, int32_t* counts) {
  const int64_t list = (int64_t{blockIdx.x} * kTransposeThreads + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (list >= int64_t{index.rows} * index.q_blocks) return;
  const int32_t row = static_cast<int32_t>(list / index.q_blocks);
  const int32_t q_block = static_cast<int32_t>(list % index.q_blocks);
  const int32_t b = row / q_heads;
  const int32_t h = row % q_heads;
  const int32_t kv_heads = q_heads / group;
  const int64_t segment_base = (int64_t{b} * kv_heads + h / group) * key_blocks;
  const uint64_t code_base = (uint64_t(h % group) * uint64_t(index.q_blocks) + uint64_t(q_block)) * 2u;
  for (int32_t t = index.tile_offsets[list] + lane; t < index.tile_offsets[list + 1]; t += 32) {
    const int64_t segment = segment_base + index.tile_block[t];
    keys[t] = (uint64_t(segment) << entry_bits) | (code_base + (index.tile_masked[t] != 0 ? 1u : 0u));
    atomicAdd(counts + segment, 1);
  }
}

__global__ void __launch_bounds__(kTransposeThreads)
    sparse_index_transpose_entries_kernel(const uint64_t* sorted, int64_t tiles, uint64_t entry_mask, int32_t* entries) {
  const int64_t t = int64_t{blockIdx.x} * kTransposeThreads + threadIdx.x;
  if (t < tiles) entries[t] = static_cast<int32_t>(sorted[t] & entry_mask);
}

size_t align_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

TransposedIndex launch_sparse_index_transpose(const SparseIndexView& index, const AttentionShape& shape,
                                              cudaStream_t stream) {
  const int32_t group = shape.q_heads / shape.kv_heads;
  const int64_t key_blocks = (shape.kv_len + index.block_k - 1) / index.block_k;
  const int64_t segments = int64_t{shape.batch} * shape.kv_heads * key_blocks;
  require(segments < (int64_t{1} << 31), "too many key blocks for the backward index: ", segments);
  int32_t tiles32 = 0;
  const int64_t lists = int64_t{index.rows} * index.q_blocks;
  SPARSERING_CUDA_CHECK(cudaMemcpyAsync(&tiles32, index.tile_offsets + lists, sizeof tiles32, cudaMemcpyDeviceToHost, stream));
  SPARSERING_CUDA_CHECK(cudaStreamSynchronize(stream));
  const int64_t tiles = tiles32;
  require(tiles >= 0, "index.tile_offsets[last] must be >= 0, got ", tiles);

  const int entry_bits = std::max(1, static_cast<int>(std::bit_width(uint64_t(group) * uint64_t(index.q_blocks) * 2u)));
  const int segment_bits = std::max(1, static_cast<int>(std::bit_width(uint64_t(segments))));
  require(entry_bits + segment_bits <= 64 && entry_bits <= 31, "backward index keys do not fit 64 bits (", entry_bits,
          " + ", segment_bits, ")");

  size_t sort_bytes = 0;
  size_t scan_bytes = 0;
  SPARSERING_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(nullptr, sort_bytes, static_cast<const uint64_t*>(nullptr),
                                                       static_cast<uint64_t*>(nullptr), tiles, 0,
                                                       entry_bits + segment_bits, stream));
  SPARSERING_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<const int32_t*>(nullptr),
                                                      static_cast<int32_t*>(nullptr), segments + 1, stream));
  const size_t keys_bytes = align_up(static_cast<size_t>(tiles) * 8);
  const size_t counts_bytes = align_up(static_cast<size_t>(segments + 1) * 4);
  const size_t entries_bytes = align_up(static_cast<size_t>(tiles) * 4);
  const size_t temp_bytes = align_up(std::max(sort_bytes, scan_bytes));
  // Layout: offsets | entries | keys | sorted keys | counts | cub temp. The view keeps the first two.
  auto storage = std::make_unique<StreamBuffer>(counts_bytes + entries_bytes + 2 * keys_bytes + counts_bytes + temp_bytes,
                                                stream);
  unsigned char* base = storage->as<unsigned char>();
  int32_t* offsets = reinterpret_cast<int32_t*>(base);
  int32_t* entries = reinterpret_cast<int32_t*>(base + counts_bytes);
  uint64_t* keys = reinterpret_cast<uint64_t*>(base + counts_bytes + entries_bytes);
  uint64_t* sorted = reinterpret_cast<uint64_t*>(base + counts_bytes + entries_bytes + keys_bytes);
  int32_t* counts = reinterpret_cast<int32_t*>(base + counts_bytes + entries_bytes + 2 * keys_bytes);
  void* temp = base + 2 * counts_bytes + entries_bytes + 2 * keys_bytes;

  SPARSERING_CUDA_CHECK(cudaMemsetAsync(counts, 0, static_cast<size_t>(segments + 1) * 4, stream));
  if (tiles > 0) {
    const int64_t blocks = (lists * 32 + kTransposeThreads - 1) / kTransposeThreads;
    sparse_index_transpose_keys_kernel<<<static_cast<unsigned>(blocks), kTransposeThreads, 0, stream>>>(
        index, shape.q_heads, group, static_cast<int32_t>(key_blocks), entry_bits, keys, counts);
    SPARSERING_CUDA_CHECK(cudaGetLastError());
    SPARSERING_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(temp, sort_bytes, keys, sorted, tiles, 0,
                                                         entry_bits + segment_bits, stream));
    const int64_t entry_blocks = (tiles + kTransposeThreads - 1) / kTransposeThreads;
    sparse_index_transpose_entries_kernel<<<static_cast<unsigned>(entry_blocks), kTransposeThreads, 0, stream>>>(
        sorted, tiles, (uint64_t{1} << entry_bits) - 1, entries);
    SPARSERING_CUDA_CHECK(cudaGetLastError());
  }
  SPARSERING_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp, scan_bytes, counts, offsets, segments + 1, stream));

  TransposedIndex result;
  result.view.segments = static_cast<int32_t>(segments);
  result.view.key_blocks = static_cast<int32_t>(key_blocks);
  result.view.group = group;
  result.view.q_blocks = index.q_blocks;
  result.view.offsets = offsets;
  result.view.entries = entries;
  result.storage = std::move(storage);
  return result;
}

}  // namespace sparsering
