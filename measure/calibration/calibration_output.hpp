// Writes the raw calibration measurements and the fits as JSON (for tools and notebooks) and CSV
// (one row per measurement), and formats the fit table `sparsering calibrate` prints.
// Tested in tests/measure/calibration/calibration_output_test.cpp.
#pragma once

#include <string>
#include <vector>

#include "measure/calibration/calibration_records.hpp"
#include "measure/calibration/kernel_calibration.hpp"
#include "measure/calibration/link_fit.hpp"
#include "sim/config/gpu_config.hpp"

namespace sparsering {

/// Everything one calibration run measured and fitted.
struct CalibrationRun {
  GpuCalibration calibration;       ///< what goes into the GPU config: shapes, kernel build, provenance
  FitOptions fit_options;           ///< folds and seed of the held-out error, SMs of the critical-path term
  std::vector<ShapeFit> fits;       ///< one per shape, both directions, with residuals
  std::vector<KernelMeasurement> kernels;
  std::vector<HopMeasurement> hops;
  bool has_link = false;
  std::string link_level;           ///< cluster level the link fit was written to
  LinkFit link;
  std::vector<std::string> notes;
};

/// The run as one JSON document (provenance, kernel build, per shape and direction the
/// coefficients, in-sample, held-out and under-filled errors and residuals, every measurement).
std::string calibration_json(const CalibrationRun& run);

/// Kernel measurements as CSV with a header row.
std::string kernel_measurements_csv(const std::vector<KernelMeasurement>& kernels);

/// Hop measurements as CSV with a header row.
std::string hop_measurements_csv(const std::vector<HopMeasurement>& hops);

/// The human fit table: one row per shape and direction (coefficients, samples, in-sample and
/// held-out median / max relative error, R^2, the under-filled launches' errors), the residuals by
/// local length and GQA group, and the link fit when present.
std::string fit_table(const CalibrationRun& run);

}  // namespace sparsering
