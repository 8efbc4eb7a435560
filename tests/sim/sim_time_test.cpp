// The one rounding function of simulated time (sim/core/sim_time.hpp).
#include "sim/core/sim_time.hpp"

#include <gtest/gtest.h>

#include <limits>

#include "common/error.hpp"

namespace sparsering {
namespace {

TEST(SimTimeTest, RoundsToNearestHalvesAway) {
  EXPECT_EQ(round_to_ns(0.0), 0);
  EXPECT_EQ(round_to_ns(0.49), 0);
  EXPECT_EQ(round_to_ns(0.5), 1);
  EXPECT_EQ(round_to_ns(2.5), 3);
  EXPECT_EQ(ns_from_us(1.2345), 1235);  // 1234.5 ns
  EXPECT_EQ(ns_from_seconds(1e-3), 1000000);
}

TEST(SimTimeTest, RejectsImpossibleDurations) {
  EXPECT_THROW(round_to_ns(-1.0), InputError);
  EXPECT_THROW(round_to_ns(std::numeric_limits<double>::quiet_NaN()), InputError);
  EXPECT_THROW(round_to_ns(std::numeric_limits<double>::infinity()), InputError);
  EXPECT_THROW(round_to_ns(1e30), InputError);
}

}  // namespace
}  // namespace sparsering
