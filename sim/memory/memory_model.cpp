#include "sim/memory/memory_model.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "common/table.hpp"

namespace sparsering {

int64_t MemoryReport::bytes_of(const std::string& name) const {
  for (const MemoryItem& item : items) {
    if (item.name == name) return item.bytes;
  }
  return 0;
}

int64_t activation_bytes_per_token(const ModelConfig& model) {
  const int64_t b = model.bytes_per_param;
  const int64_t h = model.hidden_size;
  const int64_t qkv = (model.q_heads + 2 * model.kv_heads) * model.head_dim;
  const int64_t out = model.q_heads * model.head_dim;
  const int64_t mlp = (model.gated_mlp() ? 3 : 2) * model.ffn_hidden_size;
  // Two norm inputs and two norm outputs (h each), Q/K/V, the attention output, the MLP
  // intermediates; plus the fp32 log-sum-exp per query head.
  return b * (4 * h + qkv + out + mlp) + 4 * model.q_heads;
}

int64_t kv_chunk_buffers(const PlanConfig& plan) {
  if (plan.comm == CommPrimitive::all_gather) return plan.context_parallel;
  int64_t outer = 0;
  for (size_t l = 1; l < plan.ring_levels.size(); ++l) outer += plan.ring_levels[l].size > 1 ? 1 : 0;
  return 2 + outer;
}

MemoryReport estimate_memory(const PlanConfig& plan, const ModelConfig& model, const GpuConfig& gpu,
                             const LayerShapes& shapes, int64_t index_bytes) {
  MemoryReport report;
  const int64_t params = model.parameter_count();
  // Every GPU holds a full replica (no tensor or pipeline parallelism), so ZeRO/FSDP shards over
  // all of them: data x context x head parallel, as Megatron's distributed optimizer shards over
  // the data-parallel group with context parallelism and torchtitan's FSDP over dp_shard x cp.
  const int64_t dp = plan.world_size();
  const int64_t b = model.bytes_per_param;
  const auto shard = [dp](int64_t bytes) { return (bytes + dp - 1) / dp; };
  int64_t weights = params * b;
  int64_t grads = params * b;
  int64_t optimizer = params * 12;  // fp32 master weights + Adam first and second moments
  if (plan.zero_stage >= 1) optimizer = shard(optimizer);
  if (plan.zero_stage >= 2) grads = shard(grads);
  if (plan.zero_stage >= 3) weights = shard(weights) + model.block_parameter_count() * b;  // + one gathered layer

  const int64_t per_token = activation_bytes_per_token(model);
  const int64_t lse_and_out = model.q_heads * model.head_dim * b + 4 * model.q_heads;
  int64_t activations = 0;
  switch (plan.recompute) {
    case RecomputeMode::none:
      activations = model.layers * shapes.dense_tokens * per_token;
      break;
    case RecomputeMode::selective:  // core attention recomputed: its output and LSE are not kept
      activations = model.layers * shapes.dense_tokens * (per_token - lse_and_out);
      break;
    case RecomputeMode::full:  // only each layer's input, plus one layer rebuilt during backward
      activations = model.layers * shapes.dense_tokens * model.hidden_size * b + shapes.dense_tokens * per_token;
      break;
  }
  // Ring buffers: K/V chunk buffers (kv_chunk_buffers); forward keeps the running fp32 output and
  // LSE; backward adds the dK/dV accumulators (in, out, own) and fp32 dQ.
  const int64_t kv_buffers = kv_chunk_buffers(plan) * shapes.kv_chunk_bytes;
  const int64_t out_fp32 = shapes.attention_tokens * shapes.q_heads_local * (shapes.head_dim + 1) * 4;
  const int64_t forward_ring = kv_buffers + out_fp32;
  const int64_t backward_ring = kv_buffers + 3 * shapes.dkv_chunk_bytes + shapes.attention_tokens * shapes.q_heads_local * shapes.head_dim * 4;
  const int64_t ring = std::max(forward_ring, backward_ring);
  const int64_t logits = shapes.dense_tokens * model.vocab_size * 4;

  report.items = {{"weights", weights},     {"gradients", grads},  {"optimizer", optimizer},
                  {"activations", activations}, {"ring_buffers", ring}, {"index", index_bytes},
                  {"logits", logits}};
  for (const MemoryItem& item : report.items) report.peak_bytes += item.bytes;
  report.capacity_bytes = gpu.memory_bytes();
  report.fits = report.peak_bytes <= report.capacity_bytes;
  if (!report.fits) {
    std::vector<MemoryItem> sorted = report.items;
    std::sort(sorted.begin(), sorted.end(), [](const MemoryItem& a, const MemoryItem& x) { return a.bytes > x.bytes; });
    const auto gib = [](int64_t bytes) { return fixed(static_cast<double>(bytes) / static_cast<double>(int64_t{1} << 30), 2); };
    report.reason = str("needs ", gib(report.peak_bytes), " GiB per GPU, the GPU has ", gib(report.capacity_bytes),
                        " GiB; largest: ", sorted[0].name, " ", gib(sorted[0].bytes), " GiB, ", sorted[1].name, " ",
                        gib(sorted[1].bytes), " GiB, ", sorted[2].name, " ", gib(sorted[2].bytes), " GiB");
  }
  return report;
}

}  // namespace sparsering
