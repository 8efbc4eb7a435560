#include "sim/step/layer_shapes.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace sparsering {

LayerShapes layer_shapes(const PlanConfig& plan, const ModelConfig& model) {
  const int64_t w = plan.context_parallel;
  const int64_t u = plan.head_parallel;
  require(w >= 1 && u >= 1, "context_parallel and head_parallel must be >= 1");
  require(model.q_heads % u == 0, "head_parallel (", u, ") must divide the query heads (", model.q_heads, ")");
  require(plan.seq_len_tokens % (w * u) == 0, "seq_len_tokens (", plan.seq_len_tokens,
          ") must be divisible by context_parallel x head_parallel (", w * u, ")");
  LayerShapes s;
  const int64_t b = plan.micro_batch_sequences;
  s.dense_tokens = b * plan.seq_len_tokens / (w * u);
  s.attention_tokens = b * plan.seq_len_tokens / w;
  s.q_heads_local = model.q_heads / u;
  s.kv_heads_local = std::max<int64_t>(1, model.kv_heads / u);
  s.head_dim = model.head_dim;
  s.bytes_per_value = model.bytes_per_param;
  const auto tokens = static_cast<double>(s.dense_tokens);
  const auto hidden = static_cast<double>(model.hidden_size);
  const auto d = static_cast<double>(model.head_dim);
  s.qkv_flops = 2.0 * tokens * hidden * static_cast<double>(model.q_heads + 2 * model.kv_heads) * d;
  s.out_proj_flops = 2.0 * tokens * static_cast<double>(model.q_heads) * d * hidden;
  s.mlp_flops = 2.0 * tokens * hidden * static_cast<double>(model.ffn_hidden_size) * (model.gated_mlp() ? 3.0 : 2.0);
  s.lm_head_flops = 2.0 * tokens * hidden * static_cast<double>(model.vocab_size);
  const int64_t kv_values = s.attention_tokens * s.kv_heads_local * s.head_dim;
  s.kv_chunk_bytes = 2 * kv_values * s.bytes_per_value;
  s.dkv_chunk_bytes = 2 * kv_values * 4;
  s.qkv_local_bytes = s.attention_tokens * (s.q_heads_local + 2 * s.kv_heads_local) * s.head_dim * s.bytes_per_value;
  s.out_local_bytes = s.attention_tokens * s.q_heads_local * s.head_dim * s.bytes_per_value;
  return s;
}

}  // namespace sparsering
