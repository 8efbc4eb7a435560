#include "tuner/export/chakra/simulated_durations.hpp"

#include <algorithm>
#include <thread>

#include "common/error.hpp"
#include "traces/safetensors_trace.hpp"

namespace sparsering {

StepDurations step_durations_from_simulation(const SimulationResult& result, const PlanConfig& plan) {
  require(result.context_parallel == plan.context_parallel && result.head_parallel == plan.head_parallel &&
              result.data_parallel == plan.data_parallel,
          "the simulation is of context_parallel x head_parallel x data_parallel = ", result.context_parallel, " x ",
          result.head_parallel, " x ", result.data_parallel, " but the plan has ", plan.context_parallel, " x ",
          plan.head_parallel, " x ", plan.data_parallel);
  require(!result.rings.empty(), "the simulation kept no per-step ring records");
  const int64_t world = plan.world_size();
  const int64_t steps = plan.context_parallel;
  std::vector<StepMatrix> passes[2];         // [backward][layer]
  std::vector<std::vector<bool>> filled[2];  // [backward][layer][rank]
  for (const RingPassResult& pass : result.rings) {
    const int b = pass.backward ? 1 : 0;
    const auto layer = static_cast<size_t>(pass.layer);
    if (passes[b].size() <= layer) {
      passes[b].resize(layer + 1, StepMatrix(static_cast<size_t>(world)));
      filled[b].resize(layer + 1, std::vector<bool>(static_cast<size_t>(world), false));
    }
    require(pass.compute_ns.size() == static_cast<size_t>(steps * steps), "the simulated ring pass of layer ",
            pass.layer, " has ", pass.compute_ns.size(), " step figures, not ", steps, " x ", steps);
    const RingClass& cls = result.ring_classes.at(static_cast<size_t>(pass.ring_class));
    for (int64_t p = 0; p < steps; ++p) {
      const auto first = pass.compute_ns.begin() + static_cast<std::ptrdiff_t>(p * steps);
      const std::vector<int64_t> row(first, first + static_cast<std::ptrdiff_t>(steps));
      for (const int64_t ring : cls.rings) {
        const auto g = static_cast<size_t>(plan.global_rank(ring, p));
        passes[b][layer][g] = row;
        filled[b][layer][g] = true;
      }
    }
  }
  require(!passes[0].empty(), "the simulation has no forward ring pass");
  for (int b = 0; b < 2; ++b) {
    for (size_t layer = 0; layer < filled[b].size(); ++layer) {
      for (size_t g = 0; g < filled[b][layer].size(); ++g) {
        require(filled[b][layer][g], "the simulated ", b ? "backward" : "forward", " pass of layer ", layer,
                " has no figures for global rank ", g);
      }
    }
  }
  require(passes[1].empty() || passes[1].size() == passes[0].size(), "the simulation has ", passes[0].size(),
          " forward layers but ", passes[1].size(), " backward layers");
  return StepDurations{std::move(passes[0]), std::move(passes[1])};
}

StepDurations simulate_step_durations(const ExportInput& input, const std::filesystem::path& trace_path,
                                      int64_t sample) {
  require(sample >= 0, "chakra export: --sample must be >= 0, got ", sample);
  const std::filesystem::path path = trace_path.empty() ? input.plan.trace_path : trace_path;
  Trace trace;
  const Trace* trace_ptr = nullptr;
  if (input.plan.sparse.enabled) {
    require(!path.empty(), "chakra export: plan ", input.plan.name.empty() ? std::string("(unnamed)") : input.plan.name,
            " is sparse, so its step durations need a sparsity trace: pass --trace FILE.safetensors (or give the ",
            "plan a `trace:` key), or pass --durations FILE.json");
    trace = read_trace(path);
    trace_ptr = &trace;
  }
  SimulationOptions options;
  options.trace_sample = sample;
  options.keep_ring_records = true;
  // The work counting is split over threads for speed only; the figures do not depend on it.
  options.threads = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  SimulationContext context;
  const SimulationResult result = simulate(context, input.plan, input.model, input.cluster, trace_ptr, options);
  return step_durations_from_simulation(result, input.plan);
}

}  // namespace sparsering
