// The refit is the fit of `calibrate` on recorded rows: the same parse, unit restoration,
// under-filled rule and fit, so a refit of a run's CSV with the version that measured it gives
// back the section that run wrote.
#include "measure/calibration/calibration_refit.hpp"

#include <algorithm>
#include <vector>

#include "common/error.hpp"
#include "measure/calibration/replayed_cells.hpp"

namespace sparsering {

CalibrationRun refit_kernel_calibration(const std::string& csv_text, std::string_view csv_name, const GpuConfig& gpu,
                                        const FitOptions& options, const std::vector<KernelMeasurement>& replayed) {
  require(gpu.calibration.has_value(), "GPU config '", gpu.name,
          "' has no calibration section: a refit keeps the kernel build and provenance of the measured calibration "
          "that recorded ", csv_name, " (give the config that run wrote)");
  require(!gpu.calibration->published(), "GPU config '", gpu.name,
          "' holds published figures, not a measured calibration: a refit keeps the kernel build and provenance of "
          "the run that recorded ", csv_name, " (give the config that run wrote)");
  require(gpu.sm_count >= 1, "GPU config '", gpu.name, "' has no sm_count to flag under-filled launches with");

  CalibrationRun run;
  run.fit_options = options;
  run.fit_options.sm_count = gpu.sm_count;  // the GPU measured: the backward's critical-path term
  run.kernels = parse_kernel_measurements_csv(csv_text, csv_name);
  require(!run.kernels.empty(), csv_name, ": no kernel measurement to refit");
  restore_backward_units(run.kernels);
  std::vector<KernelShape> measured;  // the grid's shapes, a handful
  for (const KernelMeasurement& k : run.kernels) {
    const KernelShape shape{k.block_q, k.block_k, k.head_dim};
    if (std::find(measured.begin(), measured.end(), shape) == measured.end()) measured.push_back(shape);
  }
  for (const KernelMeasurement& cell : replayed) {
    const KernelShape shape{cell.block_q, cell.block_k, cell.head_dim};
    require(std::find(measured.begin(), measured.end(), shape) != measured.end(), "replayed cells of ", cell.placement.substr(kReplayedPlacement.size()), " have shape ",
            cell.block_q, "x", cell.block_k, "x", cell.head_dim, ", which ", csv_name,
            " does not measure: the benchmark grid separates the terms, cells alone do not");
  }
  // Replays in the order of their names, whatever order they were given in: the held-out folds
  // number cases by first appearance.
  std::vector<KernelMeasurement> cells = replayed;
  std::stable_sort(cells.begin(), cells.end(),
                   [](const KernelMeasurement& a, const KernelMeasurement& b) { return a.placement < b.placement; });
  run.kernels.insert(run.kernels.end(), cells.begin(), cells.end());
  int64_t reflagged = 0;
  for (KernelMeasurement& k : run.kernels) {
    const bool under = launch_under_filled(k, gpu.sm_count);
    reflagged += under != k.under_filled && !is_replayed_cell(k) ? 1 : 0;  // cells carry no flag
    k.under_filled = under;
  }
  run.fits = fit_kernel_measurements(run.kernels, run.fit_options);

  run.calibration = *gpu.calibration;
  // The clock belongs to the measurement refitted: taken from its records when they have one.
  if (const double clock = benchmark_sm_clock_mhz(run.kernels); clock > 0.0) run.calibration.provenance.sm_clock_mhz = clock;
  run.calibration.shapes.clear();
  for (const ShapeFit& fit : run.fits) run.calibration.shapes.push_back(calibrated_shape(fit));
  run.notes.push_back(str("refit of ", csv_name, " (", run.kernels.size() - replayed.size(), " measurements",
                          replayed.empty() ? std::string() : str(", with ", replayed.size(), " replayed ring cells"),
                          "): kernel build, provenance and gemm_efficiency kept from ", gpu.name, "'s calibration"));
  for (const CalibratedShape& old : gpu.calibration->shapes) {
    if (run.calibration.find(old.shape) == nullptr) {
      run.notes.push_back(str("shape ", to_string(old.shape), " of ", gpu.name, " is not in ", csv_name, ": dropped"));
    }
  }
  if (reflagged > 0) {
    run.notes.push_back(str(reflagged, " launch(es) flagged under-filled otherwise than recorded (this version's rule on ",
                            gpu.sm_count, " SMs)"));
  }
  return run;
}

}  // namespace sparsering
