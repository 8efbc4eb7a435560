// What the kernel costs of a simulation rest on, as every output reports it: the calibration's
// source (measured here, published figures, or none: roofline), whether it was measured on this
// build's kernels (core/kernel_build.hpp), and which calibrated kernel shape supplied the
// coefficients (extrapolated when the plan's shape is not calibrated). make_attention_cost_model
// (sim/cost/kernel_cost.hpp) fills the shape fields. Tested in tests/sim/cost_model_test.cpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/gpu_config.hpp"

namespace sparsering {

struct CalibrationStatus {
  std::string source = "roofline";  ///< "measured", "published" or "roofline" (no calibration)
  std::string gpu;                  ///< GPU config name
  std::string config_path;          ///< the GPU config file, when loaded from one
  std::string kernel_build;         ///< measured: the identity measured on ("unknown": not recorded)
  std::string this_kernel_build;    ///< this build's kernels
  bool stale = false;               ///< measured on another kernel build than this one
  double sm_clock_mhz = 0.0;        ///< measured: the median SM clock of its launches (0: not recorded)
  KernelShape shape;                          ///< the shape costs were asked for
  std::optional<KernelShape> calibrated_shape;  ///< the calibrated shape whose coefficients were used
  bool extrapolated = false;        ///< calibrated_shape differs from shape
  std::string scaling;              ///< extrapolated: how the coefficients were scaled

  bool measured() const { return source == "measured"; }
  bool published() const { return source == "published"; }
};

/// Source and kernel build comparison of `gpu`'s calibration against `this_build` (the shape fields
/// stay empty). A published calibration is never stale: it is not compared with any build.
CalibrationStatus kernel_build_status(const GpuConfig& gpu, std::string_view this_build);

/// The one-line warning simulate, tune and validate print on stderr for a stale calibration
/// (empty when it is not stale): which config, which build it was measured on, this build, and
/// what to do.
std::string stale_calibration_warning(const CalibrationStatus& status);

/// The notes every output lists for `status` (stale, published figures, extrapolated shape).
std::vector<std::string> calibration_notes(const CalibrationStatus& status);

}  // namespace sparsering
