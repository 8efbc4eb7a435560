// RunSet operations and the diagonal pair sums against element-by-element enumeration on random
// sets (sim/work/run_set.hpp).
#include "sim/work/run_set.hpp"
#include "tests/common/test_seed.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

namespace sparsering {
namespace {

std::set<int64_t> elements(const RunSet& set) {
  std::set<int64_t> out;
  for (const Interval& run : set.runs()) {
    for (int64_t x = run.lo; x <= run.hi; ++x) out.insert(x);
  }
  return out;
}

void expect_canonical(const RunSet& set) {
  for (size_t k = 0; k < set.runs().size(); ++k) {
    EXPECT_LE(set.runs()[k].lo, set.runs()[k].hi);
    if (k > 0) {
      EXPECT_GT(set.runs()[k].lo, set.runs()[k - 1].hi + 1) << "runs must be separated";
    }
  }
}

RunSet random_set(std::mt19937_64& rng, int64_t lo, int64_t hi, double density) {
  std::bernoulli_distribution keep(density);
  std::vector<int64_t> points;
  for (int64_t x = lo; x <= hi; ++x) {
    if (keep(rng)) points.push_back(x);
  }
  return RunSet::dilated_points(points, 0);
}

TEST(RunSetTest, DilatedPointsIsUnionOfWindows) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  for (int trial = 0; trial < 200; ++trial) {
    std::uniform_int_distribution<int64_t> value(-50, 50);
    std::vector<int64_t> points(static_cast<size_t>(rng() % 12));
    for (auto& p : points) p = value(rng);
    std::sort(points.begin(), points.end());
    const int64_t width = static_cast<int64_t>(rng() % 7);
    const RunSet set = RunSet::dilated_points(points, width);
    expect_canonical(set);
    std::set<int64_t> expected;
    for (const int64_t p : points) {
      for (int64_t y = p - width; y <= p; ++y) expected.insert(y);
    }
    EXPECT_EQ(elements(set), expected);
    for (int64_t x = -60; x <= 60; ++x) EXPECT_EQ(set.contains(x), expected.count(x) == 1) << x;
    EXPECT_EQ(set.size(), static_cast<int64_t>(expected.size()));
  }
}

TEST(RunSetTest, SampleWindowHitsAndUnite) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  for (int trial = 0; trial < 300; ++trial) {
    const RunSet a = random_set(rng, -40, 40, 0.3);
    const RunSet b = random_set(rng, -40, 40, 0.2);
    const auto ea = elements(a);
    const auto eb = elements(b);
    std::uniform_int_distribution<int64_t> small(-10, 10);
    const int64_t offset = small(rng);
    const int64_t stride = 1 + static_cast<int64_t>(rng() % 6);
    const int64_t m_lo = small(rng);
    const int64_t m_hi = m_lo + static_cast<int64_t>(rng() % 20) - 2;
    std::set<int64_t> sampled;
    for (int64_t m = m_lo; m <= m_hi; ++m) {
      if (ea.count(offset + m * stride)) sampled.insert(m);
    }
    const RunSet s = a.sample(offset, stride, m_lo, m_hi);
    expect_canonical(s);
    EXPECT_EQ(elements(s), sampled);

    const int64_t lo = small(rng);
    const int64_t hi = lo + static_cast<int64_t>(rng() % 5);
    std::set<int64_t> hits;
    for (int64_t y = m_lo; y <= m_hi + 10; ++y) {
      for (int64_t x = y + lo; x <= y + hi; ++x) {
        if (ea.count(x)) {
          hits.insert(y);
          break;
        }
      }
    }
    const RunSet w = a.window_hits(lo, hi, m_lo, m_hi + 10);
    expect_canonical(w);
    EXPECT_EQ(elements(w), hits);

    std::set<int64_t> both = ea;
    both.insert(eb.begin(), eb.end());
    const RunSet u = RunSet::unite(a, b);
    expect_canonical(u);
    EXPECT_EQ(elements(u), both);

    // Counts inside a range, of one set and of the union, against the enumerated sets.
    const int64_t range_lo = small(rng) * 4;
    const int64_t range_hi = range_lo + static_cast<int64_t>(rng() % 50) - 5;
    const auto count_in = [&](const std::set<int64_t>& set) {
      return static_cast<int64_t>(std::count_if(set.begin(), set.end(), [&](int64_t x) { return x >= range_lo && x <= range_hi; }));
    };
    EXPECT_EQ(a.size_in(range_lo, range_hi), count_in(ea)) << "[" << range_lo << ", " << range_hi << "]";
    EXPECT_EQ(RunSet::union_size_in(a, b, range_lo, range_hi), count_in(both)) << "[" << range_lo << ", " << range_hi << "]";
    EXPECT_EQ(RunSet::union_size_in(b, RunSet{}, range_lo, range_hi), count_in(eb));
  }
}

TEST(RunSetTest, FloorAndCeilDivision) {
  for (int64_t a = -20; a <= 20; ++a) {
    for (int64_t b = 1; b <= 6; ++b) {
      int64_t f = a / b;
      if (f * b > a) --f;
      EXPECT_EQ(floor_div(a, b), f) << a << "/" << b;
      EXPECT_EQ(ceil_div(a, b), (f * b == a) ? f : f + 1) << a << "/" << b;
    }
  }
}

TEST(RunSetTest, DiagonalPairSumsMatchEnumeration) {
  for (int64_t na = 0; na <= 7; ++na) {
    for (int64_t nb = 0; nb <= 7; ++nb) {
      for (int64_t mu = -10; mu <= 10; ++mu) {
        int64_t pairs = 0;
        for (int64_t a = 0; a < na; ++a) pairs += (a - mu >= 0 && a - mu < nb) ? 1 : 0;
        EXPECT_EQ(diagonal_pairs(na, nb, mu), pairs) << na << " " << nb << " " << mu;
      }
      for (int64_t lo = -10; lo <= 10; ++lo) {
        for (int64_t hi = lo - 1; hi <= 10; ++hi) {
          int64_t sum = 0;
          for (int64_t mu = lo; mu <= hi; ++mu) sum += diagonal_pairs(na, nb, mu);
          ASSERT_EQ(diagonal_pairs_sum(na, nb, lo, hi), sum) << na << " " << nb << " [" << lo << ", " << hi << "]";
        }
      }
    }
  }
}

}  // namespace
}  // namespace sparsering
