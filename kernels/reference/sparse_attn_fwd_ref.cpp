#include "kernels/reference/sparse_attn_fwd_ref.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "kernels/bf16.hpp"
#include "kernels/reference/indexed_keys.hpp"
#include "kernels/reference/reference_checks.hpp"

namespace sparsering {

void sparse_attn_fwd_ref(const SparseAttnFwdParams& params) {
  using namespace reference;
  const AttentionShape& shape = params.shape;
  check_ring_problem(shape, params.position);
  check_index_view(params.index, shape);
  require(std::isfinite(params.softmax_scale), "softmax_scale = ", params.softmax_scale, " is not finite");
  for (const auto& [pointer, name] : {std::pair<const void*, const char*>{params.q, "q"}, {params.k, "k"},
                                      {params.v, "v"}, {params.out, "out"}, {params.lse, "lse"}}) {
    check_pointer(pointer, name);
  }

  const IndexedKeys keys(params.index, shape, params.position);
  const int64_t dim = shape.head_dim;
  const int32_t group = shape.q_heads / shape.kv_heads;  // query heads per K/V head (GQA)
  const double scale = static_cast<double>(params.softmax_scale);
  std::vector<double> query(static_cast<size_t>(dim));
  std::vector<double> acc(static_cast<size_t>(dim));

  for (int32_t b = 0; b < shape.batch; ++b) {
    for (int32_t h = 0; h < shape.q_heads; ++h) {
      const int32_t row = b * shape.q_heads + h;
      const int32_t kv_head = h / group;
      const bf16_bits* k_head = params.k + reference::token_offset(b, kv_head, 0, shape.kv_heads, shape.kv_len, dim);
      const bf16_bits* v_head = params.v + reference::token_offset(b, kv_head, 0, shape.kv_heads, shape.kv_len, dim);
      for (int64_t q = 0; q < shape.q_len; ++q) {
        const size_t q_at = reference::token_offset(b, h, q, shape.q_heads, shape.q_len, dim);
        for (int64_t d = 0; d < dim; ++d) query[static_cast<size_t>(d)] = static_cast<double>(bf16_to_float(params.q[q_at + static_cast<size_t>(d)]));

        // Online softmax: running max m, running sum l of exp(s - m), acc = sum exp(s - m) v.
        double m = -std::numeric_limits<double>::infinity();
        double l = 0.0;
        std::fill(acc.begin(), acc.end(), 0.0);
        keys.for_each_key(row, q, [&](int64_t k) {
          const bf16_bits* key = k_head + k * dim;
          const bf16_bits* value = v_head + k * dim;
          double dot = 0.0;
          for (int64_t d = 0; d < dim; ++d) dot += query[static_cast<size_t>(d)] * static_cast<double>(bf16_to_float(key[d]));
          const double s = scale * dot;
          if (s > m) {
            const double rescale = std::exp(m - s);  // 0 on the first key (m = -inf)
            l *= rescale;
            for (double& a : acc) a *= rescale;
            m = s;
          }
          const double p = std::exp(s - m);
          l += p;
          for (int64_t d = 0; d < dim; ++d) acc[static_cast<size_t>(d)] += p * static_cast<double>(bf16_to_float(value[d]));
        });
        if (l == 0.0) continue;  // no pair this step: the running output stays as it is

        // Merge: lse = logaddexp(lse_old, lse_step), out = out_old e^(lse_old-lse) + out_step e^(lse_step-lse).
        const double lse_step = m + std::log(l);
        float& lse = params.lse[reference::row_offset(b, h, q, shape.q_heads, shape.q_len)];
        const double lse_old = static_cast<double>(lse);
        const double lse_new = lse_old > lse_step ? lse_old + std::log1p(std::exp(lse_step - lse_old))
                                                  : lse_step + std::log1p(std::exp(lse_old - lse_step));
        const double weight_old = std::exp(lse_old - lse_new);  // 0 before the first step (lse_old = -inf)
        const double weight_step = std::exp(lse_step - lse_new) / l;  // out_step = acc / l
        float* out = params.out + q_at;
        for (int64_t d = 0; d < dim; ++d) {
          out[d] = static_cast<float>(static_cast<double>(out[d]) * weight_old + acc[static_cast<size_t>(d)] * weight_step);
        }
        lse = static_cast<float>(lse_new);
      }
    }
  }
}

}  // namespace sparsering
