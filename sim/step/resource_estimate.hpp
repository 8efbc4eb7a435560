// What one simulate() call will need before it runs: peak memory by item (work counting scratch
// over query blocks, per-ring link tables and work matrices over W x W cells, ring records when
// they are kept, the trace) and an abstract work figure the tuner multiplies by its candidates.
// The figures follow the data structures of sim/work/, sim/ring/ and sim/step/ (docs/simulator.md
// sections 1, 4 and 11). Tested in tests/sim/resource_estimate_test.cpp and against the measured
// peak of the binary in tests/cli/resource_budget_cli_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/memory_budget.hpp"
#include "sim/config/model_config.hpp"
#include "sim/config/plan_config.hpp"
#include "sim/step/simulation.hpp"

namespace sparsering {

struct SimulationResourceEstimate {
  std::vector<MemoryEstimatePart> items;  ///< every part, largest first
  double memory_bytes = 0.0;        ///< sum of the items: the estimated peak resident memory
  /// Of memory_bytes, the work matrices: what a SimulationContext keeps and shares among the
  /// simulations of one geometry (the tuner counts them once, not per thread).
  double work_set_bytes = 0.0;
  /// Abstract work of the simulation (cells counted and simulated); about 1e8 per second of CPU
  /// on the development machine of docs/simulator.md section 10.
  double work_units = 0.0;

  /// "name X GiB, name Y GiB" for the `count` largest items.
  std::string largest(size_t count = 2) const;
};

/// Estimates the peak memory (bytes, doubles so that no legal plan overflows) and work of
/// simulate(plan, model, ..., options) without allocating anything proportional to the plan.
/// `trace_bytes` is the size of the trace file (0 for dense plans). Preconditions: the plan
/// parsed (its layout is valid).
SimulationResourceEstimate estimate_simulation_resources(const PlanConfig& plan, const ModelConfig& model,
                                                         const SimulationOptions& options, double trace_bytes);

}  // namespace sparsering
