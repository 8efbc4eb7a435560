// The replay measurement of `sparsering validate --replay`: one GPU runs every virtual rank of a
// plan's ring one after another (any ring size: 8, 32, 128 positions), every ring step's forward
// and backward sparse attention kernels over that step's (query rank, K/V rank) index, each timed
// with GpuTimer under kKernelTimingL2 (kernels/cuda/gpu_timer.hpp: CUDA events, L2 flushed
// before every timed launch, as in calibration; median over repetitions), giving the measured
// compute matrix that the simulator predicts. Communication is not run: the simulator's schedule places the measured
// kernels (measure/validation/ring_rederive.hpp). Plain C++ header (no CUDA headers).
// Exercised on GPUs by measure/device/run_validation_on_device.sh; its inputs and outputs are
// tested on CPU in tests/measure/validation/.
#pragma once

#include <cstdint>

#include "measure/validation/measured_layer.hpp"
#include "measure/validation/validation_problem.hpp"

namespace sparsering {

struct ReplayOptions {
  int32_t device = 0;      ///< CUDA device
  int32_t warmup = 1;      ///< untimed launches of each kernel before its timed ones
  int32_t iterations = 3;  ///< timed launches per (position, step, direction), >= 1; the median is kept
  uint64_t seed = 1;       ///< input values
};

/// Measures the compute matrix of `problem` on one GPU. Per position p: the index of every step
/// t (K/V of RingSchedule::source(p, t)) is built on the GPU, the forward kernels run in step
/// order merging into one running output, then the backward pre-pass and the backward kernels.
/// A step whose index holds no tile and no column launches nothing and measures 0 (as the
/// simulator skips it). Throws InputError for bad options or a problem the kernels reject,
/// CudaError for a CUDA failure (including running out of device memory).
MeasuredLayer measure_replay(const ValidationProblem& problem, const ReplayOptions& options);

}  // namespace sparsering
