// The files `sparsering validate` writes: validation.json (every compared figure, the targets and
// the provenance the caller supplies) and timeline.json (Chrome / Perfetto trace events of what
// was measured: one process per ring position, a compute track and a recv track). Field
// reference: docs/VALIDATION.md. Tested in tests/measure/validation/validation_compare_test.cpp.
#pragma once

#include <nlohmann/json.hpp>

#include "measure/validation/measured_layer.hpp"
#include "measure/validation/validation_compare.hpp"

namespace sparsering {

/// validation.json: the report (compute matrices, per-step figures, per-layer times, errors,
/// targets) with `provenance` (GPU, driver, commit, command, ...) stored as given.
nlohmann::json validation_to_json(const ValidationReport& report, const nlohmann::json& provenance);

/// timeline.json of the measurement. A ring run places each kernel and each K/V arrival at its
/// measured start (when the measurement has start times); a replay places the measured kernel
/// durations on the simulator's schedule re-run with them (report.forward.derived_run), the
/// backward pass after the forward one. Times in microseconds.
nlohmann::json measured_timeline_json(const ValidationReport& report, const MeasuredLayer& measured);

}  // namespace sparsering
