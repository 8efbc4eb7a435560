// Writes the raw calibration measurements and the fit as JSON (for tools and notebooks) and CSV
// (one row per measurement), and formats the fit table `sparsering calibrate` prints.
// Tested in tests/measure/calibration/calibration_output_test.cpp.
#pragma once

#include <string>
#include <vector>

#include "measure/calibration/calibration_records.hpp"
#include "measure/calibration/kernel_fit.hpp"
#include "measure/calibration/link_fit.hpp"
#include "sim/config/gpu_config.hpp"

namespace sparsering {

/// Everything one calibration run measured and fitted.
struct CalibrationRun {
  GpuCalibration calibration;                 ///< fitted coefficients + provenance
  KernelFit forward_fit;                      ///< three-term fit on the filled launches
  KernelFit backward_fit;
  KernelFit forward_under_filled;             ///< the fitted model on the under-filled launches
  KernelFit backward_under_filled;
  KernelFit forward_list_fit;                 ///< four-term fit (per-list cost) on the filled launches
  KernelFit backward_list_fit;
  KernelFit forward_list_under_filled;
  KernelFit backward_list_under_filled;
  std::vector<KernelMeasurement> kernels;
  std::vector<HopMeasurement> hops;
  bool has_link = false;
  std::string link_level;                     ///< cluster level the link fit was written to
  LinkFit link;
  std::vector<std::string> notes;
};

/// The run as one JSON document (provenance, coefficients, residuals, every measurement).
std::string calibration_json(const CalibrationRun& run);

/// Kernel measurements as CSV with a header row.
std::string kernel_measurements_csv(const std::vector<KernelMeasurement>& kernels);

/// Hop measurements as CSV with a header row.
std::string hop_measurements_csv(const std::vector<HopMeasurement>& hops);

/// The human fit table: one row per direction and model form (coefficients, samples, median / max
/// relative error, R^2, the under-filled launches' errors), and the link fit when present.
std::string fit_table(const CalibrationRun& run);

}  // namespace sparsering
