// Statistics over trace samples (sim/output/sample_statistics.hpp): hand-computed nearest-rank
// percentiles, the representative sample, the spread, monotonicity in every value (what keeps
// per-sample bounds bounds of the statistic), and refused input.
#include "sim/output/sample_statistics.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/error.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

TEST(SampleStatistics, ByHand) {
  const std::vector<double> v = {40.0, 10.0, 30.0, 20.0};
  EXPECT_DOUBLE_EQ(sample_statistic(v, SampleStatistic::mean), 25.0);
  EXPECT_DOUBLE_EQ(sample_statistic(v, SampleStatistic::p50), 20.0);  // ceil(0.5 x 4) = 2nd smallest
  EXPECT_DOUBLE_EQ(sample_statistic(v, SampleStatistic::p90), 40.0);  // ceil(0.9 x 4) = 4th
  EXPECT_DOUBLE_EQ(sample_statistic(v, SampleStatistic::max), 40.0);
  const std::vector<double> ten = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_DOUBLE_EQ(sample_statistic(ten, SampleStatistic::p90), 9.0);  // ceil(0.9 x 10) = 9th
  EXPECT_DOUBLE_EQ(sample_statistic(ten, SampleStatistic::p50), 5.0);
  EXPECT_DOUBLE_EQ(sample_statistic({7.0}, SampleStatistic::p90), 7.0);
  EXPECT_EQ(representative_sample(v, SampleStatistic::p50), 3U);
  EXPECT_EQ(representative_sample(v, SampleStatistic::max), 0U);
  EXPECT_EQ(representative_sample(v, SampleStatistic::mean), 2U);  // 30 and 20 are both 5 from 25: the first
  const SampleSpread s = sample_spread(v);
  EXPECT_DOUBLE_EQ(s.min, 10.0);
  EXPECT_DOUBLE_EQ(s.max, 40.0);
  EXPECT_DOUBLE_EQ(s.mean, 25.0);
  EXPECT_DOUBLE_EQ(s.stdev, std::sqrt(125.0));
}

TEST(SampleStatistics, MonotoneInEveryValue) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  std::uniform_real_distribution<double> any(0.0, 100.0);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<double> values(1 + rng() % 7);
    for (double& x : values) x = any(rng);
    std::vector<double> raised = values;
    for (double& x : raised) x += rng() % 2 == 0 ? any(rng) : 0.0;
    for (const SampleStatistic st : {SampleStatistic::mean, SampleStatistic::p50, SampleStatistic::p90, SampleStatistic::max}) {
      EXPECT_LE(sample_statistic(values, st), sample_statistic(raised, st) + 1e-9) << to_string(st);
      const double at = values[representative_sample(values, st)];
      if (st != SampleStatistic::mean) {
        EXPECT_EQ(at, sample_statistic(values, st));
      }
    }
  }
}

TEST(SampleStatistics, NamesAndRefusals) {
  for (const SampleStatistic st : {SampleStatistic::mean, SampleStatistic::p50, SampleStatistic::p90, SampleStatistic::max}) {
    EXPECT_EQ(parse_sample_statistic(to_string(st), "--rank-by"), st);
  }
  try {
    parse_sample_statistic("p75", "--rank-by");
    FAIL() << "p75 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--rank-by 'p75'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(sample_statistic({}, SampleStatistic::mean), InputError);
  EXPECT_THROW(sample_spread({}), InputError);
}

}  // namespace
}  // namespace sparsering
