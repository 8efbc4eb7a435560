// The files `sparsering validate` writes: validation.json (every compared figure, the targets and
// the provenance the caller supplies) and timeline.json (Chrome / Perfetto trace events of what
// was measured: one process per ring position, a compute track and a recv track) and cells.csv
// (every cell's work counts beside its measured and predicted time, to see which term of the cost
// model a cell's error comes from). Field reference: docs/VALIDATION.md. Tested in tests/measure/validation/validation_compare_test.cpp.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

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

/// cells.csv: a header, then one row per (direction, position, step) of both passes: the launch's
/// shape (block_q, block_k, head_dim, heads and K/V heads of the launch, K/V chunk tokens), the
/// cell's work counts (sim/work/work_counts.hpp), the launch's key blocks
/// (LaunchGeometry::key_blocks), the measured and the predicted kernel time (us). The rows are
/// launches as the calibration's fit takes them (measure/calibration/replayed_cells.hpp). Throws InputError when a pass kept no cell work.
std::string validation_cells_csv(const ValidationReport& report);

/// The kernel build whose times a validation.json holds: for one predicted again from an earlier
/// measurement (`validate --measured`), its provenance.predicted_again.measured_kernel_build (none
/// when that block does not name it: the binary that predicted it says nothing of what ran), else
/// the build that ran it, calibration.this_kernel_build (none when absent). Never a guess.
std::optional<std::string> measured_kernel_build(const nlohmann::json& validation);

}  // namespace sparsering
