// Synthetic candidate positions: distinctness, ranges, exclusions, and the slash core's order.
#include "traces/synth/candidate_positions.hpp"
#include "tests/common/test_seed.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

namespace sparsering::synth {
namespace {

void expect_distinct_in_range(const std::vector<int32_t>& values, int64_t lo, int64_t hi) {
  std::set<int32_t> seen;
  for (const int32_t v : values) {
    EXPECT_GE(v, lo);
    EXPECT_LT(v, hi);
    EXPECT_TRUE(seen.insert(v).second) << "repeat " << v;
  }
}

TEST(SampleDistinct, DenseSparseAndHugeRanges) {
  SplitMix64 rng(sparsering::testing_support::test_seed());
  const std::vector<int32_t> excluded = {3, 5, 8, 100, 1000};
  struct Case {
    int64_t lo, hi, count;
  };
  // Dense (count >= range / 3), sparse with a bitmap, sparse beyond the bitmap limit (hash set).
  for (const Case c : {Case{0, 12, 7}, Case{2, 10, 5}, Case{0, 100000, 5000}, Case{1, int64_t{1} << 30, 3000}}) {
    const auto values = sample_distinct(rng, c.lo, c.hi, c.count, excluded);
    EXPECT_EQ(static_cast<int64_t>(values.size()), c.count);
    expect_distinct_in_range(values, c.lo, c.hi);
    for (const int32_t v : values) EXPECT_FALSE(std::binary_search(excluded.begin(), excluded.end(), v)) << v;
  }
  // Everything that is allowed.
  auto all = sample_distinct(rng, 0, 10, 7, excluded);
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<int32_t>{0, 1, 2, 4, 6, 7, 9}));
  EXPECT_TRUE(sample_distinct(rng, 0, 10, 0, excluded).empty());
}

TEST(SampleDistinct, SameSeedSameDraws) {
  SplitMix64 a(42), b(42);
  EXPECT_EQ(sample_distinct(a, 0, 1 << 20, 500, {}), sample_distinct(b, 0, 1 << 20, 500, {}));
}

TEST(DocumentStarts, IncreasingInsideTheSequence) {
  SplitMix64 rng(sparsering::testing_support::test_seed());
  const auto starts = document_starts(rng, 1 << 20, 1024, 131072);
  ASSERT_FALSE(starts.empty());
  EXPECT_EQ(starts.front(), 0);
  for (size_t i = 1; i < starts.size(); ++i) {
    EXPECT_GE(starts[i] - starts[i - 1], 1024 - 1);
    EXPECT_LT(starts[i], 1 << 20);
  }
}

TEST(HeavyKeys, PoolAndHeadViews) {
  SplitMix64 rng(sparsering::testing_support::test_seed());
  const std::vector<int64_t> starts = {0, 5000, 9000};
  for (const int64_t n : {int64_t{17}, int64_t{20000}}) {
    const int64_t size = std::min<int64_t>(n - 1, 3000);
    const auto pool = heavy_key_pool(rng, n, size, starts);
    EXPECT_EQ(static_cast<int64_t>(pool.size()), size);
    expect_distinct_in_range(pool, 1, n);
    for (const int64_t first : {1, 3}) {
      const int64_t count = std::min<int64_t>(size - 3, 1000);
      const auto keys = head_heavy_keys(rng, pool, first, count, 0.3);
      EXPECT_EQ(static_cast<int64_t>(keys.size()), count);
      expect_distinct_in_range(keys, first, n);
      for (const int32_t k : keys) EXPECT_NE(std::find(pool.begin(), pool.end(), k), pool.end());
    }
  }
  // Document starts lead the pool.
  const auto pool = heavy_key_pool(rng, 20000, 400, starts);
  const auto pos = std::find(pool.begin(), pool.end(), 5000) - pool.begin();
  EXPECT_LT(pos, 200);
}

TEST(SlashCore, WindowFirstThenDistinctBands) {
  const uint64_t seed = sparsering::testing_support::test_seed();
  for (const int64_t n : {int64_t{64}, int64_t{5000}, int64_t{1} << 20}) {
    SplitMix64 rng(seed ^ static_cast<uint64_t>(n));
    const int64_t window = std::min<int64_t>(40, n);
    const int64_t count = std::min<int64_t>(n, 600);
    auto next = [&]() {
      DiagonalCluster c;
      c.width = rng.between(1, 20);
      c.center = rng.between(window, std::max<int64_t>(window, n + 10));
      c.weight = rng.uniform(0.01, 0.5);
      return c;
    };
    const auto offsets = slash_core(n, window, count, next);
    ASSERT_EQ(static_cast<int64_t>(offsets.size()), count);
    expect_distinct_in_range(offsets, 0, n);
    EXPECT_EQ(offsets[0], 0);
    // The window's strongest offsets come in increasing order, and the whole window is present.
    EXPECT_EQ(offsets[1], 1);
    for (int64_t d = 0; d < window; ++d) EXPECT_NE(std::find(offsets.begin(), offsets.end(), d), offsets.end()) << d;
  }
}

TEST(SlashCore, FillsWhenBandsStopAddingOffsets) {
  // Bands that always hit the same offsets cannot reach the count: the rest is filled in order.
  auto same = [] { return DiagonalCluster{100, 3, 0.5}; };
  const auto offsets = slash_core(1000, 10, 30, same);
  ASSERT_EQ(offsets.size(), 30u);
  std::set<int32_t> sorted(offsets.begin(), offsets.end());
  EXPECT_EQ(sorted.size(), 30u);
  EXPECT_TRUE(sorted.count(99) && sorted.count(100) && sorted.count(101));
  EXPECT_TRUE(sorted.count(10) && sorted.count(26));
}

}  // namespace
}  // namespace sparsering::synth
