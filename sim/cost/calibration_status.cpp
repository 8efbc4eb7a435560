#include "sim/cost/calibration_status.hpp"

#include "common/error.hpp"
#include "core/kernel_build.hpp"

namespace sparsering {
namespace {

std::string describe_build(const std::string& build) {
  return build == kUnknownKernelBuild ? str(kUnknownKernelBuild, " (not recorded)") : build;
}

std::string config_file(const CalibrationStatus& status) {
  return status.config_path.empty() ? str("GPU config '", status.gpu, "'") : status.config_path;
}

}  // namespace

CalibrationStatus kernel_build_status(const GpuConfig& gpu, std::string_view this_build) {
  CalibrationStatus status;
  status.gpu = gpu.name;
  status.config_path = gpu.source_path.string();
  status.this_kernel_build = std::string(this_build);
  if (!gpu.calibration) return status;
  status.source = std::string(to_string(gpu.calibration->source));
  if (gpu.calibration->published()) return status;
  status.kernel_build = gpu.calibration->kernel_build;
  status.stale = status.kernel_build != this_build;
  status.sm_clock_mhz = gpu.calibration->provenance.sm_clock_mhz;
  return status;
}

std::string stale_calibration_warning(const CalibrationStatus& status) {
  if (!status.stale) return "";
  return str("warning: the calibration in ", config_file(status), " was measured on kernel build ",
             describe_build(status.kernel_build), ", not on this build's kernels (", status.this_kernel_build,
             "): its kernel costs may no longer hold. Recalibrate on the GPU "
             "(measure/device/run_calibrate_on_device.sh, docs/calibration.md)");
}

std::vector<std::string> calibration_notes(const CalibrationStatus& status) {
  std::vector<std::string> notes;
  if (status.stale) {
    notes.push_back(str("stale calibration: ", status.gpu, "'s kernel costs were measured on kernel build ",
                        describe_build(status.kernel_build), ", not on this build's kernels (recalibrate: docs/calibration.md)"));
  }
  if (status.published()) {
    notes.push_back(str("kernel costs from published figures (the sources ", status.gpu,
                        "'s GPU config cites), not measured on this project's kernels"));
  }
  if (status.extrapolated && status.calibrated_shape) {
    notes.push_back(str("extrapolated: kernel shape ", to_string(status.shape), " (block_q x block_k x head_dim) is not ",
                        "calibrated for ", status.gpu, "; coefficients of ", to_string(*status.calibrated_shape), " ",
                        status.scaling));
  }
  return notes;
}

}  // namespace sparsering
