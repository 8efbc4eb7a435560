// GPU index build (see sparse_index_build.hpp): device code and launchers.
//   1. prepare (CTA per row): the kept slash offsets (plus 0) merged into disjoint intervals, and
//      the row's kept vertical keys that this K/V chunk holds, as ascending local positions; on
//      aligned geometries (below) also the row's table of block diagonals;
//   2. count (CTA per (row, query block)): marks in a shared-memory bitmap the key blocks each
//      (query run, slash interval) pair touches: the query block's global positions form runs of
//      consecutive tokens, a run [a, b] and offsets [lo, hi] reach keys with global positions
//      [a - hi, b - lo], whose local positions form one range (local order follows global order
//      on every layout) found in O(1) per layout. Aligned geometries skip that walk over the
//      intervals: when block_q = block_k = B and every block is one run of B consecutive tokens
//      starting at a multiple of B (the layout's runs are whole blocks), query block [qs, qs + B)
//      and key block [ks, ks + B) reach exactly the offsets within B - 1 of qs - ks, so the tile
//      is bit d = (qs - ks) / B of the row's diagonal table ("some kept offset lies within B - 1
//      of d B"), and a run of consecutive key blocks reads the table backwards: a bitmap word
//      costs one funnel shift and one bit reversal per run it meets. Tiles are the set bits;
//      columns are the kept keys this block's queries may see (a prefix of the ascending local
//      keys) outside every tile: the prefix's length less the keys under each tile, read off a
//      per-row table of the keys before each key block. Writes both counts and keeps the bitmap
//      in global scratch;
//   3. two device-wide scans (64-bit) of the counts, then a finalize kernel that writes the int32
//      offsets clamped to the arrays' capacity and the totals the build needed (device memory);
//   4. fill (CTA per (row, query block)): reads the count pass's bitmap (or marks it again when
//      the bitmaps would take too much scratch) and writes the tile list (masked when the block's
//      first query precedes the block's last key) and the column list, both ascending (CUB block
//      scans keep the order), never past the next list's clamped offset. Entries are compacted
//      in shared memory first, so consecutive threads write consecutive entries.
// Nothing here reads device memory on the host: launch_build_sparse_index_into queues all of it;
// launch_build_sparse_index reads the totals once between steps 3 and 4 to allocate exact arrays.
// Tested in tests/kernels_gpu/sparse_index_build_test.cpp against build_sparse_index.
#include "kernels/cuda/sparse_index_build.hpp"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <bit>
#include <optional>

#include "common/error.hpp"
#include "kernels/cuda/attention_checks.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace sparsering {
namespace {

// 128 threads per (row, query block) CTA: the lists are short, so more CTAs per SM (16) hide the
// few dependent global loads each list needs.
constexpr int kBuildThreads = 128;
constexpr int kMaxBlockQ = 1024;
constexpr int kMaxKeyBlocks = 1 << 18;
constexpr int kColumnItems = 16;  // kept keys per thread per step of the column lists
constexpr int kColumnStep = kBuildThreads * kColumnItems;
/// Entries the fill pass compacts in shared memory before writing them: the tiles of one step of
/// kBuildThreads bitmap words, or the columns of one step of kColumnStep keys.
constexpr int kStageEntries = kBuildThreads * 32;
static_assert(kColumnStep <= kStageEntries);

/// Number of local keys of `rank` whose global position is < g (any integer g), in O(1).
__host__ __device__ __forceinline__ int64_t keys_below(const TokenLayout& layout, int32_t rank, int64_t g) {
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

struct BuildGeometry {
  RingPosition position;
  int32_t block_q;
  int32_t block_k;
  int32_t q_blocks;
  int32_t key_blocks;
  int32_t words;  // bitmap words per list
  int64_t len;    // local length (q_len = kv_len)
  /// Blocks per run of consecutive global positions when the geometry is aligned (block_q =
  /// block_k and the layout's runs are whole blocks, each starting at a multiple of the block),
  /// else 0.
  int32_t run_blocks;
  int32_t block_k_shift;  // log2(block_k) when block_k is a power of 2, else -1

  /// Key block of local key `key` (a shift for the usual power-of-2 blocks: no division).
  __device__ __forceinline__ int key_block(int32_t key) const {
    return block_k_shift >= 0 ? key >> block_k_shift : key / block_k;
  }
};

/// Entries of the ascending `keys[0, n)` that are < value.
__device__ __forceinline__ int keys_before(const int32_t* keys, int n, int64_t value) {
  int lo = 0;
  int hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (keys[mid] < value) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/// Local tokens per run of consecutive global positions; runs start at multiples of this length
/// in both local and global positions (contiguous: the chunk; zigzag: a half; striped: a stripe).
int64_t layout_run_tokens(const TokenLayout& layout) {
  switch (layout.kind()) {
    case LayoutKind::zigzag:
      return layout.seq_len_tokens() / (2 * int64_t{layout.ranks()});
    case LayoutKind::striped:
      return layout.granularity_tokens();
    case LayoutKind::contiguous:
    default:
      return layout.local_len();
  }
}

/// Sets bits first .. last (0 <= first <= last) of a bitmap that other threads mark too.
__device__ __forceinline__ void set_bits(uint32_t* bitmap, int64_t first, int64_t last) {
  for (int64_t w = first / 32; w <= last / 32; ++w) {
    const int from = static_cast<int>(max(first, w * 32) - w * 32);
    const int to = static_cast<int>(min(last, w * 32 + 31) - w * 32);
    atomicOr(&bitmap[w], to - from == 31 ? 0xffffffffu : ((1u << (to - from + 1)) - 1u) << from);
  }
}

/// Bits k = 0 .. count - 1 of the result are diagonals d0, d0 - 1, ..., d0 - count + 1 of a row's
/// table of `words` words (diagonals outside the table read as 0). count in [1, 32].
__device__ __forceinline__ uint32_t diagonals_down(const uint32_t* table, int32_t words, int64_t d0, int count) {
  const int64_t lowest = d0 - 31;
  const int64_t w = lowest >> 5;  // floor division: lowest may be negative
  const int shift = static_cast<int>(lowest & 31);
  auto word = [&](int64_t i) { return i >= 0 && i < words ? table[i] : 0u; };
  const uint64_t pair = (static_cast<uint64_t>(word(w + 1)) << 32) | word(w);
  const uint32_t up = static_cast<uint32_t>(pair >> shift);  // bit b: diagonal lowest + b
  const uint32_t down = __brev(up);                           // bit k: diagonal d0 - k
  return count >= 32 ? down : down & ((1u << count) - 1u);
}

/// Step 1 (CTA per row): intervals[row] = merged (kept offsets U {0}), lo/hi (rows, capacity + 1);
/// keys[row] = the kept vertical keys held by kv_rank as ascending local positions (rows, capacity).
/// kPrepareItems consecutive entries per thread, so one block scan covers a whole list of up to
/// 4096 entries (the default cap).
constexpr int kPrepareThreads = 512;
constexpr int kPrepareItems = 8;
__global__ void __launch_bounds__(kPrepareThreads)
    prepare_rows_kernel(const KeptSetsView kept, const RingPosition position, int32_t* interval_count, int32_t* lo,
                        int32_t* hi, int32_t* key_count, int32_t* key_local, uint32_t* diagonals,
                        int32_t diagonal_words, int32_t block, int32_t* key_blocks_below, int32_t key_blocks) {
  using Scan = cub::BlockScan<int, kPrepareThreads>;
  __shared__ typename Scan::TempStorage temp;
  __shared__ int carry;
  __shared__ int intervals;
  const int row = static_cast<int>(blockIdx.x);
  const int32_t* offsets = kept.slash_offsets + int64_t{row} * kept.capacity;
  const int n = max(0, min(kept.slash_count[row], kept.capacity));
  const bool has_zero = n > 0 && offsets[0] == 0;
  const int total = n + (has_zero ? 0 : 1);  // the list with 0 prepended when absent
  auto value = [&](int e) { return has_zero ? offsets[e] : (e == 0 ? 0 : offsets[e - 1]); };
  const int64_t stride = int64_t{kept.capacity} + 1;
  int32_t* row_lo = lo + row * stride;
  int32_t* row_hi = hi + row * stride;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int base = 0; base < total; base += kPrepareThreads * kPrepareItems) {
    const int first = base + static_cast<int>(threadIdx.x) * kPrepareItems;
    int32_t v[kPrepareItems];
    bool start[kPrepareItems];
    bool end[kPrepareItems];
    int starts = 0;
#pragma unroll
    for (int i = 0; i < kPrepareItems; ++i) {
      const int e = first + i;
      const bool valid = e < total;
      v[i] = valid ? value(e) : 0;
      start[i] = valid && (e == 0 || value(e - 1) != v[i] - 1);
      end[i] = valid && (e == total - 1 || value(e + 1) != v[i] + 1);
      starts += start[i] ? 1 : 0;
    }
    int rank;
    int chunk_starts;
    Scan(temp).ExclusiveSum(starts, rank, chunk_starts);
    int next = carry + rank;  // index of the next interval to start; next - 1 is the open one
#pragma unroll
    for (int i = 0; i < kPrepareItems; ++i) {
      if (start[i]) row_lo[next++] = v[i];
      if (end[i]) row_hi[next - 1] = v[i];
    }
    __syncthreads();
    if (threadIdx.x == 0) carry += chunk_starts;
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    interval_count[row] = carry;
    intervals = carry;
    carry = 0;
  }
  __syncthreads();

  // Diagonal table (zeroed by the launcher): interval [lo, hi] meets the offsets within B - 1 of
  // d B for d from floor(lo / B) to floor((hi + B - 1) / B).
  if (diagonals != nullptr) {
    uint32_t* table = diagonals + int64_t{row} * diagonal_words;
    const int64_t last = int64_t{diagonal_words} * 32 - 1;
    for (int iv = static_cast<int>(threadIdx.x); iv < intervals; iv += kPrepareThreads) {
      // Clamped to the table, so offsets outside [0, N) (a broken kept set) write nothing outside it.
      const int64_t d_lo = max(int64_t{row_lo[iv]}, int64_t{0}) / block;
      const int64_t d_hi = min((int64_t{row_hi[iv]} + block - 1) / block, last);
      if (d_lo <= d_hi) set_bits(table, d_lo, d_hi);
    }
  }

  // Vertical keys of this K/V chunk, in order (local order follows global order).
  const TokenLayout& layout = position.layout;
  const int32_t* keys = kept.vertical_keys + int64_t{row} * kept.capacity;
  const int n_keys = max(0, min(kept.vertical_count[row], kept.capacity));
  int32_t* row_keys = key_local + int64_t{row} * kept.capacity;
  for (int base = 0; base < n_keys; base += kPrepareThreads * kPrepareItems) {
    const int first = base + static_cast<int>(threadIdx.x) * kPrepareItems;
    int32_t local[kPrepareItems];
    int mine = 0;
#pragma unroll
    for (int i = 0; i < kPrepareItems; ++i) {
      local[i] = -1;
      if (first + i < n_keys) {
        const TokenOwner owner = layout.owner(keys[first + i]);
        if (owner.ring_rank == position.kv_rank) {
          local[i] = static_cast<int32_t>(owner.local_index);
          ++mine;
        }
      }
    }
    int rank;
    int chunk_total;
    Scan(temp).ExclusiveSum(mine, rank, chunk_total);
    int at = carry + rank;
#pragma unroll
    for (int i = 0; i < kPrepareItems; ++i) {
      if (local[i] >= 0) row_keys[at++] = local[i];
    }
    __syncthreads();
    if (threadIdx.x == 0) carry += chunk_total;
    __syncthreads();
  }
  if (threadIdx.x == 0) key_count[row] = carry;

  // Per key block j, the row's keys in blocks before j (the count pass's column count).
  if (key_blocks_below != nullptr) {
    int32_t* below = key_blocks_below + int64_t{row} * (key_blocks + 1);
    for (int j = static_cast<int>(threadIdx.x); j <= key_blocks; j += kPrepareThreads) {
      below[j] = keys_before(row_keys, carry, int64_t{j} * block);
    }
  }
}

/// What a (row, query block) CTA needs to know about its queries.
struct ListGeometry {
  int row;
  int64_t list;   // row * q_blocks + query block
  int64_t q_min;  // global position of the block's first query
  int64_t q_max;  // ... of its last query
  int64_t visible_keys;  // local keys of kv_rank with global position <= q_max
};

__device__ ListGeometry list_geometry(const BuildGeometry& g) {
  const int row = static_cast<int>(blockIdx.y);
  const int q_block = static_cast<int>(blockIdx.x);
  const TokenLayout& layout = g.position.layout;
  const int64_t q_first = int64_t{q_block} * g.block_q;
  const int64_t q_last = min(q_first + g.block_q, g.len) - 1;
  ListGeometry lg;
  lg.row = row;
  lg.list = int64_t{row} * g.q_blocks + q_block;
  lg.q_min = layout.global_token(g.position.q_rank, q_first);
  lg.q_max = layout.global_token(g.position.q_rank, q_last);
  lg.visible_keys = keys_below(layout, g.position.kv_rank, lg.q_max + 1);
  return lg;
}

/// Marks the list's key-block bitmap (shared, g.words words) from the row's slash intervals.
/// `run_lo` / `run_hi` are shared arrays of block_q entries. Ends with a barrier.
template <typename Scan>
__device__ void mark_tiles(const BuildGeometry& g, const ListGeometry& lg, int intervals, const int32_t* interval_lo,
                           const int32_t* interval_hi, int64_t interval_stride, uint32_t* bitmap, int64_t* run_lo,
                           int64_t* run_hi, typename Scan::TempStorage& temp, int& carry) {
  const TokenLayout& layout = g.position.layout;
  const int32_t q_rank = g.position.q_rank;
  const int64_t q_first = (lg.list % g.q_blocks) * g.block_q;
  const int q_count = static_cast<int>(min(int64_t{g.block_q}, g.len - q_first));
  for (int w = static_cast<int>(threadIdx.x); w < g.words; w += kBuildThreads) bitmap[w] = 0;
  // Runs of consecutive global positions among the block's queries.
  if (threadIdx.x == 0) carry = 0;
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
    if (threadIdx.x == 0) carry += chunk_starts;
    __syncthreads();
  }
  const int runs = carry;
  const int64_t pairs = int64_t{runs} * intervals;
  for (int64_t pr = threadIdx.x; pr < pairs; pr += kBuildThreads) {
    const int r = static_cast<int>(pr % runs);
    const int iv = static_cast<int>(pr / runs);
    const int64_t lo = interval_lo[lg.row * interval_stride + iv];
    const int64_t hi = interval_hi[lg.row * interval_stride + iv];
    const int64_t first = keys_below(layout, g.position.kv_rank, run_lo[r] - hi);
    const int64_t last = keys_below(layout, g.position.kv_rank, run_hi[r] - lo + 1) - 1;
    if (first <= last) set_bits(bitmap, first / g.block_k, last / g.block_k);
  }
  __syncthreads();
}

struct BuildScratch {
  int64_t interval_stride;  // capacity + 1
  const int32_t* interval_count;
  const int32_t* interval_lo;
  const int32_t* interval_hi;
  const int32_t* key_count;
  const int32_t* key_local;
  int32_t key_stride;  // capacity
  uint32_t* bitmaps;   // (lists, words) or null
  const uint32_t* diagonals;  // (rows, diagonal_words) on aligned geometries, or null
  int32_t diagonal_words;
  const int32_t* key_blocks_below;  // (rows, key_blocks + 1), or null
};

/// The aligned geometries' mark_tiles (BuildGeometry::run_blocks > 0, s.diagonals set): every
/// word of the list's bitmap from the row's diagonal table, one table read per run of
/// consecutive key blocks in the word. Ends with a barrier.
__device__ void mark_tiles_from_diagonals(const BuildGeometry& g, const ListGeometry& lg, const BuildScratch& s,
                                          uint32_t* bitmap) {
  const TokenLayout& layout = g.position.layout;
  const uint32_t* table = s.diagonals + int64_t{lg.row} * s.diagonal_words;
  const int64_t block = g.block_k;
  // Key blocks from the first invisible key on lie after every query of the list: no tiles.
  const int64_t visible_words = (lg.visible_keys + 32 * block - 1) / (32 * block);
  for (int w = static_cast<int>(threadIdx.x); w < g.words; w += kBuildThreads) {
    uint32_t bits = 0;
    if (w < visible_words) {
      const int end = min(32 * w + 32, g.key_blocks);
      for (int j = 32 * w; j < end;) {
        const int run_end = min((j / g.run_blocks + 1) * g.run_blocks, end);
        const int64_t d0 = (lg.q_min - layout.global_token(g.position.kv_rank, int64_t{j} * block)) / block;
        bits |= diagonals_down(table, s.diagonal_words, d0, run_end - j) << (j - 32 * w);
        j = run_end;
      }
    }
    bitmap[w] = bits;
  }
  __syncthreads();
}

/// Dynamic shared memory of the count and fill kernels: bitmap, then run bounds.
__host__ __device__ inline size_t bitmap_smem_bytes(int words) { return (static_cast<size_t>(words) * 4 + 15) / 16 * 16; }

/// Step 2 (CTA per (row, query block)): the list's tile and column counts; the bitmap goes to
/// global scratch when s.bitmaps is set.
__global__ void __launch_bounds__(kBuildThreads)
    count_lists_kernel(const BuildGeometry g, const BuildScratch s, int64_t* tile_counts, int64_t* column_counts) {
  using Scan = cub::BlockScan<int, kBuildThreads>;
  using Reduce = cub::BlockReduce<int, kBuildThreads>;
  __shared__ union {
    typename Scan::TempStorage scan;
    typename Reduce::TempStorage reduce;
  } temp;
  __shared__ int carry;
  extern __shared__ __align__(16) unsigned char smem[];
  uint32_t* bitmap = reinterpret_cast<uint32_t*>(smem);
  int64_t* run_lo = reinterpret_cast<int64_t*>(smem + bitmap_smem_bytes(g.words));
  int64_t* run_hi = run_lo + g.block_q;
  const ListGeometry lg = list_geometry(g);
  // Loaded first: their latency overlaps the query runs' scan.
  const int intervals = s.interval_count[lg.row];
  const int n_keys = s.key_count[lg.row];
  if (s.diagonals != nullptr) {
    mark_tiles_from_diagonals(g, lg, s, bitmap);
  } else {
    mark_tiles<Scan>(g, lg, intervals, s.interval_lo, s.interval_hi, s.interval_stride, bitmap, run_lo, run_hi,
                     temp.scan, carry);
  }

  const int32_t* keys = s.key_local + int64_t{lg.row} * s.key_stride;
  const int tid = static_cast<int>(threadIdx.x);
  if (s.key_blocks_below != nullptr) {
    // Columns = visible keys - visible keys under a tile, two table reads per tile.
    const int32_t* below = s.key_blocks_below + int64_t{lg.row} * (g.key_blocks + 1);
    const int visible = keys_before(keys, n_keys, lg.visible_keys);
    int tiles = 0;
    int covered = 0;
    for (int w = tid; w < g.words; w += kBuildThreads) {
      const uint32_t bits = bitmap[w];
      tiles += __popc(bits);
      if (s.bitmaps != nullptr) s.bitmaps[lg.list * g.words + w] = bits;
      for (uint32_t rest = bits; rest != 0u; rest &= rest - 1u) {
        const int j = w * 32 + __ffs(static_cast<int>(rest)) - 1;
        covered += min(below[j + 1], visible) - min(below[j], visible);
      }
    }
    const int tile_total = Reduce(temp.reduce).Sum(tiles);
    __syncthreads();
    const int covered_total = Reduce(temp.reduce).Sum(covered);
    if (tid == 0) {
      tile_counts[lg.list] = tile_total;
      column_counts[lg.list] = visible - covered_total;
    }
    return;
  }
  int tiles = 0;
  for (int w = tid; w < g.words; w += kBuildThreads) {
    tiles += __popc(bitmap[w]);
    if (s.bitmaps != nullptr) s.bitmaps[lg.list * g.words + w] = bitmap[w];
  }
  const int tile_total = Reduce(temp.reduce).Sum(tiles);
  __syncthreads();
  // Columns: the row's keys held here are ascending, so the visible ones are a prefix; steps of
  // kColumnStep keys, independent loads, stop at the first step that starts past the prefix.
  int columns = 0;
  for (int base = 0; base < n_keys && keys[base] < lg.visible_keys; base += kColumnStep) {
#pragma unroll
    for (int i = 0; i < kColumnItems; ++i) {
      const int e = base + i * kBuildThreads + tid;
      if (e < n_keys) {
        const int32_t key = keys[e];
        const int j = g.key_block(key);
        columns += key < lg.visible_keys && (bitmap[j / 32] >> (j % 32) & 1u) == 0u ? 1 : 0;
      }
    }
  }
  const int column_total = Reduce(temp.reduce).Sum(columns);
  if (tid == 0) {
    tile_counts[lg.list] = tile_total;
    column_counts[lg.list] = column_total;
  }
}

/// Step 3b: int32 offsets clamped to the capacity, and the totals the build needed.
__global__ void finalize_offsets_kernel(int64_t lists, const int64_t* tile_offsets64, const int64_t* column_offsets64,
                                        SparseIndexCapacity capacity, int32_t* tile_offsets, int32_t* column_offsets,
                                        int64_t* needed) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i > lists) return;
  tile_offsets[i] = static_cast<int32_t>(min(tile_offsets64[i], capacity.tiles));
  column_offsets[i] = static_cast<int32_t>(min(column_offsets64[i], capacity.columns));
  if (i == lists) {
    needed[0] = tile_offsets64[lists];
    needed[1] = column_offsets64[lists];
  }
}

/// Step 4 (CTA per (row, query block)): the list's tiles and columns at its offsets.
__global__ void __launch_bounds__(kBuildThreads)
    fill_lists_kernel(const BuildGeometry g, const BuildScratch s, const int32_t* tile_offsets, int32_t* tile_block,
                      uint8_t* tile_masked, const int32_t* column_offsets, int32_t* column_index) {
  using Scan = cub::BlockScan<int, kBuildThreads>;
  __shared__ typename Scan::TempStorage temp;
  __shared__ int carry;
  extern __shared__ __align__(16) unsigned char smem[];
  uint32_t* bitmap = reinterpret_cast<uint32_t*>(smem);
  int64_t* run_lo = reinterpret_cast<int64_t*>(smem + bitmap_smem_bytes(g.words));
  int64_t* run_hi = run_lo + g.block_q;
  int32_t* stage = reinterpret_cast<int32_t*>(run_hi + g.block_q);  // kStageEntries
  const ListGeometry lg = list_geometry(g);
  const TokenLayout& layout = g.position.layout;
  const int tid = static_cast<int>(threadIdx.x);
  // Loaded first, so their latency overlaps the bitmap's.
  const int tile_begin = tile_offsets[lg.list];
  const int tile_end = tile_offsets[lg.list + 1];  // clamped: never past the arrays
  const int column_begin = column_offsets[lg.list];
  const int column_end = column_offsets[lg.list + 1];
  const int n_keys = s.key_count[lg.row];
  if (s.bitmaps != nullptr) {
    for (int w = tid; w < g.words; w += kBuildThreads) bitmap[w] = s.bitmaps[lg.list * g.words + w];
    __syncthreads();
  } else if (s.diagonals != nullptr) {
    mark_tiles_from_diagonals(g, lg, s, bitmap);
  } else {
    mark_tiles<Scan>(g, lg, s.interval_count[lg.row], s.interval_lo, s.interval_hi, s.interval_stride, bitmap, run_lo,
                     run_hi, temp, carry);
  }

  // Tile list: set bits in order (a block-wide scan over words keeps them ascending), compacted
  // into the stage, then written by consecutive threads.
  int written = 0;  // entries of the list before this step (every thread holds it)
  for (int base = 0; base < g.words; base += kBuildThreads) {
    const int w = base + tid;
    const uint32_t bits = w < g.words ? bitmap[w] : 0u;
    int rank;
    int step_total;
    Scan(temp).ExclusiveSum(__popc(bits), rank, step_total);
    for (uint32_t rest = bits; rest != 0u; rest &= rest - 1u) stage[rank++] = w * 32 + __ffs(static_cast<int>(rest)) - 1;
    __syncthreads();
    for (int e = tid; e < step_total && tile_begin + written + e < tile_end; e += kBuildThreads) {
      const int j = stage[e];
      const int64_t last_key = min(int64_t{j + 1} * g.block_k, g.len) - 1;
      tile_block[tile_begin + written + e] = j;
      tile_masked[tile_begin + written + e] = lg.q_min < layout.global_token(g.position.kv_rank, last_key) ? 1 : 0;
    }
    written += step_total;
    __syncthreads();  // the stage and the scan storage are reused
  }

  // Columns: the visible kept keys of this chunk outside every tile, kColumnItems consecutive
  // keys per thread (so a block scan of the counts keeps the order), compacted like the tiles.
  const int32_t* keys = s.key_local + int64_t{lg.row} * s.key_stride;
  const int visible = keys_before(keys, n_keys, lg.visible_keys);  // the visible keys are a prefix
  written = 0;
  for (int base = 0; base < visible; base += kColumnStep) {
    const int first = base + tid * kColumnItems;
    int mine = 0;
    int32_t local[kColumnItems];
#pragma unroll
    for (int i = 0; i < kColumnItems; ++i) {
      local[i] = -1;
      if (first + i < visible) {
        const int32_t key = keys[first + i];
        const int j = g.key_block(key);
        if ((bitmap[j / 32] >> (j % 32) & 1u) == 0u) {
          local[i] = key;
          ++mine;
        }
      }
    }
    int rank;
    int step_total;
    Scan(temp).ExclusiveSum(mine, rank, step_total);
#pragma unroll
    for (int i = 0; i < kColumnItems; ++i) {
      if (local[i] >= 0) stage[rank++] = local[i];
    }
    __syncthreads();
    for (int e = tid; e < step_total && column_begin + written + e < column_end; e += kBuildThreads) {
      column_index[column_begin + written + e] = stage[e];
    }
    written += step_total;
    __syncthreads();
  }
}

/// Geometry checks shared by every entry point; returns the build geometry.
BuildGeometry check_geometry(const RingPosition& position, int32_t rows, int32_t block_q, int32_t block_k) {
  const TokenLayout& layout = position.layout;
  require(layout.seq_len_tokens() < (int64_t{1} << 31), "layout.seq_len_tokens must be < 2^31, got ",
          layout.seq_len_tokens());
  require(position.q_rank >= 0 && position.q_rank < layout.ranks() && position.kv_rank >= 0 &&
              position.kv_rank < layout.ranks(),
          "position ranks (", position.q_rank, ", ", position.kv_rank, ") must be in [0, ", layout.ranks(), ")");
  require(block_q >= 1 && block_q <= kMaxBlockQ, "block_q must be in [1, ", kMaxBlockQ, "], got ", block_q);
  require(block_k >= 1, "block_k must be >= 1, got ", block_k);
  require(rows >= 0 && rows <= 65535, "rows must be in [0, 65535], got ", rows);
  const int64_t len = layout.local_len();
  const int64_t key_blocks = (len + block_k - 1) / block_k;
  require(key_blocks <= kMaxKeyBlocks, "too many key blocks for the GPU index build: ", key_blocks);
  const int64_t q_blocks = (len + block_q - 1) / block_q;
  require(q_blocks <= 65535, "too many query blocks for one launch: ", q_blocks);
  const int64_t run_tokens = layout_run_tokens(layout);
  const bool aligned = block_q == block_k && run_tokens % block_k == 0;
  return BuildGeometry{position,
                       block_q,
                       block_k,
                       static_cast<int32_t>(q_blocks),
                       static_cast<int32_t>(key_blocks),
                       static_cast<int32_t>((key_blocks + 31) / 32),
                       len,
                       aligned ? static_cast<int32_t>(run_tokens / block_k) : 0,
                       (block_k & (block_k - 1)) == 0 ? std::countr_zero(static_cast<uint32_t>(block_k)) : -1};
}

size_t align_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

/// Steps 1-3a, queued on a stream; the scratch lives as long as the object (stream-ordered free).
class BuildPasses {
 public:
  BuildPasses(const KeptSetsView& kept, const BuildGeometry& g, cudaStream_t stream,
              const SparseIndexBuildOptions& options)
      : g_(g), stream_(stream), lists_(int64_t{kept.rows} * g.q_blocks) {
    check_device_pointer(kept.vertical_count, 4, "kept.vertical_count");
    check_device_pointer(kept.vertical_keys, 4, "kept.vertical_keys");
    check_device_pointer(kept.slash_count, 4, "kept.slash_count");
    check_device_pointer(kept.slash_offsets, 4, "kept.slash_offsets");
    const auto rows = static_cast<size_t>(kept.rows);
    const auto stride = static_cast<size_t>(kept.capacity) + 1;
    const auto lists = static_cast<size_t>(lists_);
    const size_t bitmap_bytes = lists * static_cast<size_t>(g.words) * 4;
    const bool keep_bitmaps = static_cast<int64_t>(bitmap_bytes) <= options.max_bitmap_bytes;
    // Diagonals 0 .. N / B - 1: (qs - ks) / B of any two aligned blocks lies there or below 0.
    const int64_t diagonal_words = (g.position.layout.seq_len_tokens() / g.block_k + 31) / 32;
    const size_t diagonal_bytes = g.run_blocks > 0 ? rows * static_cast<size_t>(diagonal_words) * 4 : 0;
    const size_t key_block_bytes = rows * (static_cast<size_t>(g.key_blocks) + 1) * 4;
    const bool use_row_tables =
        static_cast<int64_t>(diagonal_bytes + key_block_bytes) <= options.max_row_table_bytes;
    size_t scan_bytes = 0;
    SPARSERING_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<const int64_t*>(nullptr),
                                                        static_cast<int64_t*>(nullptr), lists_ + 1, stream));
    const size_t sizes[] = {align_up(rows * stride * 4),         // interval lo
                            align_up(rows * stride * 4),         // interval hi
                            align_up(rows * 4),                  // interval count
                            align_up(rows * 4),                  // key count
                            align_up(rows * (stride - 1) * 4),   // key local
                            align_up((lists + 1) * 8),           // tile counts
                            align_up((lists + 1) * 8),           // column counts
                            align_up((lists + 1) * 8),           // tile offsets (64-bit)
                            align_up((lists + 1) * 8),           // column offsets (64-bit)
                            align_up(scan_bytes),                // scan temporary
                            keep_bitmaps ? align_up(bitmap_bytes) : 0,
                            use_row_tables ? align_up(diagonal_bytes) : 0,
                            use_row_tables ? align_up(key_block_bytes) : 0};
    size_t total = 0;
    for (const size_t size : sizes) total += size;
    scratch_.emplace(total, stream);
    unsigned char* at = scratch_->as<unsigned char>();
    constexpr int kParts = sizeof(sizes) / sizeof(sizes[0]);
    unsigned char* part[kParts];
    for (int i = 0; i < kParts; ++i) {
      part[i] = at;
      at += sizes[i];
    }
    auto* interval_lo = reinterpret_cast<int32_t*>(part[0]);
    auto* interval_hi = reinterpret_cast<int32_t*>(part[1]);
    auto* interval_count = reinterpret_cast<int32_t*>(part[2]);
    auto* key_count = reinterpret_cast<int32_t*>(part[3]);
    auto* key_local = reinterpret_cast<int32_t*>(part[4]);
    auto* tile_counts = reinterpret_cast<int64_t*>(part[5]);
    auto* column_counts = reinterpret_cast<int64_t*>(part[6]);
    tile_offsets64_ = reinterpret_cast<int64_t*>(part[7]);
    column_offsets64_ = reinterpret_cast<int64_t*>(part[8]);
    void* scan_temp = part[9];
    auto* diagonals = use_row_tables && diagonal_bytes > 0 ? reinterpret_cast<uint32_t*>(part[11]) : nullptr;
    auto* key_blocks_below = use_row_tables ? reinterpret_cast<int32_t*>(part[12]) : nullptr;
    scratch_ptrs_ = BuildScratch{static_cast<int64_t>(stride),
                                 interval_count,
                                 interval_lo,
                                 interval_hi,
                                 key_count,
                                 key_local,
                                 kept.capacity,
                                 keep_bitmaps ? reinterpret_cast<uint32_t*>(part[10]) : nullptr,
                                 diagonals,
                                 static_cast<int32_t>(diagonal_words),
                                 key_blocks_below};
    if (diagonals != nullptr) SPARSERING_CUDA_CHECK(cudaMemsetAsync(diagonals, 0, diagonal_bytes, stream));
    // The last count entry stays 0, so each exclusive scan ends with the total.
    SPARSERING_CUDA_CHECK(cudaMemsetAsync(tile_counts + lists_, 0, 8, stream));
    SPARSERING_CUDA_CHECK(cudaMemsetAsync(column_counts + lists_, 0, 8, stream));

    prepare_rows_kernel<<<static_cast<unsigned>(kept.rows), kPrepareThreads, 0, stream>>>(
        kept, g.position, interval_count, interval_lo, interval_hi, key_count, key_local, diagonals,
        static_cast<int32_t>(diagonal_words), g.block_k, key_blocks_below, g.key_blocks);
    SPARSERING_CUDA_CHECK(cudaGetLastError());
    const size_t count_smem = bitmap_smem_bytes(g.words) + static_cast<size_t>(g.block_q) * 16;
    fill_smem_ = count_smem + kStageEntries * 4;
    SPARSERING_CUDA_CHECK(cudaFuncSetAttribute(count_lists_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(count_smem)));
    SPARSERING_CUDA_CHECK(cudaFuncSetAttribute(fill_lists_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(fill_smem_)));
    grid_ = dim3(static_cast<unsigned>(g.q_blocks), static_cast<unsigned>(kept.rows));
    count_lists_kernel<<<grid_, kBuildThreads, count_smem, stream>>>(g, scratch_ptrs_, tile_counts, column_counts);
    SPARSERING_CUDA_CHECK(cudaGetLastError());
    SPARSERING_CUDA_CHECK(
        cub::DeviceScan::ExclusiveSum(scan_temp, scan_bytes, tile_counts, tile_offsets64_, lists_ + 1, stream));
    SPARSERING_CUDA_CHECK(
        cub::DeviceScan::ExclusiveSum(scan_temp, scan_bytes, column_counts, column_offsets64_, lists_ + 1, stream));
  }

  /// Device address of the two totals (tile, column), valid once the scans ran.
  const int64_t* tile_total() const { return tile_offsets64_ + lists_; }
  const int64_t* column_total() const { return column_offsets64_ + lists_; }

  /// Steps 3b and 4 into `index` (its capacity set, its arrays allocated).
  void finalize_and_fill(DeviceSparseIndex& index) const {
    finalize_offsets_kernel<<<static_cast<unsigned>((lists_ + 1 + 255) / 256), 256, 0, stream_>>>(
        lists_, tile_offsets64_, column_offsets64_, index.capacity, index.tile_offsets.data(),
        index.column_offsets.data(), index.needed.data());
    SPARSERING_CUDA_CHECK(cudaGetLastError());
    fill_lists_kernel<<<grid_, kBuildThreads, fill_smem_, stream_>>>(g_, scratch_ptrs_, index.tile_offsets.data(),
                                                                index.tile_block.data(), index.tile_masked.data(),
                                                                index.column_offsets.data(), index.column_index.data());
    SPARSERING_CUDA_CHECK(cudaGetLastError());
  }

 private:
  BuildGeometry g_;
  cudaStream_t stream_;
  int64_t lists_;
  std::optional<StreamBuffer> scratch_;
  BuildScratch scratch_ptrs_{};
  int64_t* tile_offsets64_ = nullptr;
  int64_t* column_offsets64_ = nullptr;
  size_t fill_smem_ = 0;
  dim3 grid_;
};

/// An index shell with its offset arrays and `needed`, and data arrays of `capacity`.
DeviceSparseIndex make_index(const BuildGeometry& g, int32_t rows, const SparseIndexCapacity& capacity) {
  require(capacity.tiles >= 0 && capacity.tiles < (int64_t{1} << 31) && capacity.columns >= 0 &&
              capacity.columns < (int64_t{1} << 31),
          "index capacity must be in [0, 2^31) entries, got ", capacity.tiles, " tiles and ", capacity.columns,
          " columns");
  DeviceSparseIndex index;
  index.rows = rows;
  index.block_q = g.block_q;
  index.block_k = g.block_k;
  index.q_blocks = g.q_blocks;
  index.capacity = capacity;
  const auto lists = static_cast<size_t>(int64_t{rows} * g.q_blocks);
  index.tile_offsets = DeviceBuffer<int32_t>(lists + 1);
  index.column_offsets = DeviceBuffer<int32_t>(lists + 1);
  index.tile_block = DeviceBuffer<int32_t>(static_cast<size_t>(std::max<int64_t>(capacity.tiles, 1)));
  index.tile_masked = DeviceBuffer<uint8_t>(static_cast<size_t>(std::max<int64_t>(capacity.tiles, 1)));
  index.column_index = DeviceBuffer<int32_t>(static_cast<size_t>(std::max<int64_t>(capacity.columns, 1)));
  index.needed = DeviceBuffer<int64_t>(2);
  return index;
}

}  // namespace

DeviceSparseIndex launch_build_sparse_index(const KeptSetsView& kept, const RingPosition& position, int32_t block_q,
                                            int32_t block_k, cudaStream_t stream) {
  require(kept.rows >= 0 && kept.capacity >= 1, "kept sets need rows >= 0 and capacity >= 1, got ", kept.rows, ", ",
          kept.capacity);
  const BuildGeometry g = check_geometry(position, kept.rows, block_q, block_k);
  const int64_t lists = int64_t{kept.rows} * g.q_blocks;
  if (lists == 0) {
    DeviceSparseIndex index = make_index(g, kept.rows, SparseIndexCapacity{});
    index.tile_offsets.fill_bytes(0);
    index.column_offsets.fill_bytes(0);
    index.needed.fill_bytes(0);
    index.tiles = index.columns = 0;
    return index;
  }
  const BuildPasses passes(kept, g, stream, SparseIndexBuildOptions{});
  int64_t totals[2] = {0, 0};
  SPARSERING_CUDA_CHECK(cudaMemcpyAsync(&totals[0], passes.tile_total(), 8, cudaMemcpyDeviceToHost, stream));
  SPARSERING_CUDA_CHECK(cudaMemcpyAsync(&totals[1], passes.column_total(), 8, cudaMemcpyDeviceToHost, stream));
  SPARSERING_CUDA_CHECK(cudaStreamSynchronize(stream));
  require(totals[0] < (int64_t{1} << 31) && totals[1] < (int64_t{1} << 31), "the index needs ", totals[0],
          " tiles and ", totals[1], " columns; the index format holds fewer than 2^31 of each");
  DeviceSparseIndex index = make_index(g, kept.rows, SparseIndexCapacity{totals[0], totals[1]});
  passes.finalize_and_fill(index);
  index.tiles = totals[0];
  index.columns = totals[1];
  return index;
}

SparseIndexCapacity sparse_index_capacity_bound(const RingPosition& position, int32_t rows, int32_t block_q,
                                                int32_t block_k, int32_t vertical_capacity, int32_t slash_capacity) {
  require(vertical_capacity >= 0 && slash_capacity >= 0, "kept-set capacities must be >= 0, got ", vertical_capacity,
          " and ", slash_capacity);
  const BuildGeometry g = check_geometry(position, rows, block_q, block_k);
  const TokenLayout& layout = position.layout;
  SparseIndexCapacity per_row;
  for (int64_t first = 0; first < g.len; first += block_q) {
    const int64_t last = std::min<int64_t>(first + block_q, g.len) - 1;
    // Runs of consecutive global positions and what one offset can reach from each.
    int64_t reach = 0;
    int64_t run_start = first;
    for (int64_t t = first; t <= last; ++t) {
      if (t == last || layout.global_token(position.q_rank, t + 1) != layout.global_token(position.q_rank, t) + 1) {
        reach += (t - run_start + 1 + block_k - 1) / block_k + 1;
        run_start = t + 1;
      }
    }
    const int64_t visible = keys_below(layout, position.kv_rank, layout.global_token(position.q_rank, last) + 1);
    const int64_t visible_blocks = (visible + block_k - 1) / block_k;
    per_row.tiles += std::min(visible_blocks, (int64_t{slash_capacity} + 1) * reach);
    per_row.columns += std::min<int64_t>(vertical_capacity, visible);
  }
  return SparseIndexCapacity{per_row.tiles * rows, per_row.columns * rows};
}

DeviceSparseIndex allocate_sparse_index(const RingPosition& position, int32_t rows, int32_t block_q, int32_t block_k,
                                        const SparseIndexCapacity& capacity) {
  const BuildGeometry g = check_geometry(position, rows, block_q, block_k);
  DeviceSparseIndex index = make_index(g, rows, capacity);
  index.tiles = index.columns = -1;
  return index;
}

void launch_build_sparse_index_into(const KeptSetsView& kept, const RingPosition& position, DeviceSparseIndex& index,
                                    cudaStream_t stream, const SparseIndexBuildOptions& options) {
  require(kept.rows >= 0 && kept.capacity >= 1, "kept sets need rows >= 0 and capacity >= 1, got ", kept.rows, ", ",
          kept.capacity);
  const BuildGeometry g = check_geometry(position, kept.rows, index.block_q, index.block_k);
  require(index.rows == kept.rows && index.q_blocks == g.q_blocks && index.needed.size() == 2 &&
              index.tile_offsets.size() == static_cast<size_t>(int64_t{kept.rows} * g.q_blocks + 1),
          "the index was allocated for ", index.rows, " rows and ", index.q_blocks, " query blocks, the build has ",
          kept.rows, " rows and ", g.q_blocks, " (allocate it with allocate_sparse_index for this geometry)");
  index.tiles = index.columns = -1;
  if (int64_t{kept.rows} * g.q_blocks == 0) {
    SPARSERING_CUDA_CHECK(cudaMemsetAsync(index.tile_offsets.data(), 0, index.tile_offsets.bytes(), stream));
    SPARSERING_CUDA_CHECK(cudaMemsetAsync(index.column_offsets.data(), 0, index.column_offsets.bytes(), stream));
    SPARSERING_CUDA_CHECK(cudaMemsetAsync(index.needed.data(), 0, index.needed.bytes(), stream));
    return;
  }
  const BuildPasses passes(kept, g, stream, options);
  passes.finalize_and_fill(index);
}

void read_sparse_index_counts(DeviceSparseIndex& index, cudaStream_t stream) {
  require(index.needed.size() == 2, "read_sparse_index_counts needs an index from allocate_sparse_index");
  SPARSERING_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<int64_t> needed = index.needed.download();
  require(needed[0] <= index.capacity.tiles && needed[1] <= index.capacity.columns, "the sparse index needs ",
          needed[0], " tiles and ", needed[1], " columns but was allocated for ", index.capacity.tiles, " and ",
          index.capacity.columns, ": its lists were cut; allocate it with sparse_index_capacity_bound (always enough) "
          "or a larger capacity and build again");
  index.tiles = needed[0];
  index.columns = needed[1];
}

}  // namespace sparsering
