// The simulation's resource estimate (sim/step/resource_estimate.hpp): finite for the largest legal
// plans, grows with tokens per rank and with W^2, and counts kept ring records.
#include <cmath>

#include <gtest/gtest.h>

#include "sim/step/resource_estimate.hpp"
#include "tests/sim/sim_test_inputs.hpp"

namespace sparsering {
namespace {

TEST(ResourceEstimate, GrowsWithTokensAndRingAndRecords) {
  ModelConfig model;
  model.layers = 4;
  model.q_heads = 8;
  PlanConfig plan;
  plan.seq_len_tokens = int64_t{1} << 20;
  plan.context_parallel = 4;
  plan.sparse.enabled = false;
  SimulationOptions options;
  options.keep_ring_records = false;
  const SimulationResourceEstimate base = estimate_simulation_resources(plan, model, options, 0.0);
  plan.seq_len_tokens = int64_t{1} << 40;
  const SimulationResourceEstimate long_seq = estimate_simulation_resources(plan, model, options, 0.0);
  EXPECT_TRUE(std::isfinite(long_seq.memory_bytes));
  EXPECT_GT(long_seq.memory_bytes, 1000.0 * base.memory_bytes);
  plan.seq_len_tokens = int64_t{1} << 20;
  plan.context_parallel = int64_t{1} << 20;
  const SimulationResourceEstimate wide = estimate_simulation_resources(plan, model, options, 0.0);
  EXPECT_GT(wide.memory_bytes, 1e14);  // W^2 = 2^40 cells
  options.keep_ring_records = true;
  plan.context_parallel = 4;
  const SimulationResourceEstimate kept = estimate_simulation_resources(plan, model, options, 0.0);
  EXPECT_GT(kept.memory_bytes, base.memory_bytes);
  EXPECT_FALSE(kept.largest().empty());
}

}  // namespace
}  // namespace sparsering
