// GPU index build (see sparse_index_build.hpp): device code and launcher.
//   1. one CTA per row merges its kept slash offsets (plus 0) into disjoint intervals;
//   2. one CTA per (row, query block), run twice (count, then fill at scanned offsets), marks in a
//      shared-memory bitmap the key blocks each (query run, slash interval) pair touches: the
//      query block's global positions form runs of consecutive tokens, a run [a, b] and offsets
//      [lo, hi] reach keys with global positions [a - hi, b - lo], whose local positions form one
//      range (local order follows global order on every layout) found in O(1) per layout;
//      tiles are the set bits (masked when the block's first query precedes the block's last
//      key); columns are the kept keys of this K/V chunk that some query of the block sees and
//      no tile covers, in ascending order (CUB block scans keep the order).
// Tested in tests/kernels_gpu/sparse_index_build_test.cpp against build_sparse_index.
#include "kernels/cuda/sparse_index_build.hpp"

#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include "common/error.hpp"
#include "kernels/cuda/attention_checks.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace sparsering {
namespace {

constexpr int kBuildThreads = 256;
constexpr int kMaxKeyBlocks = 1 << 18;

/// Number of local keys of `rank` whose global position is < g (any integer g), in O(1).
__device__ __forceinline__ int64_t keys_below(const TokenLayout& layout, int32_t rank, int64_t g) {
  const int64_t local = layout.local_len();
  auto clamp = [](int64_t x, int64_t hi) { return x < 0 ? int64_t{0} : (x > hi ? hi : x); };
  switch (layout.kind()) {
    case LayoutKind::zigzag: {
      const int64_t half = layout.seq_len_tokens() / (2 * int64_t{layout.ranks()});
      return clamp(g - rank * half, half) + clamp(g - (2 * int64_t{layout.ranks()} - 1 - rank) * half, half);
    }
    case LayoutKind::striped: {
      const int64_t stripe_len = layout.granularity_tokens();
      if (g <= 0) return 0;
      const int64_t stripe = g / stripe_len;  // stripe holding g (g >= 0)
      // Own stripes rank + m W with m >= 0 entirely below g: those with index < stripe.
      const int64_t full = stripe - rank <= 0 ? 0 : (stripe - rank - 1) / layout.ranks() + 1;
      int64_t count = full * stripe_len;
      if (stripe >= rank && (stripe - rank) % layout.ranks() == 0) count += g - stripe * stripe_len;
      return clamp(count, local);
    }
    case LayoutKind::contiguous:
    default:
      return clamp(g - rank * local, local);
  }
}

/// Step 1: intervals[row] = merged (kept offsets U {0}); lo/hi arrays (rows, capacity + 1).
__global__ void __launch_bounds__(kBuildThreads)
    merge_slash_intervals_kernel(const KeptSetsView kept, int32_t* interval_count, int32_t* lo, int32_t* hi) {
  using Scan = cub::BlockScan<int, kBuildThreads>;
  __shared__ typename Scan::TempStorage temp;
  __shared__ int carry;
  const int row = static_cast<int>(blockIdx.x);
  const int32_t* offsets = kept.slash_offsets + int64_t{row} * kept.capacity;
  const int n = kept.slash_count[row];
  const bool has_zero = n > 0 && offsets[0] == 0;
  const int total = n + (has_zero ? 0 : 1);  // the list with 0 prepended when absent
  auto value = [&](int e) { return has_zero ? offsets[e] : (e == 0 ? 0 : offsets[e - 1]); };
  const int64_t stride = int64_t{kept.capacity} + 1;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int base = 0; base < total; base += kBuildThreads) {
    const int e = base + static_cast<int>(threadIdx.x);
    const bool start = e < total && (e == 0 || value(e) != value(e - 1) + 1);
    const bool end = e < total && (e == total - 1 || value(e + 1) != value(e) + 1);
    int rank;
    int chunk_starts;
    Scan(temp).ExclusiveSum(start ? 1 : 0, rank, chunk_starts);
    const int index = carry + rank;  // interval index of a start; a run's end belongs to the last start
    if (start) lo[row * stride + index] = value(e);
    __syncthreads();
    if (end) {
      // The interval this end closes is the number of starts at or before e, minus one.
      int starts_before = carry + rank + (start ? 1 : 0) - 1;
      hi[row * stride + starts_before] = value(e);
    }
    __syncthreads();
    if (threadIdx.x == 0) carry += chunk_starts;
    __syncthreads();
  }
  if (threadIdx.x == 0) interval_count[row] = carry;
}

struct BuildGeometry {
  RingPosition position;
  int32_t block_q;
  int32_t block_k;
  int32_t q_blocks;
  int32_t key_blocks;
  int64_t len;  // local length (q_len = kv_len)
};

/// Step 2: CTA per (row, query block). kFill = false: writes the list's tile and column counts;
/// true: writes the lists at tile_offsets / column_offsets.
template <bool kFill>
__global__ void __launch_bounds__(kBuildThreads)
    build_sparse_index_kernel(const KeptSetsView kept, const BuildGeometry g, const int32_t* interval_count,
                              const int32_t* interval_lo, const int32_t* interval_hi, int32_t* tile_counts,
                              int32_t* column_counts, const int32_t* tile_offsets, int32_t* tile_block,
                              uint8_t* tile_masked, const int32_t* column_offsets, int32_t* column_index) {
  using Scan = cub::BlockScan<int, kBuildThreads>;
  __shared__ typename Scan::TempStorage temp;
  __shared__ int carry;
  __shared__ int run_count;
  extern __shared__ __align__(16) unsigned char smem[];
  const int words = (g.key_blocks + 31) / 32;
  uint32_t* bitmap = reinterpret_cast<uint32_t*>(smem);
  int64_t* run_lo = reinterpret_cast<int64_t*>(smem + ((words * 4 + 15) / 16) * 16);
  int64_t* run_hi = run_lo + g.block_q;

  const int row = static_cast<int>(blockIdx.y);
  const int q_block = static_cast<int>(blockIdx.x);
  const int64_t list = int64_t{row} * g.q_blocks + q_block;
  const TokenLayout& layout = g.position.layout;
  const int32_t q_rank = g.position.q_rank;
  const int32_t kv_rank = g.position.kv_rank;
  const int64_t q_first = int64_t{q_block} * g.block_q;
  const int q_count = static_cast<int>(min(int64_t{g.block_q}, g.len - q_first));

  for (int w = static_cast<int>(threadIdx.x); w < words; w += kBuildThreads) bitmap[w] = 0;
  // Runs of consecutive global positions among the block's queries (block_q <= kBuildThreads x 4).
  if (threadIdx.x == 0) {
    carry = 0;
    run_count = 0;
  }
  __syncthreads();
  for (int base = 0; base < q_count; base += kBuildThreads) {
    const int t = base + static_cast<int>(threadIdx.x);
    const int64_t global = t < q_count ? layout.global_token(q_rank, q_first + t) : 0;
    const bool start = t < q_count && (t == 0 || layout.global_token(q_rank, q_first + t - 1) != global - 1);
    const bool end = t < q_count && (t == q_count - 1 || layout.global_token(q_rank, q_first + t + 1) != global + 1);
    int rank;
    int chunk_starts;
    Scan(temp).ExclusiveSum(start ? 1 : 0, rank, chunk_starts);
    if (start) run_lo[carry + rank] = global;
    if (end) run_hi[carry + rank + (start ? 1 : 0) - 1] = global;
    __syncthreads();
    if (threadIdx.x == 0) {
      carry += chunk_starts;
      run_count = carry;
    }
    __syncthreads();
  }
  const int runs = run_count;
  const int64_t q_min = layout.global_token(q_rank, q_first);
  const int64_t q_max = layout.global_token(q_rank, q_first + q_count - 1);

  // Tiles: mark the key blocks every (run, interval) pair reaches.
  const int intervals = interval_count[row];
  const int64_t stride = int64_t{kept.capacity} + 1;
  const int64_t pairs = int64_t{runs} * intervals;
  for (int64_t pr = threadIdx.x; pr < pairs; pr += kBuildThreads) {
    const int r = static_cast<int>(pr % runs);
    const int iv = static_cast<int>(pr / runs);
    const int64_t lo = interval_lo[row * stride + iv];
    const int64_t hi = interval_hi[row * stride + iv];
    const int64_t first = keys_below(layout, kv_rank, run_lo[r] - hi);
    const int64_t last = keys_below(layout, kv_rank, run_hi[r] - lo + 1) - 1;
    if (last < first) continue;
    const int j0 = static_cast<int>(first / g.block_k);
    const int j1 = static_cast<int>(last / g.block_k);
    for (int w = j0 / 32; w <= j1 / 32; ++w) {
      const int from = max(j0, w * 32) - w * 32;
      const int to = min(j1, w * 32 + 31) - w * 32;
      const uint32_t mask = (to - from == 31) ? 0xffffffffu : (((1u << (to - from + 1)) - 1u) << from);
      atomicOr(&bitmap[w], mask);
    }
  }
  __syncthreads();

  // Tile list: set bits in order (a block-wide scan over words keeps them ascending).
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int base = 0; base < words; base += kBuildThreads) {
    const int w = base + static_cast<int>(threadIdx.x);
    const uint32_t bits = w < words ? bitmap[w] : 0u;
    int rank;
    int chunk_total;
    Scan(temp).ExclusiveSum(__popc(bits), rank, chunk_total);
    if (kFill) {
      int at = tile_offsets[list] + carry + rank;
      for (uint32_t rest = bits; rest != 0u; rest &= rest - 1u) {
        const int j = w * 32 + __ffs(static_cast<int>(rest)) - 1;
        const int64_t last_key = min(int64_t{j + 1} * g.block_k, g.len) - 1;
        tile_block[at] = j;
        tile_masked[at] = q_min < layout.global_token(kv_rank, last_key) ? 1 : 0;
        ++at;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) carry += chunk_total;
    __syncthreads();
  }
  if (!kFill && threadIdx.x == 0) tile_counts[list] = carry;

  // Columns: kept keys held in this chunk, visible to the block, outside every tile.
  const int32_t* keys = kept.vertical_keys + int64_t{row} * kept.capacity;
  const int n_keys = kept.vertical_count[row];
  __syncthreads();
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int base = 0; base < n_keys; base += kBuildThreads) {
    const int e = base + static_cast<int>(threadIdx.x);
    int64_t local = -1;
    if (e < n_keys && keys[e] <= q_max) {
      const TokenOwner owner = layout.owner(keys[e]);
      if (owner.ring_rank == kv_rank) {
        const int j = static_cast<int>(owner.local_index / g.block_k);
        if ((bitmap[j / 32] >> (j % 32) & 1u) == 0u) local = owner.local_index;
      }
    }
    int rank;
    int chunk_total;
    Scan(temp).ExclusiveSum(local >= 0 ? 1 : 0, rank, chunk_total);
    if (kFill && local >= 0) column_index[column_offsets[list] + carry + rank] = static_cast<int32_t>(local);
    __syncthreads();
    if (threadIdx.x == 0) carry += chunk_total;
    __syncthreads();
  }
  if (!kFill && threadIdx.x == 0) column_counts[list] = carry;
}

}  // namespace

DeviceSparseIndex launch_build_sparse_index(const KeptSetsView& kept, const RingPosition& position, int32_t block_q,
                                            int32_t block_k, cudaStream_t stream) {
  const TokenLayout& layout = position.layout;
  require(layout.seq_len_tokens() < (int64_t{1} << 31), "layout.seq_len_tokens must be < 2^31, got ",
          layout.seq_len_tokens());
  require(position.q_rank >= 0 && position.q_rank < layout.ranks() && position.kv_rank >= 0 &&
              position.kv_rank < layout.ranks(),
          "position ranks (", position.q_rank, ", ", position.kv_rank, ") must be in [0, ", layout.ranks(), ")");
  require(block_q >= 1 && block_q <= 4 * kBuildThreads, "block_q must be in [1, ", 4 * kBuildThreads, "], got ",
          block_q);
  require(block_k >= 1, "block_k must be >= 1, got ", block_k);
  require(kept.rows >= 0 && kept.capacity >= 1, "kept sets need rows >= 0 and capacity >= 1, got ", kept.rows, ", ",
          kept.capacity);
  const int64_t len = layout.local_len();
  const int64_t key_blocks = (len + block_k - 1) / block_k;
  require(key_blocks <= kMaxKeyBlocks, "too many key blocks for the GPU index build: ", key_blocks);
  DeviceSparseIndex index;
  index.rows = kept.rows;
  index.block_q = block_q;
  index.block_k = block_k;
  index.q_blocks = static_cast<int32_t>((len + block_q - 1) / block_q);
  require(index.q_blocks <= 65535 && kept.rows <= 65535, "too many query blocks or rows for one launch");
  const int64_t lists = int64_t{kept.rows} * index.q_blocks;
  index.tile_offsets = DeviceBuffer<int32_t>(static_cast<size_t>(lists + 1));
  index.column_offsets = DeviceBuffer<int32_t>(static_cast<size_t>(lists + 1));
  if (lists == 0) {
    index.tile_offsets.fill_bytes(0);
    index.column_offsets.fill_bytes(0);
    index.tile_block = DeviceBuffer<int32_t>(1);
    index.tile_masked = DeviceBuffer<uint8_t>(1);
    index.column_index = DeviceBuffer<int32_t>(1);
    return index;
  }
  check_device_pointer(kept.vertical_count, 4, "kept.vertical_count");
  check_device_pointer(kept.vertical_keys, 4, "kept.vertical_keys");
  check_device_pointer(kept.slash_count, 4, "kept.slash_count");
  check_device_pointer(kept.slash_offsets, 4, "kept.slash_offsets");

  const int64_t stride = int64_t{kept.capacity} + 1;
  StreamBuffer scratch(static_cast<size_t>(kept.rows) * static_cast<size_t>(stride) * 8 +
                           static_cast<size_t>(kept.rows) * 4 + static_cast<size_t>(lists + 1) * 8 + 1024,
                       stream);
  int32_t* interval_lo = scratch.as<int32_t>();
  int32_t* interval_hi = interval_lo + kept.rows * stride;
  int32_t* interval_count = interval_hi + kept.rows * stride;
  int32_t* tile_counts = interval_count + kept.rows;
  int32_t* column_counts = tile_counts + lists + 1;
  SPARSERING_CUDA_CHECK(cudaMemsetAsync(tile_counts, 0, static_cast<size_t>(lists + 1) * 8, stream));

  merge_slash_intervals_kernel<<<static_cast<unsigned>(kept.rows), kBuildThreads, 0, stream>>>(
      kept, interval_count, interval_lo, interval_hi);
  SPARSERING_CUDA_CHECK(cudaGetLastError());

  BuildGeometry geometry{position, block_q, block_k, index.q_blocks, static_cast<int32_t>(key_blocks), len};
  const size_t smem = static_cast<size_t>((key_blocks + 31) / 32 * 4 + 15) / 16 * 16 + static_cast<size_t>(block_q) * 16;
  SPARSERING_CUDA_CHECK(cudaFuncSetAttribute(build_sparse_index_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem)));
  SPARSERING_CUDA_CHECK(cudaFuncSetAttribute(build_sparse_index_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>(index.q_blocks), static_cast<unsigned>(kept.rows));
  build_sparse_index_kernel<false><<<grid, kBuildThreads, smem, stream>>>(
      kept, geometry, interval_count, interval_lo, interval_hi, tile_counts, column_counts, nullptr, nullptr, nullptr,
      nullptr, nullptr);
  SPARSERING_CUDA_CHECK(cudaGetLastError());

  size_t scan_bytes = 0;
  SPARSERING_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, tile_counts, index.tile_offsets.data(),
                                                      lists + 1, stream));
  StreamBuffer scan_temp(scan_bytes, stream);
  SPARSERING_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(scan_temp.as<void>(), scan_bytes, tile_counts,
                                                      index.tile_offsets.data(), lists + 1, stream));
  SPARSERING_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(scan_temp.as<void>(), scan_bytes, column_counts,
                                                      index.column_offsets.data(), lists + 1, stream));
  int32_t totals[2] = {0, 0};
  SPARSERING_CUDA_CHECK(cudaMemcpyAsync(&totals[0], index.tile_offsets.data() + lists, 4, cudaMemcpyDeviceToHost, stream));
  SPARSERING_CUDA_CHECK(cudaMemcpyAsync(&totals[1], index.column_offsets.data() + lists, 4, cudaMemcpyDeviceToHost, stream));
  SPARSERING_CUDA_CHECK(cudaStreamSynchronize(stream));
  index.tiles = totals[0];
  index.columns = totals[1];
  index.tile_block = DeviceBuffer<int32_t>(static_cast<size_t>(index.tiles > 0 ? index.tiles : 1));
  index.tile_masked = DeviceBuffer<uint8_t>(static_cast<size_t>(index.tiles > 0 ? index.tiles : 1));
  index.column_index = DeviceBuffer<int32_t>(static_cast<size_t>(index.columns > 0 ? index.columns : 1));
  build_sparse_index_kernel<true><<<grid, kBuildThreads, smem, stream>>>(
      kept, geometry, interval_count, interval_lo, interval_hi, nullptr, nullptr, index.tile_offsets.data(),
      index.tile_block.data(), index.tile_masked.data(), index.column_offsets.data(), index.column_index.data());
  SPARSERING_CUDA_CHECK(cudaGetLastError());
  return index;
}

}  // namespace sparsering
