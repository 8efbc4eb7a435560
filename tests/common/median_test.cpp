// Tests of median and weighted_median (common/median.hpp): hand-derived values for odd, even,
// single and empty sets, and on fresh random sets (seed printed, SPARSERING_TEST_SEED replays) the
// value a full sort gives, and the weighted median against the values repeated as often as their weight.
#include "common/median.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

TEST(Median, MiddleValueOrMeanOfTheTwoMiddleOnes) {
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(median({7.0}), 7.0);
  EXPECT_EQ(median({}), 0.0);
  EXPECT_EQ(median({1.0, 1.0, 5.0, 5.0}), 3.0);
}

TEST(Median, EqualsTheSortedMiddleOnRandomSets) {
  std::mt19937_64 rng = testing_support::test_rng();
  std::uniform_real_distribution<double> value(-100.0, 100.0);
  for (int round = 0; round < 200; ++round) {
    std::vector<double> v(1 + rng() % 40);
    for (double& x : v) x = (rng() % 4 == 0) ? std::round(value(rng)) : value(rng);  // some ties
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    const double expected = n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    ASSERT_EQ(median(v), expected) << "round " << round << ", " << n << " values";
  }
}

TEST(WeightedMedian, HandDerivedValues) {
  EXPECT_EQ(weighted_median({1.0, 2.0, 3.0}, {1.0, 1.0, 1.0}), 2.0);
  EXPECT_EQ(weighted_median({4.0, 1.0, 3.0, 2.0}, {1.0, 1.0, 1.0, 1.0}), 2.5);  // exactly half: the mean
  EXPECT_EQ(weighted_median({1.0, 2.0, 3.0}, {1.0, 1.0, 5.0}), 3.0);            // 3 holds most of the weight
  EXPECT_EQ(weighted_median({1.0, 2.0, 3.0}, {3.0, 1.0, 2.0}), 1.5);            // 1 holds exactly half
  EXPECT_EQ(weighted_median({9.0, 1.0, 2.0}, {0.0, 1.0, 1.0}), 1.5);            // weight 0 does not count
  EXPECT_EQ(weighted_median({5.0}, {0.25}), 5.0);
  EXPECT_EQ(weighted_median({5.0}, {0.0}), 0.0);
  EXPECT_EQ(weighted_median({}, {}), 0.0);
  EXPECT_THROW(weighted_median({1.0, 2.0}, {1.0}), InputError);
}

TEST(WeightedMedian, EqualsTheMedianOfTheValuesRepeatedAsOftenAsTheirWeight) {
  std::mt19937_64 rng = testing_support::test_rng();
  std::uniform_real_distribution<double> value(-100.0, 100.0);
  for (int round = 0; round < 200; ++round) {
    std::vector<double> v(1 + rng() % 30);
    std::vector<double> w(v.size());
    std::vector<double> repeated;
    for (size_t k = 0; k < v.size(); ++k) {
      v[k] = (rng() % 4 == 0) ? std::round(value(rng)) : value(rng);
      w[k] = static_cast<double>(rng() % 5);  // 0 to 4
      repeated.insert(repeated.end(), static_cast<size_t>(w[k]), v[k]);
    }
    ASSERT_EQ(weighted_median(v, w), median(repeated)) << "round " << round << ", " << v.size() << " values";
    std::vector<double> scaled = w;  // a common factor changes nothing
    for (double& x : scaled) x *= 0.125;
    ASSERT_EQ(weighted_median(v, scaled), median(repeated)) << "round " << round;
  }
}

}  // namespace
}  // namespace sparsering
