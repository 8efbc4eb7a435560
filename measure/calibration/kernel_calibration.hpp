// From raw kernel measurements to the fitted cost model, the step shared by `sparsering calibrate`
// and by anyone refitting recorded data (docs/calibration/*.csv): which launches are under-filled
// (kept out of the fit), the three-term fit that goes into the GPU config and the four-term fit
// with a per-list cost that is reported beside it, and reading measurements back from CSV.
// Tested in tests/measure/calibration/kernel_calibration_test.cpp (including a refit of the shipped H100
// measurements that must reproduce configs/gpus/h100-sxm.yaml).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "measure/calibration/calibration_records.hpp"
#include "measure/calibration/kernel_fit.hpp"

namespace sparsering {

/// True when a launch runs fewer than two full waves of CTAs on a GPU of `sm_count` SMs (2 CTAs
/// per SM): forward CTAs are the lists (heads x query blocks), backward CTAs those of the key-block
/// pass (KV heads x key blocks of 64 keys). Such launches are latency-bound, not throughput-bound.
bool launch_under_filled(const KernelMeasurement& m, int64_t sm_count);

/// Fits of one direction: three-term (the GPU config's form) and with a per-list term, each on the
/// filled launches and scored on the under-filled ones. Coefficients rounded to 4 significant digits.
struct DirectionFits {
  KernelFit fit;
  KernelFit under;
  KernelFit list_fit;
  KernelFit list_under;
};

/// Fits the measurements of `direction` ("forward" / "backward") whose under_filled flag is false
/// and fills every such measurement's predicted_us and predicted_list_us. Throws InputError (via
/// fit_kernel_cost) when fewer than 3 filled launches remain.
DirectionFits fit_kernel_measurements(std::vector<KernelMeasurement>& kernels, const std::string& direction);

/// Reads the CSV that kernel_measurements_csv writes (header row first, columns found by name).
/// Throws InputError naming `source_name`, the line and the column for a missing column or a bad value.
std::vector<KernelMeasurement> parse_kernel_measurements_csv(const std::string& text, std::string_view source_name);

}  // namespace sparsering
