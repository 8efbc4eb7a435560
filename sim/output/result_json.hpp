// The simulation result as JSON for tools and notebooks: inputs, assumptions, the step breakdown,
// memory, per-layer phases and work, and every per-rank per-step figure of every ring pass
// (columnar arrays per rank). Field reference: docs/simulator.md. Tested in
// tests/sim/output_test.cpp.
#pragma once

#include <nlohmann/json.hpp>

#include "sim/step/simulation.hpp"

namespace sparsering {

/// What the kernel costs rest on (docs/simulator.md, "calibration"): source, kernel builds, stale,
/// the shape asked for and the calibrated shape used, extrapolated and how.
nlohmann::json calibration_status_json(const CalibrationStatus& status);

/// Everything, including per-rank per-step ring records (when the result kept them).
nlohmann::json result_to_json(const SimulationResult& result);

/// The same without the ring records (a summary for stdout).
nlohmann::json result_summary_json(const SimulationResult& result);

/// Work counts as the JSON object every output uses: tiles, masked_tiles, columns, column_chunks, lists.
nlohmann::json work_json(const WorkCounts& work);

}  // namespace sparsering
