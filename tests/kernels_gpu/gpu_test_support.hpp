// Helpers shared by the GPU tests: skipping without a GPU, device copies of a SparseIndex and of
// host tensors, and the error measures the tests bound (max absolute error, relative L2 error,
// NaN-poison checks). The CPU oracles and random problems come from tests/kernels/ring_harness.hpp.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/attention_params.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/sparse_index.hpp"

namespace sparsering::gpu_testing {

/// True when a CUDA device can be used.
inline bool gpu_available() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

/// True when the current device has compute capability 9.0 (Hopper), the GPUs whose sm_90a
/// kernels an sm_90a build must run (the tests that check no kernel is skipped silently).
inline bool device_is_hopper() {
  int device = 0;
  int major = 0;
  int minor = 0;
  return cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
         cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess && major == 9 &&
         minor == 0;
}

/// Skips the current test on a machine without a GPU.
#define SPARSERING_REQUIRE_GPU()                                         \
  do {                                                                   \
    if (!::sparsering::gpu_testing::gpu_available()) GTEST_SKIP() << "no CUDA device"; \
  } while (false)

/// A SparseIndex copied to the device; view() is what the launchers take.
class DeviceIndex {
 public:
  explicit DeviceIndex(const SparseIndex& index)
      : index_(index),
        tile_offsets_(index.tile_offsets),
        tile_block_(nonempty(index.tile_block)),
        tile_masked_(nonempty(index.tile_masked)),
        column_offsets_(index.column_offsets),
        column_index_(nonempty(index.column_index)) {}

  SparseIndexView view() const {
    SparseIndexView view;
    view.rows = index_.rows;
    view.block_q = index_.block_q;
    view.block_k = index_.block_k;
    view.q_blocks = index_.q_blocks;
    view.tile_offsets = tile_offsets_.data();
    view.tile_block = tile_block_.data();
    view.tile_masked = tile_masked_.data();
    view.column_offsets = column_offsets_.data();
    view.column_index = column_index_.data();
    view.max_tiles = std::max<int64_t>(1, index_.tiles());
    return view;
  }

 private:
  // Empty arrays still get one element so every view pointer is valid (never read).
  template <typename T>
  static std::vector<T> nonempty(const std::vector<T>& values) {
    return values.empty() ? std::vector<T>(1, T{}) : values;
  }
  SparseIndex index_;
  DeviceBuffer<int32_t> tile_offsets_;
  DeviceBuffer<int32_t> tile_block_;
  DeviceBuffer<uint8_t> tile_masked_;
  DeviceBuffer<int32_t> column_offsets_;
  DeviceBuffer<int32_t> column_index_;
};

/// Error of `actual` against `expected`: largest absolute difference, largest |expected|, and
/// ||actual - expected||_2 / ||expected||_2. Entries where `skip[n]` is true are left out.
struct ErrorStats {
  double max_abs = 0.0;
  double max_ref = 0.0;
  double rel_l2 = 0.0;
  size_t non_finite = 0;  ///< entries of `actual` that are NaN or inf where expected is finite
};

template <typename A, typename B>
ErrorStats error_stats(const std::vector<A>& actual, const std::vector<B>& expected,
                       const std::vector<bool>* skip = nullptr) {
  ErrorStats stats;
  double diff2 = 0.0;
  double ref2 = 0.0;
  for (size_t n = 0; n < expected.size(); ++n) {
    if (skip != nullptr && (*skip)[n]) continue;
    const double x = static_cast<double>(actual[n]);
    const double y = static_cast<double>(expected[n]);
    if (!std::isfinite(x)) {
      ++stats.non_finite;
      continue;
    }
    stats.max_abs = std::max(stats.max_abs, std::fabs(x - y));
    stats.max_ref = std::max(stats.max_ref, std::fabs(y));
    diff2 += (x - y) * (x - y);
    ref2 += y * y;
  }
  stats.rel_l2 = ref2 > 0.0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  return stats;
}

inline std::string describe(const ErrorStats& stats) {
  return "max |err| " + std::to_string(stats.max_abs) + ", max |ref| " + std::to_string(stats.max_ref) +
         ", rel L2 " + std::to_string(stats.rel_l2) + ", non-finite " + std::to_string(stats.non_finite);
}

}  // namespace sparsering::gpu_testing
