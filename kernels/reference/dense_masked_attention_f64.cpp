#include "kernels/reference/dense_masked_attention_f64.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.hpp"
#include "kernels/reference/reference_checks.hpp"

namespace sparsering {
namespace {

void check_dense(const AttentionShape& shape, std::span<const double> q, std::span<const double> k,
                 std::span<const double> v) {
  reference::check_shape(shape);
  require(shape.q_len == shape.kv_len, "dense attention runs over one sequence: q_len = ", shape.q_len,
          " must equal kv_len = ", shape.kv_len);
  const auto per_head = static_cast<size_t>(shape.q_len) * static_cast<size_t>(shape.head_dim);
  const size_t q_size = static_cast<size_t>(shape.batch) * static_cast<size_t>(shape.q_heads) * per_head;
  const size_t kv_size = static_cast<size_t>(shape.batch) * static_cast<size_t>(shape.kv_heads) * per_head;
  require(q.size() == q_size, "q has ", q.size(), " elements, the shape needs ", q_size);
  require(k.size() == kv_size, "k has ", k.size(), " elements, the shape needs ", kv_size);
  require(v.size() == kv_size, "v has ", v.size(), " elements, the shape needs ", kv_size);
}

double dot(const double* a, const double* b, int64_t dim) {
  double sum = 0.0;
  for (int64_t d = 0; d < dim; ++d) sum += a[d] * b[d];
  return sum;
}

// Probabilities of one query row over all keys (0 where not allowed); returns the LSE.
double softmax_row(const AttentionShape& shape, double scale, const double* query, const double* keys, int32_t row,
                   int64_t q, const PairPredicate& allowed, std::vector<double>& p) {
  const int64_t n = shape.kv_len;
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t key = 0; key < n; ++key) {
    const auto e = static_cast<size_t>(key);
    p[e] = allowed(row, q, key) ? scale * dot(query, keys + key * shape.head_dim, shape.head_dim)
                                : -std::numeric_limits<double>::infinity();
    max = std::max(max, p[e]);
  }
  if (std::isinf(max)) {
    std::fill(p.begin(), p.end(), 0.0);
    return max;
  }
  double sum = 0.0;
  for (double& value : p) {
    value = std::exp(value - max);
    sum += value;
  }
  for (double& value : p) value /= sum;
  return max + std::log(sum);
}

}  // namespace

DenseAttentionF64 dense_masked_attention_f64(const AttentionShape& shape, double softmax_scale,
                                             std::span<const double> q, std::span<const double> k,
                                             std::span<const double> v, const PairPredicate& allowed) {
  check_dense(shape, q, k, v);
  const int64_t n = shape.q_len;
  const int64_t dim = shape.head_dim;
  const int32_t group = shape.q_heads / shape.kv_heads;
  DenseAttentionF64 result;
  result.out.assign(q.size(), 0.0);
  result.lse.assign(static_cast<size_t>(shape.batch * shape.q_heads * n), 0.0);
  std::vector<double> p(static_cast<size_t>(n));
  for (int32_t b = 0; b < shape.batch; ++b) {
    for (int32_t h = 0; h < shape.q_heads; ++h) {
      const int32_t row = b * shape.q_heads + h;
      const size_t kv_at = reference::token_offset(b, h / group, 0, shape.kv_heads, n, dim);
      for (int64_t i = 0; i < n; ++i) {
        const size_t q_at = reference::token_offset(b, h, i, shape.q_heads, n, dim);
        result.lse[reference::row_offset(b, h, i, shape.q_heads, n)] =
            softmax_row(shape, softmax_scale, q.data() + q_at, k.data() + kv_at, row, i, allowed, p);
        for (int64_t key = 0; key < n; ++key) {
          const double weight = p[static_cast<size_t>(key)];
          if (weight == 0.0) continue;
          for (int64_t d = 0; d < dim; ++d) {
            result.out[q_at + static_cast<size_t>(d)] += weight * v[kv_at + static_cast<size_t>(key * dim + d)];
          }
        }
      }
    }
  }
  return result;
}

DenseAttentionGradsF64 dense_masked_attention_bwd_f64(const AttentionShape& shape, double softmax_scale,
                                                      std::span<const double> q, std::span<const double> k,
                                                      std::span<const double> v, std::span<const double> dout,
                                                      const PairPredicate& allowed) {
  check_dense(shape, q, k, v);
  require(dout.size() == q.size(), "dout has ", dout.size(), " elements, the shape needs ", q.size());
  const int64_t n = shape.q_len;
  const int64_t dim = shape.head_dim;
  const auto dim_size = static_cast<size_t>(dim);
  const int32_t group = shape.q_heads / shape.kv_heads;
  DenseAttentionGradsF64 grads;
  grads.dq.assign(q.size(), 0.0);
  grads.dk.assign(k.size(), 0.0);
  grads.dv.assign(v.size(), 0.0);
  std::vector<double> p(static_cast<size_t>(n));
  std::vector<double> dp(static_cast<size_t>(n));
  for (int32_t b = 0; b < shape.batch; ++b) {
    for (int32_t h = 0; h < shape.q_heads; ++h) {
      const int32_t row = b * shape.q_heads + h;
      const size_t kv_at = reference::token_offset(b, h / group, 0, shape.kv_heads, n, dim);
      for (int64_t i = 0; i < n; ++i) {
        const size_t q_at = reference::token_offset(b, h, i, shape.q_heads, n, dim);
        softmax_row(shape, softmax_scale, q.data() + q_at, k.data() + kv_at, row, i, allowed, p);
        // out_i = sum_j p_j v_j; dL/dp_j = dout_i . v_j; softmax Jacobian: ds_j = p_j (dp_j - sum_l p_l dp_l).
        double expected = 0.0;
        for (int64_t key = 0; key < n; ++key) {
          const auto e = static_cast<size_t>(key);
          dp[e] = dot(dout.data() + q_at, v.data() + kv_at + e * dim_size, dim);
          expected += p[e] * dp[e];
        }
        for (int64_t key = 0; key < n; ++key) {
          const auto e = static_cast<size_t>(key);
          if (p[e] == 0.0) continue;
          const double ds = p[e] * (dp[e] - expected) * softmax_scale;
          const size_t key_at = kv_at + e * dim_size;
          for (size_t d = 0; d < dim_size; ++d) {
            grads.dv[key_at + d] += p[e] * dout[q_at + d];
            grads.dq[q_at + d] += ds * k[key_at + d];
            grads.dk[key_at + d] += ds * q[q_at + d];
          }
        }
      }
    }
  }
  return grads;
}

}  // namespace sparsering
