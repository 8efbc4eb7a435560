// GPU recall selection (see recall_select.hpp), without sorting: a radix select on the masses'
// bit patterns finds the row's threshold, and a stream compaction writes the kept indices in
// ascending order.
//
// Every kept set is a prefix of the row in the order (mass descending, index ascending), so it is
// {mass > v} plus the first j entries (by index) of mass == v, for a threshold value v and a tie
// count j. The prefix length is K = min(k_p, C): k_p the first position whose prefix mass reaches
// goal = p x total x (1 - 1e-6), C = min(cap, nonzero entries). Positive finite floats order like
// their bit patterns, so v is found digit by digit (bits 30-20, 19-10, 9-0): per digit, a
// histogram of the entries that share the digits found so far gives each bin's count and mass,
// and the bin holding position K is the highest one where the running count reaches C or the
// running mass reaches the goal.
//
// Exact masses: a level-1 bin (bits 30-20) fixes the exponent, so every entry in it is an
// integer mantissa (24 bits) times the same power of 2, and bin masses are exact integer sums
// (64-bit; shared-memory 32-bit atomics with the carry propagated by hand). The mass above a
// position is (fp64 sum of the whole level-1 bins above) + (exact integer sum above, inside the
// level-1 bin, converted once): the same expression at every digit, so the test that picked a
// bin is reproduced exactly by its last sub-bin and the descent always finds the position. The
// only rounding is the fp64 sum over level-1 bins, as in the CPU rule's fp64 running sum.
//
// Kernels per digit: a histogram (CTA per 8192 entries of a row, shared-memory counts flushed to
// the row's global histogram with one atomic per nonzero bin) and a pick (CTA per row, block
// scans over the bins). Then a count of (mass > v, mass == v) per 8192-entry chunk and the write:
// each warp compacts 1024 entries with ballots, in index order. Tested in
// tests/kernels_gpu/recall_select_test.cpp.
#include "kernels/cuda/recall_select.hpp"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cfloat>
#include <cmath>

#include "common/error.hpp"
#include "kernels/cuda/attention_checks.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"

namespace sparsering {
namespace {

constexpr int kMaxParts = 4;
constexpr int kChunkThreads = 256;
constexpr int kChunkEntries = 8192;  // entries per CTA of the histogram, count and write kernels
constexpr int kPickThreads = 512;
constexpr int kLevel1Bins = 2048;    // bits 30-20: 8 exponent bits, 3 mantissa bits
constexpr int kLevelBins = 1024;     // bits 19-10, then 9-0
constexpr int kHistogramBins = kLevel1Bins + 2 * kLevelBins;
// Slack on the target, as traces/recall.hpp: absorbs float rounding of the masses and of p.
constexpr double kRecallSlack = 1e-6;

struct SelectBatch {
  const float* mass[kMaxParts];
  int32_t* kept_count[kMaxParts];
  int32_t* kept_index[kMaxParts];
  int32_t part_rows[kMaxParts];
  int32_t parts;
  int64_t entries;
  double recall;
  int32_t capacity;
  int32_t chunks;  // ceil(entries / kChunkEntries)
};

struct MinOf {
  __device__ int operator()(int a, int b) const { return a < b ? a : b; }
};

/// Where a batch row lives: its part and its row inside the part.
struct RowRef {
  int part;
  int row;
};
__device__ RowRef locate(const SelectBatch& batch, int global_row) {
  int part = 0;
  int row = global_row;
  while (part + 1 < batch.parts && row >= batch.part_rows[part]) row -= batch.part_rows[part++];
  return RowRef{part, row};
}

/// Per row, what the picks found so far.
struct SelectState {
  double mass_above_bins;        // fp64 sum of the level-1 bins above the chosen one
  double goal;                   // p x total x (1 - slack)
  unsigned long long mass_above; // exact mantissa sum above the position, inside the level-1 bin
  long long count_above;         // entries above the position
  long long target;              // C = min(cap, nonzero entries)
  uint32_t prefix;               // chosen digits so far
  int32_t done;                  // the kept count is final
  int32_t kept;                  // K
  int32_t ties;                  // j: entries of mass == v kept, the first by index
  uint32_t value_bits;           // v
};

/// Bit pattern of a mass as the selection sees it: 0 for anything not positive and finite.
__device__ __forceinline__ uint32_t mass_bits(float m) { return m > 0.0f && m <= FLT_MAX ? __float_as_uint(m) : 0u; }

/// Integer mantissa of positive finite bits (the implicit 1 included for normal numbers).
__device__ __forceinline__ uint32_t mantissa(uint32_t bits) {
  const uint32_t exponent = bits >> 23;
  return exponent != 0 ? (bits & 0x7fffffu) | 0x800000u : bits & 0x7fffffu;
}

/// value = integer x 2^scale for every value whose exponent field is `exponent`.
__device__ __forceinline__ int mantissa_scale(uint32_t exponent) { return static_cast<int>(exponent == 0 ? 1 : exponent) - 150; }

__device__ __forceinline__ double exact_value(unsigned long long integer, int scale) {
  return ldexp(static_cast<double>(integer), scale);
}

/// Digit `level` (1, 2, 3): shift and mask of its bits; entries match when their higher digits
/// equal the state's prefix.
template <int kLevel>
struct Digit {
  static constexpr int kShift = kLevel == 1 ? 20 : (kLevel == 2 ? 10 : 0);
  static constexpr int kBins = kLevel == 1 ? kLevel1Bins : kLevelBins;
  static constexpr int kOffset = kLevel == 1 ? 0 : (kLevel == 2 ? kLevel1Bins : kLevel1Bins + kLevelBins);
  __device__ static bool matches(uint32_t bits, uint32_t prefix) { return kLevel == 1 || (bits >> (kShift + 10)) == prefix; }
  __device__ static int bin(uint32_t bits) { return static_cast<int>((bits >> kShift) & (kBins - 1)); }
};

/// Histogram of digit kLevel over one chunk of one row, added into the row's global histogram.
template <int kLevel>
__global__ void __launch_bounds__(kChunkThreads)
    select_histogram_kernel(const SelectBatch batch, const SelectState* state, unsigned* histogram_count,
                            unsigned long long* histogram_mass) {
  using D = Digit<kLevel>;
  __shared__ unsigned count[D::kBins];
  __shared__ unsigned mass_low[D::kBins];
  __shared__ unsigned mass_high[D::kBins];
  const int global_row = static_cast<int>(blockIdx.y);
  const SelectState& row_state = state[global_row];
  if (kLevel > 1 && row_state.done) return;
  const uint32_t prefix = kLevel > 1 ? row_state.prefix : 0u;
  const RowRef ref = locate(batch, global_row);
  const float* mass = batch.mass[ref.part] + int64_t{ref.row} * batch.entries;
  for (int b = static_cast<int>(threadIdx.x); b < D::kBins; b += kChunkThreads) count[b] = mass_low[b] = mass_high[b] = 0u;
  __syncthreads();
  const int64_t begin = int64_t{blockIdx.x} * kChunkEntries;
  const int64_t end = min(begin + kChunkEntries, batch.entries);
  for (int64_t e = begin + threadIdx.x; e < end; e += kChunkThreads) {
    const uint32_t bits = mass_bits(mass[e]);
    if (bits == 0u || !D::matches(bits, prefix)) continue;
    const int b = D::bin(bits);
    const uint32_t m = mantissa(bits);
    atomicAdd(&count[b], 1u);
    const uint32_t old = atomicAdd(&mass_low[b], m);
    if (old + m < old) atomicAdd(&mass_high[b], 1u);  // carry out of the low word
  }
  __syncthreads();
  unsigned* out_count = histogram_count + int64_t{global_row} * kHistogramBins + D::kOffset;
  unsigned long long* out_mass = histogram_mass + int64_t{global_row} * kHistogramBins + D::kOffset;
  for (int b = static_cast<int>(threadIdx.x); b < D::kBins; b += kChunkThreads) {
    if (count[b] != 0u) {
      atomicAdd(&out_count[b], count[b]);
      atomicAdd(&out_mass[b], (static_cast<unsigned long long>(mass_high[b]) << 32) | mass_low[b]);
    }
  }
}

/// Picks the bin of digit kLevel holding position K (CTA per row): the highest bin whose running
/// count reaches C or whose running mass reaches the goal.
template <int kLevel>
__global__ void __launch_bounds__(kPickThreads)
    select_pick_kernel(const SelectBatch batch, SelectState* state, const unsigned* histogram_count,
                       const unsigned long long* histogram_mass) {
  using D = Digit<kLevel>;
  constexpr int kItems = D::kBins / kPickThreads;  // bins per thread, highest first
  using CountScan = cub::BlockScan<long long, kPickThreads>;
  using MassScan = cub::BlockScan<unsigned long long, kPickThreads>;
  using ValueScan = cub::BlockScan<double, kPickThreads>;
  using ValueReduce = cub::BlockReduce<double, kPickThreads>;
  using CountReduce = cub::BlockReduce<long long, kPickThreads>;
  using MinReduce = cub::BlockReduce<int, kPickThreads>;
  __shared__ union {
    typename CountScan::TempStorage count_scan;
    typename MassScan::TempStorage mass_scan;
    typename ValueScan::TempStorage value_scan;
    typename ValueReduce::TempStorage value_reduce;
    typename CountReduce::TempStorage count_reduce;
    typename MinReduce::TempStorage min_reduce;
  } temp;
  __shared__ double shared_total;
  __shared__ long long shared_nonzero;
  __shared__ int shared_position;
  const int global_row = static_cast<int>(blockIdx.x);
  SelectState& row_state = state[global_row];
  if (kLevel > 1 && row_state.done) return;
  const unsigned* row_count = histogram_count + int64_t{global_row} * kHistogramBins + D::kOffset;
  const unsigned long long* row_mass = histogram_mass + int64_t{global_row} * kHistogramBins + D::kOffset;

  // Position q = threadIdx.x * kItems + i is bin kBins - 1 - q (descending values).
  long long count[kItems];
  unsigned long long mass[kItems];
  int bin[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    bin[i] = D::kBins - 1 - (static_cast<int>(threadIdx.x) * kItems + i);
    count[i] = row_count[bin[i]];
    mass[i] = row_mass[bin[i]];
  }

  long long count_incl[kItems];
  int position = INT_MAX;
  if (kLevel == 1) {
    double value[kItems];
    double value_sum = 0.0;
    long long count_sum = 0;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      value[i] = exact_value(mass[i], mantissa_scale(static_cast<uint32_t>(bin[i]) >> 3));
      value_sum += value[i];
      count_sum += count[i];
    }
    const double total = ValueReduce(temp.value_reduce).Sum(value_sum);
    __syncthreads();
    const long long nonzero = CountReduce(temp.count_reduce).Sum(count_sum);
    if (threadIdx.x == 0) {
      shared_total = total;
      shared_nonzero = nonzero;
    }
    __syncthreads();
    if (shared_nonzero == 0) {  // nothing to keep
      if (threadIdx.x == 0) {
        row_state.done = 1;
        row_state.kept = 0;
        row_state.ties = 0;
        row_state.value_bits = 0u;
      }
      return;
    }
    const long long target = min(static_cast<long long>(batch.capacity), shared_nonzero);
    const double goal = batch.recall * shared_total * (1.0 - kRecallSlack);
    double value_excl[kItems];
    CountScan(temp.count_scan).InclusiveSum(count, count_incl);
    __syncthreads();
    ValueScan(temp.value_scan).ExclusiveSum(value, value_excl);
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const bool cross = count[i] > 0 && (count_incl[i] >= target || value_excl[i] + value[i] >= goal);
      if (cross) position = min(position, static_cast<int>(threadIdx.x) * kItems + i);
    }
    __syncthreads();
    const int first = MinReduce(temp.min_reduce).Reduce(position, MinOf());
    if (threadIdx.x == 0) shared_position = first;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (static_cast<int>(threadIdx.x) * kItems + i == shared_position) {
        row_state.goal = goal;
        row_state.target = target;
        row_state.mass_above_bins = value_excl[i];
        row_state.mass_above = 0ull;
        row_state.count_above = count_incl[i] - count[i];
        row_state.prefix = static_cast<uint32_t>(bin[i]);
        row_state.done = 0;
      }
    }
    return;
  }

  // Levels 2 and 3: exact integer running sums inside the level-1 bin.
  const double goal = row_state.goal;
  const long long target = row_state.target;
  const double above_bins = row_state.mass_above_bins;
  const unsigned long long mass_above = row_state.mass_above;
  const long long count_above = row_state.count_above;
  const uint32_t prefix = row_state.prefix;
  const int scale = mantissa_scale(prefix >> (kLevel == 2 ? 3 : 13));
  unsigned long long mass_incl[kItems];
  CountScan(temp.count_scan).InclusiveSum(count, count_incl);
  __syncthreads();
  MassScan(temp.mass_scan).InclusiveSum(mass, mass_incl);
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const bool cross = count[i] > 0 && (count_above + count_incl[i] >= target ||
                                        above_bins + exact_value(mass_above + mass_incl[i], scale) >= goal);
    if (cross) position = min(position, static_cast<int>(threadIdx.x) * kItems + i);
  }
  __syncthreads();
  const int first = MinReduce(temp.min_reduce).Reduce(position, MinOf());
  if (threadIdx.x == 0) shared_position = first;
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (static_cast<int>(threadIdx.x) * kItems + i != shared_position) continue;
    const long long above = count_above + count_incl[i] - count[i];
    const unsigned long long above_mass = mass_above + mass_incl[i] - mass[i];
    const uint32_t new_prefix = (prefix << 10) | static_cast<uint32_t>(bin[i]);
    row_state.count_above = above;
    row_state.mass_above = above_mass;
    row_state.prefix = new_prefix;
    if (kLevel == 3) {
      // Every entry of this bin equals v: take the first j of them.
      const long long ties = count[i];
      const unsigned long long m = mantissa(new_prefix);
      long long keep = ties;
      if (above + ties >= target) keep = target - above;
      auto reached = [&](long long j) { return above_bins + exact_value(above_mass + static_cast<unsigned long long>(j) * m, scale) >= goal; };
      if (reached(ties)) {
        long long lo = 1;
        long long hi = ties;  // reached(hi) holds
        while (lo < hi) {
          const long long mid = lo + (hi - lo) / 2;
          if (reached(mid)) {
            hi = mid;
          } else {
            lo = mid + 1;
          }
        }
        keep = min(keep, lo);
      }
      row_state.value_bits = new_prefix;
      row_state.ties = static_cast<int32_t>(keep);
      row_state.kept = static_cast<int32_t>(above + keep);
      row_state.done = 1;
    }
  }
}

/// Per chunk: entries above v and entries equal to v.
__global__ void __launch_bounds__(kChunkThreads)
    select_count_kernel(const SelectBatch batch, const SelectState* state, unsigned* chunk_above, unsigned* chunk_equal) {
  using Reduce = cub::BlockReduce<unsigned, kChunkThreads>;
  __shared__ typename Reduce::TempStorage temp;
  const int global_row = static_cast<int>(blockIdx.y);
  const SelectState& row_state = state[global_row];
  const int64_t at = int64_t{global_row} * batch.chunks + blockIdx.x;
  if (row_state.kept == 0) {
    if (threadIdx.x == 0) chunk_above[at] = chunk_equal[at] = 0u;
    return;
  }
  const uint32_t v = row_state.value_bits;
  const RowRef ref = locate(batch, global_row);
  const float* mass = batch.mass[ref.part] + int64_t{ref.row} * batch.entries;
  const int64_t begin = int64_t{blockIdx.x} * kChunkEntries;
  const int64_t end = min(begin + kChunkEntries, batch.entries);
  unsigned above = 0u;
  unsigned equal = 0u;
  for (int64_t e = begin + threadIdx.x; e < end; e += kChunkThreads) {
    const uint32_t bits = mass_bits(mass[e]);
    above += bits > v ? 1u : 0u;
    equal += bits == v ? 1u : 0u;
  }
  const unsigned above_total = Reduce(temp).Sum(above);
  __syncthreads();
  const unsigned equal_total = Reduce(temp).Sum(equal);
  if (threadIdx.x == 0) {
    chunk_above[at] = above_total;
    chunk_equal[at] = equal_total;
  }
}

/// Writes the kept indices of one chunk at their place in the row's ascending list.
__global__ void __launch_bounds__(kChunkThreads)
    select_write_kernel(const SelectBatch batch, const SelectState* state, const unsigned* chunk_above,
                        const unsigned* chunk_equal) {
  using Reduce = cub::BlockReduce<long long, kChunkThreads>;
  constexpr int kWarpEntries = kChunkEntries / (kChunkThreads / 32);  // 1024
  __shared__ typename Reduce::TempStorage temp;
  __shared__ long long before[2];                        // above / equal entries in earlier chunks
  __shared__ unsigned warp_above[kChunkThreads / 32];
  __shared__ unsigned warp_equal[kChunkThreads / 32];
  const int global_row = static_cast<int>(blockIdx.y);
  const SelectState& row_state = state[global_row];
  const RowRef ref = locate(batch, global_row);
  const long long kept = row_state.kept;
  if (blockIdx.x == 0 && threadIdx.x == 0) batch.kept_count[ref.part][ref.row] = static_cast<int32_t>(kept);
  // Slots past the count hold -1 (the kept-set layout), so an output reused from an earlier
  // selection needs no fill; the row's chunks write them in turn.
  int32_t* kept_index = batch.kept_index[ref.part] + int64_t{ref.row} * batch.capacity;
  for (long long i = kept + int64_t{blockIdx.x} * kChunkThreads + threadIdx.x; i < batch.capacity;
       i += int64_t{gridDim.x} * kChunkThreads) {
    kept_index[i] = -1;
  }
  if (kept == 0) return;
  const uint32_t v = row_state.value_bits;
  const long long ties = row_state.ties;
  const int chunk = static_cast<int>(blockIdx.x);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const unsigned lower_lanes = (1u << lane) - 1u;

  long long above_sum = 0;
  long long equal_sum = 0;
  for (int c = static_cast<int>(threadIdx.x); c < chunk; c += kChunkThreads) {
    above_sum += chunk_above[int64_t{global_row} * batch.chunks + c];
    equal_sum += chunk_equal[int64_t{global_row} * batch.chunks + c];
  }
  const long long above_before = Reduce(temp).Sum(above_sum);
  __syncthreads();
  const long long equal_before = Reduce(temp).Sum(equal_sum);
  if (threadIdx.x == 0) {
    before[0] = above_before;
    before[1] = equal_before;
  }

  const float* mass = batch.mass[ref.part] + int64_t{ref.row} * batch.entries;
  const int64_t begin = int64_t{chunk} * kChunkEntries + int64_t{warp} * kWarpEntries;
  const int64_t end = min(begin + kWarpEntries, batch.entries);
  unsigned above = 0u;
  unsigned equal = 0u;
  for (int64_t base = begin; base < end; base += 32) {
    const int64_t e = base + lane;
    const uint32_t bits = e < end ? mass_bits(mass[e]) : 0u;
    above += __popc(__ballot_sync(0xffffffffu, bits > v));
    equal += __popc(__ballot_sync(0xffffffffu, bits == v && e < end));
  }
  if (lane == 0) {
    warp_above[warp] = above;
    warp_equal[warp] = equal;
  }
  __syncthreads();
  long long above_base = before[0];
  long long equal_base = before[1];
  for (int w = 0; w < warp; ++w) {
    above_base += warp_above[w];
    equal_base += warp_equal[w];
  }
  // Output position of the next kept entry: entries above v and the kept ties before it.
  long long out = above_base + min(equal_base, ties);
  for (int64_t base = begin; base < end; base += 32) {
    const int64_t e = base + lane;
    const uint32_t bits = e < end ? mass_bits(mass[e]) : 0u;
    const bool equal_here = bits == v && e < end;
    const unsigned equal_mask = __ballot_sync(0xffffffffu, equal_here);
    const long long tie_rank = equal_base + __popc(equal_mask & lower_lanes);
    const bool keep = bits > v || (equal_here && tie_rank < ties);
    const unsigned keep_mask = __ballot_sync(0xffffffffu, keep);
    if (keep) kept_index[out + __popc(keep_mask & lower_lanes)] = static_cast<int32_t>(e);
    out += __popc(keep_mask);
    equal_base += __popc(equal_mask);
  }
}

size_t align_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

void launch_recall_select_batch(std::span<const RecallSelectParams> parts, cudaStream_t stream) {
  require(!parts.empty() && parts.size() <= static_cast<size_t>(kMaxParts), "recall selection takes 1 to ", kMaxParts,
          " parts, got ", parts.size());
  const RecallSelectParams& first = parts.front();
  SelectBatch batch{};
  int64_t total_rows = 0;
  for (const RecallSelectParams& p : parts) {
    require(p.rows >= 0, "rows must be >= 0, got ", p.rows);
    require(p.entries >= 1 && p.entries < (int64_t{1} << 31), "entries must be in [1, 2^31), got ", p.entries);
    require(int64_t{p.rows} * p.entries < (int64_t{1} << 40), "rows x entries must be < 2^40, got ",
            int64_t{p.rows} * p.entries);
    require(p.recall > 0.0 && p.recall <= 1.0, "recall must be in (0, 1], got ", p.recall);
    require(p.capacity >= 1, "capacity must be >= 1, got ", p.capacity);
    require(p.entries == first.entries && p.recall == first.recall && p.capacity == first.capacity,
            "the parts of one recall selection must share entries, recall and capacity");
    if (p.rows == 0) continue;
    check_device_pointer(p.mass, 4, "mass");
    check_device_pointer(p.kept_count, 4, "kept_count");
    check_device_pointer(p.kept_index, 4, "kept_index");
    batch.mass[batch.parts] = p.mass;
    batch.kept_count[batch.parts] = p.kept_count;
    batch.kept_index[batch.parts] = p.kept_index;
    batch.part_rows[batch.parts] = p.rows;
    ++batch.parts;
    total_rows += p.rows;
  }
  if (total_rows == 0) return;
  require(total_rows <= 65535, "recall selection of more than 65535 rows in one launch: ", total_rows);
  batch.entries = first.entries;
  batch.recall = first.recall;
  batch.capacity = first.capacity;
  batch.chunks = static_cast<int32_t>((first.entries + kChunkEntries - 1) / kChunkEntries);

  const auto rows = static_cast<size_t>(total_rows);
  const size_t count_bytes = align_up(rows * kHistogramBins * sizeof(unsigned));
  const size_t mass_bytes = align_up(rows * kHistogramBins * sizeof(unsigned long long));
  const size_t state_bytes = align_up(rows * sizeof(SelectState));
  const size_t chunk_bytes = align_up(rows * static_cast<size_t>(batch.chunks) * sizeof(unsigned));
  StreamBuffer scratch(count_bytes + mass_bytes + state_bytes + 2 * chunk_bytes, stream);
  unsigned char* at = scratch.as<unsigned char>();
  auto* histogram_count = reinterpret_cast<unsigned*>(at);
  auto* histogram_mass = reinterpret_cast<unsigned long long*>(at + count_bytes);
  auto* state = reinterpret_cast<SelectState*>(at + count_bytes + mass_bytes);
  auto* chunk_above = reinterpret_cast<unsigned*>(at + count_bytes + mass_bytes + state_bytes);
  auto* chunk_equal = reinterpret_cast<unsigned*>(at + count_bytes + mass_bytes + state_bytes + chunk_bytes);
  SPARSERING_CUDA_CHECK(cudaMemsetAsync(at, 0, count_bytes + mass_bytes + state_bytes, stream));

  const dim3 chunk_grid(static_cast<unsigned>(batch.chunks), static_cast<unsigned>(total_rows));
  const auto row_grid = static_cast<unsigned>(total_rows);
  select_histogram_kernel<1><<<chunk_grid, kChunkThreads, 0, stream>>>(batch, state, histogram_count, histogram_mass);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
  select_pick_kernel<1><<<row_grid, kPickThreads, 0, stream>>>(batch, state, histogram_count, histogram_mass);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
  select_histogram_kernel<2><<<chunk_grid, kChunkThreads, 0, stream>>>(batch, state, histogram_count, histogram_mass);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
  select_pick_kernel<2><<<row_grid, kPickThreads, 0, stream>>>(batch, state, histogram_count, histogram_mass);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
  select_histogram_kernel<3><<<chunk_grid, kChunkThreads, 0, stream>>>(batch, state, histogram_count, histogram_mass);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
  select_pick_kernel<3><<<row_grid, kPickThreads, 0, stream>>>(batch, state, histogram_count, histogram_mass);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
  select_count_kernel<<<chunk_grid, kChunkThreads, 0, stream>>>(batch, state, chunk_above, chunk_equal);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
  select_write_kernel<<<chunk_grid, kChunkThreads, 0, stream>>>(batch, state, chunk_above, chunk_equal);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

void launch_recall_select(const RecallSelectParams& params, cudaStream_t stream) {
  launch_recall_select_batch(std::span<const RecallSelectParams>(&params, 1), stream);
}

}  // namespace sparsering
