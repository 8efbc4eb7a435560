// The SM clock a GPU runs at, measured from inside a kernel: one warp waits for a tick of the
// global nanosecond timer, then spins for a fixed span of it while counting the SM's cycles;
// cycles over nanoseconds is the clock. Under its power cap a GPU lowers the clock while heavy
// kernels run (an H200 at 700 W from 1980 MHz to below 1500 MHz), and a kernel bound by its
// tensor cores slows down with it, so the kernel timer (gpu_timer.hpp) runs a probe right after
// every timed launch and reports the clock beside the time (docs/VALIDATION.md, "The power cap").
// Exercised on GPUs by tests/kernels_gpu/sm_clock_probe_test.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace sparsering {

/// One probe's count: SM cycles elapsed over `ns` nanoseconds of the global timer.
struct SmClockSample {
  int64_t cycles = 0;
  int64_t ns = 0;
};

/// Nanoseconds a probe spins: long enough that the timer's update interval (tens of ns to 1 us,
/// depending on the GPU) is a small part of it, both ends being taken at a tick.
inline constexpr int64_t kSmClockProbeNs = 20000;

/// Queues one probe (one warp) on `stream` that writes its count to `out` (device memory).
/// Throws InputError for a null `out` or spin_ns < 1, CudaError on a launch failure.
void launch_sm_clock_probe(SmClockSample* out, int64_t spin_ns, cudaStream_t stream);

/// The clock of a sample, MHz (cycles per microsecond); 0 for a sample without elapsed time.
inline double sm_clock_mhz(const SmClockSample& s) {
  return s.ns > 0 ? 1e3 * static_cast<double>(s.cycles) / static_cast<double>(s.ns) : 0.0;
}

}  // namespace sparsering
