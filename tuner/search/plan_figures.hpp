// What the tuner reports about a simulated plan: the figures of its ranked table and the parts of
// the step they come from, so that two plans can be compared component by component ("why the
// winner beats the runner-up"). Everything is derived from a SimulationResult.
//
// Components of the step (they add up to the step time):
//   attention    every attention ring pass, forward and backward, plus recomputed attention
//                (selective recompute, or the attention inside a full recompute);
//   dense        GEMMs (projections, MLP, estimation scores, LM head) including full recompute;
//   collectives  layout and Ulysses all-to-alls and estimation collectives (again when recomputed);
//   grad sync    the gradient synchronisation not hidden behind backward;
//   optimizer    the Adam update.
// Exposed communication: collectives + grad sync + the ring-attention time beyond the busiest
// rank's kernel time (per layer and direction, counted again when recomputed; the simulator
// reports that kernel time with or without ring records).
// Tested in tests/tuner_search/plan_figures_test.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "sim/step/simulation.hpp"

namespace sparsering {

struct PlanFigures {
  double step_ms = 0.0;
  double tokens_per_s = 0.0;
  double attention_ms = 0.0;    ///< component (file comment)
  double dense_ms = 0.0;
  double collectives_ms = 0.0;
  double grad_sync_ms = 0.0;
  double optimizer_ms = 0.0;
  double attention_fwd_bwd_ms = 0.0;  ///< forward + backward ring passes, all layers (no recompute)
  double exposed_comm_ms = 0.0;
  double worker_imbalance = 1.0;
  double step_imbalance = 1.0;
  double exposed_share = 0.0;   ///< share of forward ring steps whose K/V arrived late
  double peak_memory_gib = 0.0;
};

/// The figures of one simulation of a plan with recompute mode `recompute`.
PlanFigures plan_figures(const SimulationResult& result, RecomputeMode recompute);

}  // namespace sparsering
