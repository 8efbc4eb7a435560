#include "kernels/reference/sparse_attn_bwd_ref.hpp"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "kernels/bf16.hpp"
#include "kernels/reference/indexed_keys.hpp"
#include "kernels/reference/reference_checks.hpp"

namespace sparsering {

void attn_bwd_delta_ref(const AttnBwdDeltaParams& params) {
  using namespace reference;
  check_shape(params.shape);
  check_pointer(params.dout, "dout");
  check_pointer(params.out, "out");
  check_pointer(params.delta, "delta");
  const AttentionShape& shape = params.shape;
  const int64_t dim = shape.head_dim;
  for (int32_t b = 0; b < shape.batch; ++b) {
    for (int32_t h = 0; h < shape.q_heads; ++h) {
      for (int64_t q = 0; q < shape.q_len; ++q) {
        const size_t at = token_offset(b, h, q, shape.q_heads, shape.q_len, dim);
        double sum = 0.0;
        for (int64_t d = 0; d < dim; ++d) {
          const size_t e = at + static_cast<size_t>(d);
          sum += static_cast<double>(bf16_to_float(params.dout[e])) * static_cast<double>(params.out[e]);
        }
        params.delta[row_offset(b, h, q, shape.q_heads, shape.q_len)] = static_cast<float>(sum);
      }
    }
  }
}

void sparse_attn_bwd_ref(const SparseAttnBwdParams& params) {
  using namespace reference;
  const AttentionShape& shape = params.shape;
  check_ring_problem(shape, params.position);
  check_index_view(params.index, shape);
  require(std::isfinite(params.softmax_scale), "softmax_scale = ", params.softmax_scale, " is not finite");
  for (const auto& [pointer, name] :
       {std::pair<const void*, const char*>{params.q, "q"}, {params.k, "k"}, {params.v, "v"}, {params.dout, "dout"},
        {params.lse, "lse"}, {params.delta, "delta"}, {params.dq, "dq"}, {params.dk, "dk"}, {params.dv, "dv"}}) {
    check_pointer(pointer, name);
  }

  const IndexedKeys keys(params.index, shape, params.position);
  const int64_t dim = shape.head_dim;
  const auto dim_size = static_cast<size_t>(dim);
  const int32_t group = shape.q_heads / shape.kv_heads;
  const double scale = static_cast<double>(params.softmax_scale);
  auto widen = [dim_size](const bf16_bits* source, std::vector<double>& target) {
    for (size_t d = 0; d < dim_size; ++d) target[d] = static_cast<double>(bf16_to_float(source[d]));
  };

  // This step's dK and dV in fp64, added to the fp32 outputs once at the end.
  const size_t kv_elements = static_cast<size_t>(shape.batch) * static_cast<size_t>(shape.kv_heads) *
                             static_cast<size_t>(shape.kv_len) * dim_size;
  std::vector<double> dk(kv_elements, 0.0);
  std::vector<double> dv(kv_elements, 0.0);
  std::vector<double> query(dim_size), dout(dim_size), key(dim_size), value(dim_size), dq(dim_size);

  for (int32_t b = 0; b < shape.batch; ++b) {
    for (int32_t h = 0; h < shape.q_heads; ++h) {
      const int32_t row = b * shape.q_heads + h;
      const int32_t kv_head = h / group;
      const size_t kv_head_at = token_offset(b, kv_head, 0, shape.kv_heads, shape.kv_len, dim);
      for (int64_t q = 0; q < shape.q_len; ++q) {
        const size_t q_at = token_offset(b, h, q, shape.q_heads, shape.q_len, dim);
        const size_t stat_at = row_offset(b, h, q, shape.q_heads, shape.q_len);
        const double lse = static_cast<double>(params.lse[stat_at]);
        if (std::isinf(lse) && lse < 0.0) continue;  // the query saw no key at any step
        const double delta = static_cast<double>(params.delta[stat_at]);
        widen(params.q + q_at, query);
        widen(params.dout + q_at, dout);
        std::fill(dq.begin(), dq.end(), 0.0);
        keys.for_each_key(row, q, [&](int64_t k) {
          const size_t k_at = kv_head_at + static_cast<size_t>(k) * dim_size;
          widen(params.k + k_at, key);
          widen(params.v + k_at, value);
          double dot = 0.0;
          double dp = 0.0;
          for (size_t d = 0; d < dim_size; ++d) {
            dot += query[d] * key[d];
            dp += dout[d] * value[d];
          }
          const double p = std::exp(scale * dot - lse);
          const double ds = p * (dp - delta);
          for (size_t d = 0; d < dim_size; ++d) {
            dv[k_at + d] += p * dout[d];
            dq[d] += scale * ds * key[d];
            dk[k_at + d] += scale * ds * query[d];
          }
        });
        for (size_t d = 0; d < dim_size; ++d) {
          params.dq[q_at + d] = static_cast<float>(static_cast<double>(params.dq[q_at + d]) + dq[d]);
        }
      }
    }
  }
  for (size_t e = 0; e < kv_elements; ++e) {
    params.dk[e] = static_cast<float>(static_cast<double>(params.dk[e]) + dk[e]);
    params.dv[e] = static_cast<float>(static_cast<double>(params.dv[e]) + dv[e]);
  }
}

}  // namespace sparsering
