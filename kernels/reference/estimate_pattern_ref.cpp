#include "kernels/reference/estimate_pattern_ref.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/error.hpp"
#include "kernels/bf16.hpp"
#include "kernels/reference/reference_checks.hpp"

namespace sparsering {
namespace {

void check_estimate(const EstimateParams& params) {
  using namespace reference;
  const AttentionShape& shape = params.shape;
  check_shape(shape);
  const TokenLayout& layout = params.position.layout;
  require(params.position.kv_rank >= 0 && params.position.kv_rank < layout.ranks(), "position.kv_rank = ",
          params.position.kv_rank, " is outside [0, ", layout.ranks(), ")");
  require(shape.q_len >= 1 && shape.q_len <= layout.seq_len_tokens(), "last_q (shape.q_len) = ", shape.q_len,
          " must be in [1, ", layout.seq_len_tokens(), "]");
  require(shape.kv_len == layout.local_len(), "shape.kv_len = ", shape.kv_len, " must equal the layout's local length ",
          layout.local_len());
  require(std::isfinite(params.softmax_scale), "softmax_scale = ", params.softmax_scale, " is not finite");
  check_pointer(params.q_last, "q_last");
  check_pointer(params.k, "k");
  check_pointer(params.row_max, "row_max");
  check_pointer(params.row_sum, "row_sum");
}

// Calls visit(t, k, score) for every (query t, visible local key k) of one (batch, head), with
// score = scale q_t . k_k in fp64.
template <typename Visit>
void for_each_visible_score(const EstimateParams& params, int32_t b, int32_t h, Visit&& visit) {
  const AttentionShape& shape = params.shape;
  const TokenLayout& layout = params.position.layout;
  const int64_t dim = shape.head_dim;
  const int32_t kv_head = h / (shape.q_heads / shape.kv_heads);
  const int64_t first_query = layout.seq_len_tokens() - shape.q_len;  // global position of query 0
  const double scale = static_cast<double>(params.softmax_scale);
  std::vector<double> query(static_cast<size_t>(dim));
  for (int64_t t = 0; t < shape.q_len; ++t) {
    const bf16_bits* q = params.q_last + reference::token_offset(b, h, t, shape.q_heads, shape.q_len, dim);
    for (int64_t d = 0; d < dim; ++d) query[static_cast<size_t>(d)] = static_cast<double>(bf16_to_float(q[d]));
    for (int64_t k = 0; k < shape.kv_len; ++k) {
      const int64_t key_global = layout.global_token(params.position.kv_rank, k);
      if (key_global > first_query + t) continue;  // causal
      const bf16_bits* key = params.k + reference::token_offset(b, kv_head, k, shape.kv_heads, shape.kv_len, dim);
      double dot = 0.0;
      for (int64_t d = 0; d < dim; ++d) dot += query[static_cast<size_t>(d)] * static_cast<double>(bf16_to_float(key[d]));
      visit(t, k, first_query + t - key_global, scale * dot);
    }
  }
}

}  // namespace

void estimate_pattern_pass1_ref(const EstimateParams& params) {
  check_estimate(params);
  const AttentionShape& shape = params.shape;
  const auto last_q = static_cast<size_t>(shape.q_len);
  std::vector<double> max(last_q), sum(last_q);
  for (int32_t b = 0; b < shape.batch; ++b) {
    for (int32_t h = 0; h < shape.q_heads; ++h) {
      std::fill(max.begin(), max.end(), -std::numeric_limits<double>::infinity());
      std::fill(sum.begin(), sum.end(), 0.0);
      // Online: the same rescaling as the kernel's single sweep over the shard.
      for_each_visible_score(params, b, h, [&](int64_t t, int64_t, int64_t, double score) {
        const auto n = static_cast<size_t>(t);
        if (score > max[n]) {
          sum[n] *= std::exp(max[n] - score);
          max[n] = score;
        }
        sum[n] += std::exp(score - max[n]);
      });
      for (size_t n = 0; n < last_q; ++n) {
        const size_t at = reference::row_offset(b, h, static_cast<int64_t>(n), shape.q_heads, shape.q_len);
        params.row_max[at] = static_cast<float>(max[n]);
        params.row_sum[at] = static_cast<float>(sum[n]);
      }
    }
  }
}

void estimate_pattern_combine_ref(int64_t rows, const float* shard_max, const float* shard_sum, float* row_max,
                                  float* row_sum) {
  require(rows >= 0, "rows = ", rows, " is negative");
  for (const void* pointer : {static_cast<const void*>(shard_max), static_cast<const void*>(shard_sum),
                              static_cast<const void*>(row_max), static_cast<const void*>(row_sum)}) {
    reference::check_pointer(pointer, "a row statistics array");
  }
  for (int64_t n = 0; n < rows; ++n) {
    const auto e = static_cast<size_t>(n);
    const double max_a = static_cast<double>(row_max[e]);
    const double max_b = static_cast<double>(shard_max[e]);
    const double max = std::max(max_a, max_b);
    if (std::isinf(max) && max < 0.0) continue;  // neither side saw a key: stays (-inf, 0)
    const double sum = static_cast<double>(row_sum[e]) * std::exp(max_a - max) +
                       static_cast<double>(shard_sum[e]) * std::exp(max_b - max);
    row_max[e] = static_cast<float>(max);
    row_sum[e] = static_cast<float>(sum);
  }
}

void estimate_pattern_pass2_ref(const EstimateParams& params) {
  check_estimate(params);
  reference::check_pointer(params.vertical_mass, "vertical_mass");
  reference::check_pointer(params.slash_mass, "slash_mass");
  const AttentionShape& shape = params.shape;
  const int64_t seq_len = params.position.layout.seq_len_tokens();
  std::vector<double> vertical(static_cast<size_t>(shape.kv_len));
  std::vector<double> slash(static_cast<size_t>(seq_len));
  for (int32_t b = 0; b < shape.batch; ++b) {
    for (int32_t h = 0; h < shape.q_heads; ++h) {
      std::fill(vertical.begin(), vertical.end(), 0.0);
      std::fill(slash.begin(), slash.end(), 0.0);
      const size_t stats_at = reference::row_offset(b, h, 0, shape.q_heads, shape.q_len);
      for_each_visible_score(params, b, h, [&](int64_t t, int64_t k, int64_t offset, double score) {
        const auto n = stats_at + static_cast<size_t>(t);
        const double row_sum = static_cast<double>(params.row_sum[n]);
        if (!(row_sum > 0.0)) return;  // statistics say no key at all: nothing to share out
        const double p = std::exp(score - static_cast<double>(params.row_max[n])) / row_sum;
        vertical[static_cast<size_t>(k)] += p;
        slash[static_cast<size_t>(offset)] += p;
      });
      float* vertical_out = params.vertical_mass + reference::row_offset(b, h, 0, shape.q_heads, shape.kv_len);
      for (size_t k = 0; k < vertical.size(); ++k) vertical_out[k] = static_cast<float>(vertical[k]);
      float* slash_out = params.slash_mass + reference::row_offset(b, h, 0, shape.q_heads, seq_len);
      for (size_t d = 0; d < slash.size(); ++d) {
        slash_out[d] = static_cast<float>(static_cast<double>(slash_out[d]) + slash[d]);
      }
    }
  }
}

}  // namespace sparsering
