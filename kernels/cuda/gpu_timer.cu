// The kernel timer (see gpu_timer.hpp). Every repeat is queued before any is read, with one wait
// at the end: the flush memset ahead of each start event keeps the stream busy while the host
// queues the launch, so the events bracket the kernel and not the host's launch latency.
#include "kernels/cuda/gpu_timer.hpp"

#include <algorithm>
#include <utility>

#include "common/error.hpp"
#include "common/median.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace sparsering {

CudaEvent::CudaEvent() { SPARSERING_CUDA_CHECK(cudaEventCreate(&event_)); }

CudaEvent::CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) (void)cudaEventDestroy(event_);  // no throw from a destructor
}

float elapsed_ms(cudaEvent_t from, cudaEvent_t to) {
  float ms = 0.0f;
  SPARSERING_CUDA_CHECK(cudaEventElapsedTime(&ms, from, to));
  return ms;
}

namespace {

// Twice the L2, so whatever a launch left there is evicted whatever the replacement policy.
size_t flush_bytes() {
  int device = 0;
  SPARSERING_CUDA_CHECK(cudaGetDevice(&device));
  int l2_bytes = 0;
  SPARSERING_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
  return static_cast<size_t>(std::max(l2_bytes, 1 << 20)) * 2;
}

}  // namespace

GpuTimer::GpuTimer(L2Policy policy, cudaStream_t stream)
    : policy_(policy), stream_(stream),
      flush_(policy == L2Policy::flush_l2_before ? flush_bytes() : size_t{0}) {}

GpuTiming GpuTimer::time(const std::function<void()>& launch, int32_t warmup, int32_t repeats) {
  require(warmup >= 0 && repeats >= 1, "kernel timing needs warmup >= 0 and repeats >= 1, got ", warmup, " and ",
          repeats);
  while (events_.size() < 2 * static_cast<size_t>(repeats)) events_.emplace_back();
  if (probes_.size() < static_cast<size_t>(repeats)) probes_ = DeviceBuffer<SmClockSample>(static_cast<size_t>(repeats));
  for (int32_t k = 0; k < warmup; ++k) launch();
  for (int32_t k = 0; k < repeats; ++k) {
    if (policy_ == L2Policy::flush_l2_before) {
      const auto byte = static_cast<int>(flushes_++ & 0xFFu);
      SPARSERING_CUDA_CHECK(cudaMemsetAsync(flush_.data(), byte, flush_.bytes(), stream_));
    }
    SPARSERING_CUDA_CHECK(cudaEventRecord(events_[2 * static_cast<size_t>(k)].get(), stream_));
    launch();
    SPARSERING_CUDA_CHECK(cudaEventRecord(events_[2 * static_cast<size_t>(k) + 1].get(), stream_));
    launch_sm_clock_probe(probes_.data() + k, kSmClockProbeNs, stream_);
  }
  SPARSERING_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<double> times;
  times.reserve(static_cast<size_t>(repeats));
  for (size_t k = 0; k < static_cast<size_t>(repeats); ++k) {
    times.push_back(static_cast<double>(elapsed_ms(events_[2 * k].get(), events_[2 * k + 1].get())) * 1e3);
  }
  const std::vector<SmClockSample> samples = probes_.download();
  std::vector<double> clocks;
  for (size_t k = 0; k < static_cast<size_t>(repeats); ++k) clocks.push_back(sm_clock_mhz(samples[k]));
  const auto [fastest, slowest] = std::minmax_element(times.begin(), times.end());
  return {median(times), *fastest, *slowest, median(std::move(clocks))};
}

}  // namespace sparsering
