// Step durations for the Chakra export taken from the simulator run in-process
// (`sparsering export --to chakra --trace T`), so that no `simulate --out` result file is needed:
// the plan is simulated as `sparsering simulate` does (sim/step/simulation.hpp) with its ring
// records kept, and every layer's forward and backward compute per ring position and step is
// applied to every ring of its ring class. Tested in tests/tuner/simulated_durations_test.cpp.
#pragma once

#include <cstdint>
#include <filesystem>

#include "sim/step/simulation.hpp"
#include "tuner/export/chakra/step_durations.hpp"
#include "tuner/export/export_target.hpp"

namespace sparsering {

/// The per-(rank, step) compute of every ring pass of `result` (which must have kept its ring
/// records), [layer][global rank][step] per direction. Throws InputError when the result is of other
/// degrees than `plan`, holds no ring records, or leaves a rank of a layer without figures.
StepDurations step_durations_from_simulation(const SimulationResult& result, const PlanConfig& plan);

/// Simulates `input` (sparse plans read the trace at `trace_path`, or the plan's `trace:` when
/// empty; dense plans need none) and returns its step durations. `sample` picks the trace sample.
/// Throws InputError for a sparse plan without a trace or inputs the simulator refuses.
StepDurations simulate_step_durations(const ExportInput& input, const std::filesystem::path& trace_path,
                                      int64_t sample);

}  // namespace sparsering
