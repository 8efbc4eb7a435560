// Link model: latency + bytes / bandwidth(bytes), log-size interpolation of a measured curve, NIC
// sharing; exact times against hand-computed values (sim/network/link_model.hpp).
#include "sim/network/link_model.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "common/error.hpp"

namespace sparsering {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(LinkModelTest, LineRateWithoutCurve) {
  LinkModel link;
  link.latency_us = 5.0;
  link.line_gbytes_per_s = 100.0;
  EXPECT_EQ(transfer_time_ns(link, 1000000), 15000);  // 5 us + 1e6 B / 100 B/ns
  EXPECT_EQ(transfer_time_ns(link, 0), 0);
  EXPECT_EQ(transfer_time_ns(link, 1000000, 0.5), 25000);
  EXPECT_THROW(transfer_time_ns(link, -1), InputError);
  EXPECT_THROW(transfer_time_ns(link, 10, 0.0), InputError);
}

TEST(LinkModelTest, CurveInterpolatesInLogSize) {
  // The NVLink ring-step points of docs/reference_figures.md section 2.
  const BandwidthCurve curve({{kMiB, 12}, {8 * kMiB, 91}, {64 * kMiB, 254}});
  EXPECT_DOUBLE_EQ(curve.gbytes_per_s(kMiB), 12.0);
  EXPECT_DOUBLE_EQ(curve.gbytes_per_s(1024), 12.0) << "clamped below";
  EXPECT_DOUBLE_EQ(curve.gbytes_per_s(int64_t{1} << 30), 254.0) << "clamped above";
  // 2 MiB is one third of the way from 1 MiB to 8 MiB in log size.
  EXPECT_NEAR(curve.gbytes_per_s(2 * kMiB), 12.0 + (91.0 - 12.0) / 3.0, 1e-9);
  EXPECT_DOUBLE_EQ(curve.gbytes_per_s(8 * kMiB), 91.0);
  LinkModel link;
  link.line_gbytes_per_s = 400;
  link.latency_us = 0;
  link.curve = curve;
  EXPECT_EQ(transfer_time_ns(link, 8 * kMiB), std::llround(8.0 * kMiB / 91.0));
}

TEST(LinkModelTest, NicSharing) {
  EXPECT_DOUBLE_EQ(nic_share(8, 4), 0.5);
  EXPECT_DOUBLE_EQ(nic_share(4, 8), 1.0);
  EXPECT_DOUBLE_EQ(nic_share(8, 0), 1.0);
  EXPECT_DOUBLE_EQ(nic_share(3, 1), 1.0 / 3.0);
}

TEST(LinkModelTest, FromFabricLevel) {
  FabricLevel level;
  level.name = "inter_node";
  level.kind = LinkKind::infiniband;
  level.bandwidth_gbytes_per_s = 25;
  level.latency_us = 9.6;
  level.nics_per_node = 8;
  const LinkModel link = make_link_model(level);
  EXPECT_EQ(transfer_time_ns(link, 25000000), 1009600);  // 9.6 us + 1 ms
  level.bandwidth_gbytes_per_s = 0;
  EXPECT_THROW(make_link_model(level), InputError);
}

TEST(LinkModelTest, RejectsBadCurves) {
  EXPECT_THROW(BandwidthCurve({{100, 1}, {50, 2}}), InputError);
  EXPECT_THROW(BandwidthCurve({{100, 0}}), InputError);
  EXPECT_THROW(BandwidthCurve({{0, 1}}), InputError);
}

}  // namespace
}  // namespace sparsering
