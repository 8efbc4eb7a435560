// The SM clock probe (see sm_clock_probe.hpp).
#include "kernels/cuda/sm_clock_probe.hpp"

#include "common/error.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace sparsering {

namespace {

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Both ends at a tick of the global timer: the start is the first read after a tick, the end the
// first read at least spin_ns later, so the timer's update interval does not bias the span.
__global__ void sm_clock_probe_kernel(SmClockSample* out, int64_t spin_ns) {
  const uint64_t before = global_timer_ns();
  uint64_t start = before;
  while (start == before) start = global_timer_ns();
  const long long c0 = clock64();
  uint64_t now = start;
  while (static_cast<int64_t>(now - start) < spin_ns) now = global_timer_ns();
  const long long c1 = clock64();
  if (threadIdx.x == 0) *out = {static_cast<int64_t>(c1 - c0), static_cast<int64_t>(now - start)};
}

}  // namespace

void launch_sm_clock_probe(SmClockSample* out, int64_t spin_ns, cudaStream_t stream) {
  require(out != nullptr, "SM clock probe: null output");
  require(spin_ns >= 1, "SM clock probe: spin of ", spin_ns, " ns, needs >= 1");
  sm_clock_probe_kernel<<<1, 32, 0, stream>>>(out, spin_ns);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparsering
