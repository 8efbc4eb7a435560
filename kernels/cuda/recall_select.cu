// GPU recall selection (see recall_select.hpp): one CUB radix sort of ((row, mass), index) pairs,
// mass descending within a row and stable (ties keep the smaller index first), then one CTA per row
// scans the sorted masses in fp64 to find the recall prefix, and a second segmented sort puts
// each row's kept indices in ascending order. Tested in tests/kernels_gpu/recall_select_test.cpp.
#include "kernels/cuda/recall_select.hpp"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "kernels/cuda/attention_checks.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"

namespace sparsering {
namespace {

constexpr int kSelectThreads = 512;
// Slack on the target, as traces/recall.hpp: absorbs float rounding of the masses and of p.
constexpr double kRecallSlack = 1e-6;

/// Sort keys: (row << 32) | ~bits(mass). Masses are >= 0, so their bit patterns order like the
/// values; the complement sorts descending inside a row. Values: the entry index.
__global__ void recall_keys_kernel(int64_t rows_entries, int64_t entries, const float* mass, uint64_t* keys,
                                   int32_t* index) {
  const int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (e >= rows_entries) return;
  const uint32_t bits = __float_as_uint(fmaxf(mass[e], 0.0f));
  keys[e] = (static_cast<uint64_t>(e / entries) << 32) | static_cast<uint64_t>(~bits);
  index[e] = static_cast<int32_t>(e % entries);
}

/// Mass back from a sort key.
__global__ void recall_mass_kernel(int64_t rows_entries, const uint64_t* keys, float* mass) {
  const int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (e < rows_entries) mass[e] = __uint_as_float(~static_cast<uint32_t>(keys[e] & 0xffffffffu));
}

/// Segment bounds [r * stride, r * stride + counts[r]) of each row's kept entries.
__global__ void recall_offsets_kernel(int32_t rows, int64_t stride, const int32_t* counts, int32_t* begin,
                                      int32_t* end) {
  const int32_t r = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (r >= rows) return;
  begin[r] = static_cast<int32_t>(r * stride);
  end[r] = static_cast<int32_t>(r * stride + counts[r]);
}

/// One CTA per row: prefix length over the row's descending masses, then copies the prefix.
__global__ void __launch_bounds__(kSelectThreads)
    recall_prefix_kernel(const float* sorted_mass, const int32_t* sorted_index, int64_t entries, double recall,
                         int32_t capacity, int32_t* kept_count, int32_t* kept_index) {
  using Reduce = cub::BlockReduce<double, kSelectThreads>;
  using CountReduce = cub::BlockReduce<int64_t, kSelectThreads>;
  using Scan = cub::BlockScan<double, kSelectThreads>;
  __shared__ union {
    typename Reduce::TempStorage reduce;
    typename CountReduce::TempStorage count;
    typename Scan::TempStorage scan;
  } temp;
  __shared__ double shared_total;
  __shared__ int64_t shared_nonzero;
  __shared__ double carry;
  __shared__ unsigned long long crossing;
  const int row = static_cast<int>(blockIdx.x);
  const float* mass = sorted_mass + int64_t{row} * entries;

  double sum = 0.0;
  int64_t nonzero = 0;
  for (int64_t e = threadIdx.x; e < entries; e += kSelectThreads) {
    sum += static_cast<double>(mass[e]);
    nonzero += mass[e] > 0.0f ? 1 : 0;
  }
  const double total = Reduce(temp.reduce).Sum(sum);
  __syncthreads();
  const int64_t nonzero_total = CountReduce(temp.count).Sum(nonzero);
  if (threadIdx.x == 0) {
    shared_total = total;
    shared_nonzero = nonzero_total;
    carry = 0.0;
    crossing = static_cast<unsigned long long>(entries);
  }
  __syncthreads();
  const double target = recall * shared_total * (1.0 - kRecallSlack);
  int64_t kept = 0;
  if (shared_total > 0.0) {
    // Chunked inclusive scan; the first entry whose prefix reaches the target ends the prefix.
    // Only the first `capacity` entries can be kept, so the scan stops there.
    const int64_t scan_end = min(entries, int64_t{capacity});
    for (int64_t base = 0; base < scan_end; base += kSelectThreads) {
      const int64_t e = base + threadIdx.x;
      const double value = e < scan_end ? static_cast<double>(mass[e]) : 0.0;
      double prefix;
      double chunk_total;
      Scan(temp.scan).InclusiveSum(value, prefix, chunk_total);
      prefix += carry;
      if (e < scan_end && prefix >= target && prefix - value < target) {
        atomicMin(&crossing, static_cast<unsigned long long>(e));
      }
      __syncthreads();
      if (threadIdx.x == 0) carry += chunk_total;
      __syncthreads();
      if (crossing < static_cast<unsigned long long>(entries)) break;
    }
    // Not reached within the scanned entries: the cap (or, through rounding, every entry) binds.
    kept = crossing < static_cast<unsigned long long>(entries) ? static_cast<int64_t>(crossing) + 1 : scan_end;
  }
  kept = min(kept, shared_nonzero);
  kept = min(kept, int64_t{capacity});
  if (threadIdx.x == 0) kept_count[row] = static_cast<int32_t>(kept);
  for (int64_t e = threadIdx.x; e < kept; e += kSelectThreads) {
    kept_index[int64_t{row} * capacity + e] = sorted_index[int64_t{row} * entries + e];
  }
}

size_t align_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

void launch_recall_select(const RecallSelectParams& p, cudaStream_t stream) {
  require(p.rows >= 0, "rows must be >= 0, got ", p.rows);
  require(p.entries >= 1 && p.entries < (int64_t{1} << 31), "entries must be in [1, 2^31), got ", p.entries);
  require(int64_t{p.rows} * p.entries < (int64_t{1} << 31), "rows x entries must be < 2^31, got ",
          int64_t{p.rows} * p.entries);
  require(p.recall > 0.0 && p.recall <= 1.0, "recall must be in (0, 1], got ", p.recall);
  require(p.capacity >= 1, "capacity must be >= 1, got ", p.capacity);
  if (p.rows == 0) return;
  check_device_pointer(p.mass, 4, "mass");
  check_device_pointer(p.kept_count, 4, "kept_count");
  check_device_pointer(p.kept_index, 4, "kept_index");

  const int64_t total = int64_t{p.rows} * p.entries;
  const int items = static_cast<int>(total);
  // One device-wide stable radix sort over (row, mass) keys: a segmented sort runs one CTA per
  // segment, which leaves the GPU idle with a few long rows.
  int row_bits = 1;
  while ((int64_t{1} << row_bits) < p.rows) ++row_bits;
  const int end_bit = 32 + row_bits;
  size_t sort_bytes = 0;
  size_t kept_sort_bytes = 0;
  SPARSERING_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const uint64_t*>(nullptr),
                                                        static_cast<uint64_t*>(nullptr),
                                                        static_cast<const int32_t*>(nullptr),
                                                        static_cast<int32_t*>(nullptr), items, 0, end_bit, stream));
  SPARSERING_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortKeys(
      nullptr, kept_sort_bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      p.rows * p.capacity, p.rows, static_cast<const int32_t*>(nullptr), static_cast<const int32_t*>(nullptr), 0, 32,
      stream));
  const size_t pair_bytes = align_up(static_cast<size_t>(total) * 8);
  const size_t kept_bytes = align_up(static_cast<size_t>(p.rows) * static_cast<size_t>(p.capacity) * 4);
  const size_t offsets_bytes = align_up(static_cast<size_t>(p.rows) * 4);
  const size_t temp_bytes = align_up(std::max(sort_bytes, kept_sort_bytes));
  StreamBuffer scratch(2 * pair_bytes + 3 * (pair_bytes / 2) + kept_bytes + 2 * offsets_bytes + temp_bytes, stream);
  unsigned char* at = scratch.as<unsigned char>();
  auto take = [&](size_t bytes) {
    unsigned char* here = at;
    at += bytes;
    return here;
  };
  uint64_t* keys = reinterpret_cast<uint64_t*>(take(pair_bytes));
  uint64_t* sorted_keys = reinterpret_cast<uint64_t*>(take(pair_bytes));
  int32_t* index = reinterpret_cast<int32_t*>(take(pair_bytes / 2));
  int32_t* sorted_index = reinterpret_cast<int32_t*>(take(pair_bytes / 2));
  float* sorted_mass = reinterpret_cast<float*>(take(pair_bytes / 2));
  int32_t* unsorted_kept = reinterpret_cast<int32_t*>(take(kept_bytes));
  int32_t* begin = reinterpret_cast<int32_t*>(take(offsets_bytes));
  int32_t* end = reinterpret_cast<int32_t*>(take(offsets_bytes));
  void* temp = take(temp_bytes);

  const unsigned blocks = static_cast<unsigned>((total + 255) / 256);
  recall_keys_kernel<<<blocks, 256, 0, stream>>>(total, p.entries, p.mass, keys, index);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
  SPARSERING_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, sort_bytes, keys, sorted_keys, index, sorted_index, items,
                                                        0, end_bit, stream));
  recall_mass_kernel<<<blocks, 256, 0, stream>>>(total, sorted_keys, sorted_mass);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
  const unsigned row_blocks = static_cast<unsigned>((p.rows + 255) / 256);
  recall_prefix_kernel<<<static_cast<unsigned>(p.rows), kSelectThreads, 0, stream>>>(
      sorted_mass, sorted_index, p.entries, p.recall, p.capacity, p.kept_count, unsorted_kept);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
  recall_offsets_kernel<<<row_blocks, 256, 0, stream>>>(p.rows, p.capacity, p.kept_count, begin, end);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
  SPARSERING_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortKeys(temp, kept_sort_bytes, unsorted_kept, p.kept_index,
                                                                p.rows * p.capacity, p.rows, begin, end, 0, 32, stream));
}

}  // namespace sparsering
