#include "tuner/search/plan_figures.hpp"

#include <algorithm>

namespace sparsering {

namespace {

bool is_attention(const LayerPhase& phase) { return phase.name.rfind("attention", 0) == 0; }

}  // namespace

PlanFigures plan_figures(const SimulationResult& result, RecomputeMode recompute) {
  PlanFigures f;
  f.step_ms = ns_to_ms(result.step.step_ns);
  f.tokens_per_s = result.step.tokens_per_s;
  f.worker_imbalance = result.worker_imbalance;
  f.step_imbalance = result.step_imbalance;
  f.exposed_share = result.exposed_share;
  f.peak_memory_gib = static_cast<double>(result.memory.peak_bytes) / static_cast<double>(int64_t{1} << 30);

  const bool full = recompute == RecomputeMode::full;
  const bool selective = recompute == RecomputeMode::selective;
  SimNs attention = 0, dense = 0, collectives = 0, ring_exposed = 0, fwd_bwd = 0;
  for (const LayerResult& layer : result.layers) {
    for (const LayerPhase& phase : layer.forward) {
      const SimNs d = phase.duration_ns * (full ? 2 : 1);
      if (phase.communication) {
        collectives += d;
      } else if (is_attention(phase)) {
        attention += d;
      } else {
        dense += d;
      }
    }
    for (const LayerPhase& phase : layer.backward) {
      if (phase.name == "recompute_forward") continue;  // attributed with the forward phases
      if (phase.communication) {
        collectives += phase.duration_ns;
      } else if (is_attention(phase)) {
        attention += phase.duration_ns;
      } else {
        dense += phase.duration_ns;
      }
    }
    fwd_bwd += layer.attention_fwd_ns + layer.attention_bwd_ns;
    const SimNs fwd = std::max<SimNs>(0, layer.attention_fwd_ns - layer.busiest_kernel_fwd_ns);
    const SimNs bwd = std::max<SimNs>(0, layer.attention_bwd_ns - layer.busiest_kernel_bwd_ns);
    ring_exposed += fwd * ((full || selective) ? 2 : 1) + bwd;
  }
  dense += result.step.lm_head_ns;
  f.attention_ms = ns_to_ms(attention);
  f.dense_ms = ns_to_ms(dense);
  f.collectives_ms = ns_to_ms(collectives);
  f.grad_sync_ms = ns_to_ms(result.step.grad_sync_exposed_ns);
  f.optimizer_ms = ns_to_ms(result.step.optimizer_ns);
  f.attention_fwd_bwd_ms = ns_to_ms(fwd_bwd);
  f.exposed_comm_ms = ns_to_ms(collectives + result.step.grad_sync_exposed_ns + ring_exposed);
  return f;
}

}  // namespace sparsering
