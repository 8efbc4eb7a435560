// The oracle for everything: explicit O(N^2) attention over GLOBAL positions in fp64, restricted
// to the (query, key) pairs a predicate allows, and its exact gradients. No index, no layout, no
// online softmax: what the sparse ring kernels, summed over ranks and steps, must reproduce.
// Tiny sizes only. Tested in tests/kernels/dense_masked_attention_f64_test.cpp (finite
// differences, and equal to plain causal softmax when the predicate is causality).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kernels/attention_params.hpp"

namespace sparsering {

/// allowed(row, q, k): whether query q attends to key k (global positions) in row
/// b * q_heads + h. It decides causality too.
using PairPredicate = std::function<bool(int32_t row, int64_t q, int64_t k)>;

struct DenseAttentionF64 {
  std::vector<double> out;  ///< (B, Hq, N, D); 0 for a query with no allowed key
  std::vector<double> lse;  ///< (B, Hq, N) natural-log sum of exp(scores); -inf for no allowed key
};

struct DenseAttentionGradsF64 {
  std::vector<double> dq;  ///< (B, Hq, N, D)
  std::vector<double> dk;  ///< (B, Hkv, N, D), summed over the query heads of a group
  std::vector<double> dv;  ///< (B, Hkv, N, D)
};

/// out[q] = sum_k softmax_k(scale q.k over allowed k) v[k]. shape.q_len == shape.kv_len == N;
/// q is (B, Hq, N, D), k and v are (B, Hkv, N, D), all in global token order.
/// Throws InputError on a bad shape or tensor sizes that do not match it.
DenseAttentionF64 dense_masked_attention_f64(const AttentionShape& shape, double softmax_scale,
                                             std::span<const double> q, std::span<const double> k,
                                             std::span<const double> v, const PairPredicate& allowed);

/// Gradients of loss = sum(dout * out) for the attention above (dout is (B, Hq, N, D)).
DenseAttentionGradsF64 dense_masked_attention_bwd_f64(const AttentionShape& shape, double softmax_scale,
                                                      std::span<const double> q, std::span<const double> k,
                                                      std::span<const double> v, std::span<const double> dout,
                                                      const PairPredicate& allowed);

}  // namespace sparsering
