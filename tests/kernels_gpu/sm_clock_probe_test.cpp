// Tests of the SM clock probe (kernels/cuda/sm_clock_probe.hpp) and of the clock the kernel timer
// reports with each timing (kernels/cuda/gpu_timer.hpp): the span is at least the requested one
// and not much longer, the clock is a plausible SM clock (GPUs run between about 200 MHz idle and
// under 3 GHz), a span ten times longer counts about ten times the cycles at the same clock, and
// bad arguments are refused. No CPU reference exists for a clock; the bounds are physical.
#include "kernels/cuda/sm_clock_probe.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/gpu_timer.hpp"
#include "gpu_test_support.hpp"

namespace sparsering {
namespace {

SmClockSample probe(int64_t spin_ns) {
  DeviceBuffer<SmClockSample> out(1);
  launch_sm_clock_probe(out.data(), spin_ns, nullptr);
  SPARSERING_CUDA_CHECK(cudaDeviceSynchronize());
  return out.download()[0];
}

TEST(SmClockProbeGpu, MeasuresAPlausibleClockOverTheRequestedSpan) {
  SPARSERING_REQUIRE_GPU();
  probe(1000000);  // 1 ms of work first, so an idle GPU has raised its clock
  const SmClockSample s = probe(kSmClockProbeNs);
  EXPECT_GE(s.ns, kSmClockProbeNs);
  EXPECT_LT(s.ns, kSmClockProbeNs + 5000);  // the timer updates at least every microsecond
  const double mhz = sm_clock_mhz(s);
  EXPECT_GT(mhz, 200.0);
  EXPECT_LT(mhz, 3000.0);
  const SmClockSample longer = probe(10 * kSmClockProbeNs);
  const double ratio = sm_clock_mhz(longer) / mhz;
  EXPECT_GT(ratio, 0.8) << mhz << " MHz, then " << sm_clock_mhz(longer);
  EXPECT_LT(ratio, 1.25) << mhz << " MHz, then " << sm_clock_mhz(longer);
}

TEST(SmClockProbeGpu, TheKernelTimerReportsTheClockOfItsRepeats) {
  SPARSERING_REQUIRE_GPU();
  DeviceBuffer<SmClockSample> scratch(1);
  GpuTimer timer(kKernelTimingL2, nullptr);
  const GpuTiming timing = timer.time([&] { launch_sm_clock_probe(scratch.data(), 50000, nullptr); }, 1, 5);
  EXPECT_GE(timing.median_us, 50.0);
  EXPECT_GT(timing.sm_clock_mhz, 200.0);
  EXPECT_LT(timing.sm_clock_mhz, 3000.0);
}

TEST(SmClockProbe, RefusesBadArguments) {
  EXPECT_THROW(launch_sm_clock_probe(nullptr, kSmClockProbeNs, nullptr), InputError);
  SmClockSample* fake = reinterpret_cast<SmClockSample*>(alignof(SmClockSample));  // never written: refused first
  EXPECT_THROW(launch_sm_clock_probe(fake, 0, nullptr), InputError);
  EXPECT_EQ(sm_clock_mhz(SmClockSample{}), 0.0);
  EXPECT_DOUBLE_EQ(sm_clock_mhz(SmClockSample{1980, 1000}), 1980.0);
}

}  // namespace
}  // namespace sparsering
