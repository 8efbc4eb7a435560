// Helpers shared by the kernels' CPU tests: the per-run random seed (tests/common/test_seed.hpp:
// fresh each run, printed, and overridable with SPARSERING_TEST_SEED=<n> to reproduce a failure),
// random kept patterns, random bf16 tensors, moving tensors between global token order and a
// rank's local order, and the largest difference between two arrays.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <iostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/attention_params.hpp"
#include "kernels/bf16.hpp"
#include "kernels/index/row_pattern.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering::testing_support {

/// Uniform integer in [lo, hi].
inline int64_t uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

/// A random kept pattern over N tokens: maybe a local window 0..w-1, some scattered offsets, some
/// vertical keys (often including the sink at 0), with varied densities (sometimes empty).
inline RowPattern random_row_pattern(std::mt19937_64& rng, int64_t n) {
  RowPattern row;
  if (uniform(rng, 0, 3) != 0) {
    const int64_t window = uniform(rng, 1, std::max<int64_t>(1, n / 4));
    for (int64_t d = 0; d < window; ++d) row.slash_offsets.push_back(d);
  }
  const int64_t scattered = uniform(rng, 0, 3) == 0 ? 0 : uniform(rng, 1, std::max<int64_t>(1, n / 6));
  for (int64_t s = 0; s < scattered; ++s) row.slash_offsets.push_back(uniform(rng, 0, n - 1));
  if (uniform(rng, 0, 1) == 0) row.vertical_tokens.push_back(0);
  const int64_t verticals = uniform(rng, 0, 3) == 0 ? 0 : uniform(rng, 1, std::max<int64_t>(1, n / 5));
  for (int64_t v = 0; v < verticals; ++v) row.vertical_tokens.push_back(uniform(rng, 0, n - 1));
  return row;
}

/// `count` random bf16 values, each uniform in [-amplitude, amplitude] before rounding.
inline std::vector<bf16_bits> random_bf16(std::mt19937_64& rng, size_t count, float amplitude) {
  std::uniform_real_distribution<float> dist(-amplitude, amplitude);
  std::vector<bf16_bits> values(count);
  for (bf16_bits& value : values) value = float_to_bf16(dist(rng));
  return values;
}

/// Rank `rank`'s local slice of a (B, H, N, D) tensor in global token order: (B, H, N/W, D).
template <typename T>
std::vector<T> to_local(const std::vector<T>& global, const TokenLayout& layout, int32_t rank, int64_t batch_heads,
                        int64_t dim) {
  const int64_t n = layout.seq_len_tokens();
  const int64_t local = layout.local_len();
  std::vector<T> out(static_cast<size_t>(batch_heads * local * dim));
  for (int64_t bh = 0; bh < batch_heads; ++bh) {
    for (int64_t x = 0; x < local; ++x) {
      const int64_t g = layout.global_token(rank, x);
      for (int64_t d = 0; d < dim; ++d) {
        out[static_cast<size_t>((bh * local + x) * dim + d)] = global[static_cast<size_t>((bh * n + g) * dim + d)];
      }
    }
  }
  return out;
}

/// Writes rank `rank`'s local (B, H, N/W, D) slice back into a global (B, H, N, D) tensor.
template <typename T, typename U>
void from_local(std::vector<T>& global, const std::vector<U>& local_values, const TokenLayout& layout, int32_t rank,
                int64_t batch_heads, int64_t dim) {
  const int64_t n = layout.seq_len_tokens();
  const int64_t local = layout.local_len();
  for (int64_t bh = 0; bh < batch_heads; ++bh) {
    for (int64_t x = 0; x < local; ++x) {
      const int64_t g = layout.global_token(rank, x);
      for (int64_t d = 0; d < dim; ++d) {
        global[static_cast<size_t>((bh * n + g) * dim + d)] =
            static_cast<T>(local_values[static_cast<size_t>((bh * local + x) * dim + d)]);
      }
    }
  }
}

/// bf16 values widened to fp64.
inline std::vector<double> widen(const std::vector<bf16_bits>& values) {
  std::vector<double> out(values.size());
  for (size_t n = 0; n < values.size(); ++n) out[n] = static_cast<double>(bf16_to_float(values[n]));
  return out;
}

/// Largest |a - b| over two equally long arrays, and largest |b|.
template <typename A, typename B>
std::pair<double, double> max_error(const std::vector<A>& a, const std::vector<B>& b) {
  double error = 0.0;
  double scale = 0.0;
  for (size_t n = 0; n < a.size(); ++n) {
    const double x = static_cast<double>(a[n]);
    const double y = static_cast<double>(b[n]);
    if (std::isinf(x) || std::isinf(y)) {
      if (x != y) error = std::numeric_limits<double>::infinity();
      continue;
    }
    error = std::max(error, std::fabs(x - y));
    scale = std::max(scale, std::fabs(y));
  }
  return {error, scale};
}

}  // namespace sparsering::testing_support
