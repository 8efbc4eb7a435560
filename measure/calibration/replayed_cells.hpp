// Ring cells replayed on a GPU as launches for the kernel cost fit. The synthetic benchmark grid
// (benchmark_plan.hpp) separates the model's terms, but its tiles sit where no real pattern puts
// them, and the kernels' cost per unit depends on where the tiles sit (which Q, dO and K/V tiles
// neighbouring CTAs share in L2): fitted on the grid alone, the model over-predicts the ring cells
// of real patterns (docs/calibration.md, "Replayed ring cells"). A replay of a plan
// (`sparsering validate --replay`) records every cell's launch shape, work counts and measured
// time in cells.csv; each cell is one launch here, its placement "replay:<plan>", so that the
// cells of one replay form one case of the held-out folds. Tested in
// tests/measure/calibration/replayed_cells_test.cpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "measure/calibration/calibration_records.hpp"

namespace sparsering {

/// The placement prefix of a replayed cell: "replay:" followed by its replay's plan name.
inline constexpr std::string_view kReplayedPlacement = "replay:";

/// True for a measurement that is a replayed ring cell (placement starts with "replay:").
bool is_replayed_cell(const KernelMeasurement& m);

/// The launches of one replay: every row of `cells_csv` (validate's cells.csv) with work (a cell
/// without tile or column launches nothing), as a KernelMeasurement of the row's direction, shape
/// (query heads = the launch's heads, local tokens = its K/V chunk), work counts and measured time
/// (median, min and max alike), placement "replay:<plan>", no tiles or chunks per list (a real
/// list's counts vary). `validation_json` is the validation.json written beside it: it names the
/// plan and the kernel build the replay ran, which must be `kernel_build` (the calibration's), so
/// that no replay of other kernels enters a fit. Throws InputError naming `source_name` (and the
/// line) for a missing column, a bad value, a row whose key blocks disagree with its shape, a
/// measured time <= 0 for a cell with work, a validation.json that is not a replay's, or another
/// kernel build. A replay predicted again (`validate --measured`: this tree's counts, such as the
/// longest key list, beside the recorded times) counts as of the kernel build it measured, which
/// its provenance names (predicted_again.measured_kernel_build); one that does not name it is
/// refused. The column longest_key_list is optional (-1 when absent).
std::vector<KernelMeasurement> parse_replayed_cells(const std::string& cells_csv, const std::string& validation_json,
                                                    std::string_view source_name, std::string_view kernel_build);

}  // namespace sparsering
