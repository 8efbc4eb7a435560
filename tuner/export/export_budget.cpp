// The memory estimate of an export (tuner/export/export_budget.hpp). Tested in
// tests/tuner/export_budget_test.cpp and tests/cli/resource_budget_cli_test.cpp.
#include "tuner/export/export_budget.hpp"

#include <thread>

#include "sim/step/resource_estimate.hpp"

namespace sparsering {

namespace {

// The token permutation: an int64 matrix and its .npy bytes, or plan.json's JSON values and text.
constexpr double kNpyPermutationBytesPerToken = 16.0;
constexpr double kJsonPermutationBytesPerToken = 56.0;
// Per GPU of the plan: torch's JSON object (groups, neighbours, heads), te's rank lists, the
// others' rank order.
constexpr double kTorchBytesPerRank = 4400.0;
constexpr double kTeBytesPerRank = 80.0;
constexpr double kRankOrderBytesPerRank = 24.0;
// chakra: execution-trace bytes per (rank, ring step, layer), forward and backward; the step
// durations (forward and backward int64 per rank, step and layer); a durations file as parsed.
constexpr double kTraceBytesPerRankStepLayer = 900.0;
constexpr double kDurationBytesPerRankStepLayer = 2 * 8.0;
constexpr double kParsedBytesPerDurationsByte = 16.0;

}  // namespace

ExportMemoryEstimate estimate_export_memory(ExportTarget target, const ExportInput& input, const ExportOptions& options,
                                            double input_bytes) {
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  const PlanConfig& plan = input.plan;
  const double ranks = d(plan.world_size());
  ExportMemoryEstimate e;
  e.parts.push_back({"process", kProcessBaseBytes});
  switch (target) {
    case ExportTarget::chakra: {
      const int64_t layers = options.chakra_layers > 0 ? options.chakra_layers : input.model.layers;
      const double cells = ranks * d(plan.context_parallel) * d(layers);
      e.parts.push_back({"execution traces (ranks x ring steps x layers)", cells * kTraceBytesPerRankStepLayer});
      e.parts.push_back({"step durations", cells * kDurationBytesPerRankStepLayer});
      if (!options.durations_path.empty()) {
        e.parts.push_back({"durations file as parsed", input_bytes * kParsedBytesPerDurationsByte});
        break;
      }
      // The in-process simulation, as simulate --out estimates it (ring records kept).
      SimulationOptions simulation;
      simulation.keep_ring_records = true;
      simulation.threads = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
      const SimulationResourceEstimate sim =
          estimate_simulation_resources(plan, input.model, simulation, plan.sparse.enabled ? input_bytes : 0.0);
      e.parts.push_back({str("the plan's simulation (largest: ", sim.largest(1), ")"), sim.memory_bytes - kProcessBaseBytes});
      break;
    }
    case ExportTarget::torch:
      e.parts.push_back({"token permutation in plan.json (JSON values and text)",
                         d(plan.seq_len_tokens) * kJsonPermutationBytesPerToken});
      e.parts.push_back({"ranks in plan.json (groups and neighbours)", ranks * kTorchBytesPerRank});
      break;
    case ExportTarget::te:
    case ExportTarget::megatron:
    case ExportTarget::torchtitan:
    case ExportTarget::mtraining:
      e.parts.push_back({"token permutation (int64 matrix and .npy bytes)",
                         d(plan.seq_len_tokens) * kNpyPermutationBytesPerToken});
      e.parts.push_back({"rank tables", ranks * (target == ExportTarget::te ? kTeBytesPerRank : kRankOrderBytesPerRank)});
      break;
  }
  e.bytes = sort_and_sum(e.parts);
  return e;
}

}  // namespace sparsering
