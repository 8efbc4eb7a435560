// GPU microbenchmarks of the sparse attention kernels for the cost model fit: each case of
// measure/calibration/benchmark_plan.hpp runs the forward launcher and the per-step backward
// launcher (transposed index + both passes, as the ring runs them) over a synthetic index with
// controlled tiles and vertical chunks per query block. Timed by GpuTimer under kKernelTimingL2
// (kernels/cuda/gpu_timer.hpp: CUDA events around every repeat, L2 flushed before it), median of
// repeats, as the replay validation times them. The header has no CUDA types, so the CLI includes it.
// Run by `sparsering calibrate`; its output is checked by the fit's residuals.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "measure/calibration/benchmark_plan.hpp"
#include "measure/calibration/calibration_records.hpp"

namespace sparsering {

struct KernelBenchOptions {
  int device = 0;
  int warmup = 1;
  int repeats = 5;
  uint64_t seed = 1;
  bool banded = false;  ///< banded synthetic indices (synthetic_index.hpp) instead of random ones
};

/// Runs every case, at its kernel shape, forward and backward on `options.device`; returns two
/// measurements per case (forward first), each flagged under-filled by launch_under_filled
/// (measure/calibration/kernel_calibration.hpp) for this GPU's SM count. `progress`, when set, is called after each case with a one-line summary.
/// Throws CudaError on a CUDA failure, InputError for a case the kernels cannot run.
std::vector<KernelMeasurement> run_kernel_benchmarks(const std::vector<KernelBenchCase>& cases,
                                                     const KernelBenchOptions& options,
                                                     const std::function<void(const std::string&)>& progress = {});

}  // namespace sparsering
