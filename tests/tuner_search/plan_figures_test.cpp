// Plan figures (tuner/search/plan_figures.hpp): components add up to the step on hand-built
// results, recomputation is attributed to its parts, and exposed communication counts waiting.
#include <gtest/gtest.h>

#include "tuner/search/plan_figures.hpp"

namespace sparsering {
namespace {

/// One layer: forward qkv 10, a2a 4 (comm), ring 30; backward mlp 20, ring 50, a2a 6 (comm).
/// Step adds LM head 5 (inside forward and backward totals), grad sync exposed 7, optimizer 3.
SimulationResult hand_result(RecomputeMode recompute) {
  SimulationResult r;
  LayerResult l;
  l.forward = {{"qkv_proj", 10, false}, {"ulysses_a2a_in", 4, true}, {"attention_ring", 30, false}};
  for (const LayerPhase& p : l.forward) l.forward_ns += p.duration_ns;
  if (recompute == RecomputeMode::full) l.backward.push_back({"recompute_forward", l.forward_ns, false});
  if (recompute == RecomputeMode::selective) l.backward.push_back({"attention_recompute", 30, false});
  l.backward.push_back({"mlp_bwd", 20, false});
  l.backward.push_back({"attention_ring_bwd", 50, false});
  l.backward.push_back({"layout_a2a_out", 6, true});
  for (const LayerPhase& p : l.backward) l.backward_ns += p.duration_ns;
  l.attention_fwd_ns = 30;
  l.attention_bwd_ns = 50;
  r.layers.push_back(l);
  r.step.lm_head_ns = 5;
  r.step.grad_sync_exposed_ns = 7;
  r.step.optimizer_ns = 3;
  r.step.forward_ns = l.forward_ns + 2;
  r.step.backward_ns = l.backward_ns + 3;
  r.step.step_ns = r.step.forward_ns + r.step.backward_ns + 7 + 3;
  r.memory.peak_bytes = int64_t{3} << 30;
  // Busiest ranks: forward 24 of the ring's 30, backward 50 of 50.
  r.layers.front().busiest_kernel_fwd_ns = 24;
  r.layers.front().busiest_kernel_bwd_ns = 50;
  return r;
}

TEST(PlanFigures, ComponentsAddUpToTheStep) {
  for (const RecomputeMode mode : {RecomputeMode::none, RecomputeMode::selective, RecomputeMode::full}) {
    const SimulationResult r = hand_result(mode);
    const PlanFigures f = plan_figures(r, mode);
    EXPECT_NEAR(f.attention_ms + f.dense_ms + f.collectives_ms + f.grad_sync_ms + f.optimizer_ms, f.step_ms, 1e-12)
        << to_string(mode);
    EXPECT_DOUBLE_EQ(f.peak_memory_gib, 3.0);
    EXPECT_NEAR(f.attention_fwd_bwd_ms, 80e-6, 1e-15);
  }
}

TEST(PlanFigures, RecomputationIsAttributedToItsParts) {
  const PlanFigures none = plan_figures(hand_result(RecomputeMode::none), RecomputeMode::none);
  const PlanFigures full = plan_figures(hand_result(RecomputeMode::full), RecomputeMode::full);
  const PlanFigures selective = plan_figures(hand_result(RecomputeMode::selective), RecomputeMode::selective);
  EXPECT_NEAR(none.attention_ms, 80e-6, 1e-15);
  EXPECT_NEAR(full.attention_ms, 110e-6, 1e-15);      // the forward ring again
  EXPECT_NEAR(full.collectives_ms, 14e-6, 1e-15);     // the forward all-to-all again
  EXPECT_NEAR(full.dense_ms, none.dense_ms + 10e-6, 1e-15);
  EXPECT_NEAR(selective.attention_ms, 110e-6, 1e-15);
  EXPECT_NEAR(selective.dense_ms, none.dense_ms, 1e-15);
}

TEST(PlanFigures, ExposedCommunicationCountsRingWaiting) {
  // Forward ring 30 vs busiest rank 24: 6 waiting; backward 50 vs 50: none. Plus collectives 10
  // and grad sync 7.
  const PlanFigures f = plan_figures(hand_result(RecomputeMode::none), RecomputeMode::none);
  EXPECT_NEAR(f.exposed_comm_ms, (6 + 10 + 7) * 1e-6, 1e-15);
  // A ring that waits for nothing exposes only collectives and grad sync.
  SimulationResult bare = hand_result(RecomputeMode::none);
  bare.layers.front().busiest_kernel_fwd_ns = 30;
  EXPECT_NEAR(plan_figures(bare, RecomputeMode::none).exposed_comm_ms, 17e-6, 1e-15);
}

}  // namespace
}  // namespace sparsering
