// Transposition of the sparse tile index for the backward pass (see sparse_index_transpose.hpp):
// device code, launcher. A counting sort that needs no host round trip. The lists of one KV
// group are cut into chunks of consecutive lists; every (segment, chunk) pair gets a counter.
//   1. count: each tile adds one to its (segment, chunk) counter;
//   2. an exclusive scan over the counters in (segment, chunk) order gives every pair its first
//      slot, and each segment's first slot is its CSR offset;
//   3. fill: one CTA per (group, chunk) walks the chunk's lists in order and hands each tile the
//      next slot of its (segment, chunk) pair.
// Entries of a segment thus come in list order, which is ascending (head in group, query block):
// the same order every run.
//   4. the segments' lengths (from step 2's slots) sorted descending by a stable CUB radix sort
//      over the bits a length can have give the key-block pass's CTA order.
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
constexpr int kFillThreads = 128;
/// Lists per chunk: at least this many, more when the counters would pass kMaxCounters.
constexpr int64_t kMinChunkLists = 16;
constexpr int64_t kMaxCounters = int64_t{1} << 22;

/// Where lists and tiles go: list l = row * q_blocks + i with row = b * Hq + h, so the lists of
/// KV group (b, hk) are the group_lists consecutive lists from group * group_lists.
struct TransposeGeometry {
  int32_t key_blocks = 0;
  int32_t group_lists = 0;  ///< (Hq / Hkv) * q_blocks
  int32_t chunk_lists = 0;
  int32_t chunks = 0;       ///< per group: ceil(group_lists / chunk_lists)
  int64_t max_tiles = 0;    ///< entries the output holds

  __device__ int64_t counter(int64_t list, int32_t key_block) const {
    const int64_t group = list / group_lists;
    const int64_t chunk = (list % group_lists) / chunk_lists;
    return (group * key_blocks + key_block) * chunks + chunk;
  }
};

/// One warp per list: each tile adds one to its (segment, chunk) counter.
__global__ void __launch_bounds__(kTransposeThreads)
    transpose_count_kernel(const SparseIndexView index, const TransposeGeometry g, int32_t* counters) {
  const int64_t list = (int64_t{blockIdx.x} * kTransposeThreads + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (list >= int64_t{index.rows} * index.q_blocks) return;
  const int64_t end = min(int64_t{index.tile_offsets[list + 1]}, g.max_tiles);
  for (int64_t t = index.tile_offsets[list] + lane; t < end; t += 32) atomicAdd(counters + g.counter(list, index.tile_block[t]), 1);
}

/// offsets[s] = first slot of (segment s, chunk 0); offsets[segments] = slots[segments * chunks] =
/// tiles; and each segment's length and number, the keys and values of the CTA-order sort.
__global__ void __launch_bounds__(kTransposeThreads)
    transpose_offsets_kernel(const int32_t* slots, int64_t segments, int32_t chunks, int32_t* offsets,
                             int32_t* lengths, int32_t* numbers) {
  const int64_t s = int64_t{blockIdx.x} * kTransposeThreads + threadIdx.x;
  if (s > segments) return;
  offsets[s] = slots[s * chunks];
  if (s < segments) {
    lengths[s] = slots[(s + 1) * chunks] - slots[s * chunks];
    numbers[s] = static_cast<int32_t>(s);
  }
}

/// One CTA per (group, chunk): the chunk's lists one after another, each tile taking the next
/// slot of its (segment, chunk) pair. A list holds a key block once, so within a list no two
/// tiles share a pair; the barrier between lists keeps list order.
__global__ void __launch_bounds__(kFillThreads)
    transpose_fill_kernel(const SparseIndexView index, const TransposeGeometry g, int32_t* slots, int32_t* entries) {
  const int64_t group = blockIdx.x / g.chunks;
  const int32_t chunk = static_cast<int32_t>(blockIdx.x % g.chunks);
  const int32_t first = chunk * g.chunk_lists;
  const int32_t last = min(first + g.chunk_lists, g.group_lists);
  for (int32_t in_group = first; in_group < last; ++in_group) {
    const int64_t list = group * g.group_lists + in_group;
    // Entry code (g * q_blocks + i) * 2 + masked: the list's place in its group, twice.
    const int32_t code = in_group * 2;
    const int64_t end = min(int64_t{index.tile_offsets[list + 1]}, g.max_tiles);
    for (int64_t t = index.tile_offsets[list] + static_cast<int64_t>(threadIdx.x); t < end; t += kFillThreads) {
      const int32_t slot = atomicAdd(slots + g.counter(list, index.tile_block[t]), 1);
      if (slot < g.max_tiles) entries[slot] = code + (index.tile_masked[t] != 0 ? 1 : 0);
    }
    __syncthreads();
  }
}

size_t align_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

/// The index's tile count read from the device, for a view that does not bound it.
int64_t read_tile_count(const SparseIndexView& index, cudaStream_t stream) {
  int32_t tiles = 0;
  const int64_t lists = int64_t{index.rows} * index.q_blocks;
  SPARSERING_CUDA_CHECK(cudaMemcpyAsync(&tiles, index.tile_offsets + lists, sizeof tiles, cudaMemcpyDeviceToHost, stream));
  SPARSERING_CUDA_CHECK(cudaStreamSynchronize(stream));
  require(tiles >= 0, "index.tile_offsets[last] must be >= 0, got ", tiles);
  return tiles;
}

}  // namespace

TransposedIndex launch_sparse_index_transpose(const SparseIndexView& index, const AttentionShape& shape,
                                              cudaStream_t stream) {
  const int32_t group = shape.q_heads / shape.kv_heads;
  const int64_t key_blocks = (shape.kv_len + index.block_k - 1) / index.block_k;
  const int64_t segments = int64_t{shape.batch} * shape.kv_heads * key_blocks;
  const int64_t group_lists = int64_t{group} * index.q_blocks;
  require(segments < (int64_t{1} << 31), "too many key blocks for the backward index: ", segments);
  require(group_lists * 2 < (int64_t{1} << 31), "too many query blocks per KV group for the backward index: ",
          group_lists);
  require(index.max_tiles >= 0 && index.max_tiles < (int64_t{1} << 31),
          "index.max_tiles must be in [0, 2^31), got ", index.max_tiles);

  TransposeGeometry g;
  g.key_blocks = static_cast<int32_t>(key_blocks);
  g.group_lists = static_cast<int32_t>(group_lists);
  int64_t chunk_lists = std::max<int64_t>(1, std::min(kMinChunkLists, group_lists));
  while (chunk_lists < group_lists && segments * ((group_lists + chunk_lists - 1) / chunk_lists) > kMaxCounters) {
    chunk_lists *= 2;
  }
  g.chunk_lists = static_cast<int32_t>(chunk_lists);
  g.chunks = static_cast<int32_t>(std::max<int64_t>(1, (group_lists + chunk_lists - 1) / chunk_lists));
  g.max_tiles = index.max_tiles > 0 ? index.max_tiles : read_tile_count(index, stream);
  const int64_t counters = segments * g.chunks + 1;  // the last one stays 0: its slot is the total

  // A segment holds at most one entry per list of its group: its length has this many bits.
  const int length_bits = std::max(1, static_cast<int>(std::bit_width(static_cast<uint64_t>(group_lists))));
  size_t scan_bytes = 0;
  SPARSERING_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<const int32_t*>(nullptr),
                                                      static_cast<int32_t*>(nullptr), counters, stream));
  size_t sort_bytes = 0;
  SPARSERING_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
      nullptr, sort_bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), segments, 0, length_bits, stream));
  const size_t offsets_bytes = align_up(static_cast<size_t>(segments + 1) * 4);
  const size_t entries_bytes = align_up(static_cast<size_t>(std::max<int64_t>(g.max_tiles, 1)) * 4);
  const size_t segment_bytes = align_up(static_cast<size_t>(std::max<int64_t>(segments, 1)) * 4);
  const size_t counters_bytes = align_up(static_cast<size_t>(counters) * 4);
  // Layout: offsets | entries | order | counters | slots | lengths | sorted lengths | numbers |
  // cub temp. The view keeps the first three.
  auto storage = std::make_unique<StreamBuffer>(offsets_bytes + entries_bytes + 4 * segment_bytes +
                                                    2 * counters_bytes + align_up(std::max(scan_bytes, sort_bytes)),
                                                stream);
  unsigned char* cursor = storage->as<unsigned char>();
  const auto take = [&](size_t bytes) {
    unsigned char* at = cursor;
    cursor += bytes;
    return at;
  };
  int32_t* offsets = reinterpret_cast<int32_t*>(take(offsets_bytes));
  int32_t* entries = reinterpret_cast<int32_t*>(take(entries_bytes));
  int32_t* order = reinterpret_cast<int32_t*>(take(segment_bytes));
  int32_t* counts = reinterpret_cast<int32_t*>(take(counters_bytes));
  int32_t* slots = reinterpret_cast<int32_t*>(take(counters_bytes));
  int32_t* lengths = reinterpret_cast<int32_t*>(take(segment_bytes));
  int32_t* sorted_lengths = reinterpret_cast<int32_t*>(take(segment_bytes));
  int32_t* numbers = reinterpret_cast<int32_t*>(take(segment_bytes));
  void* temp = cursor;

  const int64_t lists = int64_t{index.rows} * index.q_blocks;
  SPARSERING_CUDA_CHECK(cudaMemsetAsync(counts, 0, static_cast<size_t>(counters) * 4, stream));
  if (lists > 0) {
    const int64_t blocks = (lists * 32 + kTransposeThreads - 1) / kTransposeThreads;
    transpose_count_kernel<<<static_cast<unsigned>(blocks), kTransposeThreads, 0, stream>>>(index, g, counts);
    SPARSERING_CUDA_CHECK(cudaGetLastError());
  }
  SPARSERING_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp, scan_bytes, counts, slots, counters, stream));
  const int64_t offset_blocks = (segments + 1 + kTransposeThreads - 1) / kTransposeThreads;
  transpose_offsets_kernel<<<static_cast<unsigned>(offset_blocks), kTransposeThreads, 0, stream>>>(
      slots, segments, g.chunks, offsets, lengths, numbers);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
  if (segments > 0) {
    SPARSERING_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(temp, sort_bytes, lengths, sorted_lengths, numbers,
                                                                    order, segments, 0, length_bits, stream));
  }
  const int64_t fill_blocks = int64_t{shape.batch} * shape.kv_heads * g.chunks;
  if (lists > 0 && fill_blocks > 0) {
    require(fill_blocks < (int64_t{1} << 31), "too many list chunks for the backward index: ", fill_blocks);
    transpose_fill_kernel<<<static_cast<unsigned>(fill_blocks), kFillThreads, 0, stream>>>(index, g, slots, entries);
    SPARSERING_CUDA_CHECK(cudaGetLastError());
  }

  TransposedIndex result;
  result.view.segments = static_cast<int32_t>(segments);
  result.view.key_blocks = static_cast<int32_t>(key_blocks);
  result.view.group = group;
  result.view.q_blocks = index.q_blocks;
  result.view.offsets = offsets;
  result.view.entries = entries;
  result.view.order = order;
  result.storage = std::move(storage);
  return result;
}

}  // namespace sparsering
