// The one rounding function of simulated time (sim/core/sim_time.hpp).
#include "sim/core/sim_time.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "tests/common/test_seed.hpp"

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

TEST(SimTimeTest, AgreesWithLlroundOnRandomDurationsAndHalves) {
  std::mt19937_64 rng = testing_support::test_rng();
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int> exponent(-3, 61);
  for (int k = 0; k < 200000; ++k) {
    const double x = std::ldexp(unit(rng), exponent(rng));
    ASSERT_EQ(round_to_ns(x), std::llround(x)) << x;
    const double half = std::floor(x) + 0.5;  // exactly representable below 2^52
    if (half < 4.5e15) {
      ASSERT_EQ(round_to_ns(half), std::llround(half)) << half;
    }
    const double below = std::nextafter(half, 0.0);  // the largest value that rounds down
    ASSERT_EQ(round_to_ns(below), std::llround(below)) << below;
  }
  EXPECT_EQ(round_to_ns(4.611686018427387904e18), std::llround(4.611686018427387904e18));
}

TEST(SimTimeTest, RejectsImpossibleDurations) {
  EXPECT_THROW(round_to_ns(-1.0), InputError);
  EXPECT_THROW(round_to_ns(std::numeric_limits<double>::quiet_NaN()), InputError);
  EXPECT_THROW(round_to_ns(std::numeric_limits<double>::infinity()), InputError);
  EXPECT_THROW(round_to_ns(1e30), InputError);
}

}  // namespace
}  // namespace sparsering
