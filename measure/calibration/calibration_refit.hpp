// Refitting a recorded calibration without a GPU: the kernel measurements a `calibrate` run wrote
// (calibration-<gpu>-kernels.csv, docs/calibration/*.csv) fitted again with this version's cost
// model, fit rules and under-filled rule, into the calibration of the GPU config that run wrote.
// The config's kernel build, provenance and GEMM efficiency are kept: they describe the
// measurement, which the refit does not change. What `sparsering calibrate --refit` runs
// (docs/calibration.md, "Refitting recorded measurements").
// Tested in tests/measure/calibration/calibration_refit_test.cpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "measure/calibration/calibration_output.hpp"
#include "measure/calibration/kernel_calibration.hpp"
#include "sim/config/gpu_config.hpp"

namespace sparsering {

/// Reads the kernel measurements of `csv_text` (parse_kernel_measurements_csv), gives back the
/// backward units of rows recorded before they were (restore_backward_units), flags the
/// under-filled launches for `gpu.sm_count` SMs, fits every shape in the CSV and returns the run:
/// `calibration` is the config's measured calibration with its shapes replaced by the refitted
/// ones, `kernels` the measurements with their units and predictions, `notes` what was kept,
/// dropped or flagged differently from the record. Throws InputError (naming the config or the
/// CSV) when the config has no measured calibration (published figures or none: nothing says which
/// kernels the CSV measured), the CSV has no measurement or cannot be read, or a fit fails.
/// `replayed`: ring cells replayed on the same kernel build (replayed_cells.hpp), fitted with the
/// CSV's launches (kernel_calibration.hpp, fit_kernel_measurements); a shape the CSV does not
/// measure is not fitted from cells alone (the grid separates the terms): such cells are an error.
CalibrationRun refit_kernel_calibration(const std::string& csv_text, std::string_view csv_name, const GpuConfig& gpu,
                                        const FitOptions& options = {},
                                        const std::vector<KernelMeasurement>& replayed = {});

}  // namespace sparsering
