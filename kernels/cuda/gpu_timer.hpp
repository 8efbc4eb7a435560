// The one way kernels are timed for the cost model: the calibration benchmarks
// (measure/bench/kernel_bench.cu) and the replay validation (measure/replay/replay_compute_matrix.cu)
// both time every launch with GpuTimer under kKernelTimingL2, so the kernel times the model is
// fitted on and the kernel times it is validated against are measured the same way. Also the
// RAII CUDA event both use, and the NCCL ring runtime's per-step event timing reuses (which records
// events on several streams around whole ring steps, so it times steps, not single launches).
// Every timed launch is followed by an SM clock probe (sm_clock_probe.hpp), so each time comes
// with the clock it was measured at: under a power cap the same launch runs slower when the GPU
// has been busy.
// Exercised on GPUs by `sparsering calibrate` and `sparsering validate --replay`
// (measure/device/run_calibrate_on_device.sh, measure/device/run_validation_on_device.sh); the clock
// it reports with each timing is tested in tests/kernels_gpu/sm_clock_probe_test.cpp.
//
// L2 policy. flush_l2_before overwrites the L2 (a memset of twice its size) before every timed
// launch, so the launch reads Q, K and V from HBM; warm leaves whatever the previous launch left.
// Calibration and validation use flush_l2_before. In a ring step the kernel reads a K/V chunk it
// has never read before (it just arrived from the predecessor) while the K/V and dK/dV hops of
// the other streams move data through the same memory; a warm repeat of one launch over the same
// chunk re-reads what the previous repeat left in L2 (50 MB on H100 / H200)
// and times a best case the ring never sees. Cold L2 is the conservative, repeatable choice, and
// the one the cost model's calibration was fitted under (docs/calibration.md), so the replay
// validates the model under the conditions it was fitted in.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/sm_clock_probe.hpp"

namespace sparsering {

/// An owned CUDA event (timing enabled). Movable, not copyable.
class CudaEvent {
 public:
  /// Creates the event on the current device. Throws CudaError on failure.
  CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  CudaEvent(CudaEvent&& other) noexcept;
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  ~CudaEvent();
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

/// Milliseconds from `from` to `to`; both recorded and completed. Throws CudaError otherwise.
float elapsed_ms(cudaEvent_t from, cudaEvent_t to);

/// What the L2 cache holds when a timed launch starts (file comment).
enum class L2Policy : int32_t {
  flush_l2_before = 0,  ///< L2 overwritten before every timed launch: operands come from HBM
  warm = 1,             ///< no flush: operands may still sit in L2 from the previous launch
};

/// The policy of every kernel timing that feeds or checks the cost model (file comment: why).
inline constexpr L2Policy kKernelTimingL2 = L2Policy::flush_l2_before;

/// Times of the timed repeats of one launch, microseconds, and the SM clock they ran at.
struct GpuTiming {
  double median_us = 0.0;
  double min_us = 0.0;
  double max_us = 0.0;
  /// Median over the repeats of the SM clock measured right after each (sm_clock_probe.hpp), MHz.
  double sm_clock_mhz = 0.0;
};

/// Times launches queued on one stream of the current device.
class GpuTimer {
 public:
  /// `stream` may be the legacy default stream (nullptr). flush_l2_before allocates a scratch
  /// buffer of twice the current device's L2 (at least 2 MiB). Throws CudaError on failure.
  GpuTimer(L2Policy policy, cudaStream_t stream);

  /// Queues `launch` `warmup` times untimed, then `repeats` times, each between two events on
  /// the stream (preceded by the L2 flush under flush_l2_before and followed by an SM clock probe,
  /// both outside the events); waits for the stream and returns the median, min and max of the
  /// repeats and the median clock of their probes. `launch` must queue its work
  /// on the timer's stream. Throws InputError unless warmup >= 0 and repeats >= 1, CudaError on a
  /// CUDA failure.
  GpuTiming time(const std::function<void()>& launch, int32_t warmup, int32_t repeats);

  L2Policy policy() const { return policy_; }

 private:
  L2Policy policy_;
  cudaStream_t stream_;
  DeviceBuffer<uint8_t> flush_;    ///< flush_l2_before: overwritten before each timed launch
  std::vector<CudaEvent> events_;  ///< 2 per repeat (start, stop), grown on demand
  DeviceBuffer<SmClockSample> probes_;  ///< 1 per repeat, grown on demand
  uint32_t flushes_ = 0;           ///< varies the flush byte so no write is ever a no-op
};

}  // namespace sparsering
