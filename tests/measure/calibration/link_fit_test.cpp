// Tests of measure/calibration/link_fit.hpp: latency recovered from synthetic hops, the link
// model built from the fit reproduces every measured size (checked with sim's own link code),
// medians of repeated sizes, sizes below the latency, capping, rounding and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tests/config/config_test_util.hpp"
#include "measure/calibration/link_fit.hpp"
#include "sim/network/link_model.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

/// A saturating bandwidth (GB/s) like NCCL's: low for small messages, approaching `peak`.
double true_bandwidth(int64_t bytes, double peak) {
  const double half = 8.0 * 1048576.0;
  return peak * static_cast<double>(bytes) / (static_cast<double>(bytes) + half);
}

TEST(LinkFit, RecoversLatencyAndReproducesEveryMeasuredSize) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  std::uniform_real_distribution<double> pick(0.5, 2.0);
  for (int trial = 0; trial < 10; ++trial) {
    const double latency = 8.0 * pick(rng);
    const double peak = 300.0 * pick(rng);
    std::vector<HopSample> samples;
    for (int64_t bytes = int64_t{1} << 10; bytes <= int64_t{1} << 30; bytes *= 4) {
      // A constant bandwidth at small sizes makes time linear there, so the intercept is the latency.
      const double bw = bytes <= (int64_t{1} << 20) ? 5.0 : true_bandwidth(bytes, peak);
      samples.push_back({bytes, latency + static_cast<double>(bytes) / (bw * 1e3)});
    }
    const LinkFit fit = fit_link(samples);
    EXPECT_NEAR(fit.latency_us, latency, 0.011);
    EXPECT_EQ(fit.curve.size(), samples.size());
    EXPECT_LT(fit.max_relative_error, 1e-3);
    LinkModel model;
    model.latency_us = fit.latency_us;
    model.line_gbytes_per_s = 1e6;
    model.curve = BandwidthCurve(fit.curve);
    for (const HopSample& s : samples) {
      const double predicted = static_cast<double>(transfer_time_ns(model, s.bytes)) * 1e-3;
      EXPECT_NEAR(predicted / s.time_us, 1.0, 1e-3) << s.bytes;
    }
  }
}

TEST(LinkFit, RepeatedSizesUseTheirMedianAndTooFastSizesAreSkipped) {
  // Sizes 1 KiB and 2 KiB define latency 10 us (slope 1 us per KiB); the 3 KiB sample takes less
  // than the latency, so it gets no point. 1 MiB: median of 3 repeats (110, 20000, 120) = 120.
  const std::vector<HopSample> samples{{1024, 11.0}, {2048, 12.0}, {3072, 9.0}, {1048576, 110.0}, {1048576, 20000.0}, {1048576, 120.0}};
  const LinkFit fit = fit_link(samples, 2048);
  EXPECT_NEAR(fit.latency_us, 10.0, 1e-9);
  ASSERT_EQ(fit.skipped_bytes.size(), 1u);
  EXPECT_EQ(fit.skipped_bytes[0], 3072);
  ASSERT_EQ(fit.curve.size(), 3u);
  EXPECT_EQ(fit.curve[2].bytes, 1048576);
  EXPECT_NEAR(fit.curve[2].gbytes_per_s, round_significant(1048576.0 / 110.0 * 1e-3, 4), 1e-12);
}

TEST(LinkFit, CapAndRounding) {
  std::vector<BandwidthPoint> curve{{1, 100.0}, {2, 500.0}, {3, 460.0}};
  EXPECT_EQ(cap_curve(curve, 450.0), 2);
  EXPECT_EQ(curve[1].gbytes_per_s, 450.0);
  EXPECT_EQ(curve[0].gbytes_per_s, 100.0);
  EXPECT_EQ(round_significant(123.456, 4), 123.5);
  EXPECT_EQ(round_significant(0.00123456, 3), 0.00123);
  EXPECT_EQ(round_significant(0.0, 3), 0.0);
}

TEST(LinkFit, RefusesBadSamples) {
  test::expect_input_error([] { fit_link(std::vector<HopSample>{{1024, 1.0}, {1024, 2.0}}); }, {"two message sizes"});
  test::expect_input_error([] { fit_link(std::vector<HopSample>{{0, 1.0}, {1024, 2.0}}); }, {"sample 0", "bytes"});
  test::expect_input_error([] { fit_link(std::vector<HopSample>{{1, 1.0}, {1024, -2.0}}); }, {"sample 1", "time_us"});
}

}  // namespace
}  // namespace sparsering
