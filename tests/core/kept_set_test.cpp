// The kept set of a layer (core/kept_set.hpp): hand-built cases for every invariant and for the
// padded layout, then random sets against a std::set oracle (normalisation, padding, the round
// trip through the padded layout, corrupted lists rejected). The random cases print their seed;
// SPARSERING_TEST_SEED=<n> repeats a run (the convention of tests/kernels/kernel_test_support.hpp).
#include "core/kept_set.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace sparsering {
namespace {

/// The run's seed: SPARSERING_TEST_SEED if set, else fresh from std::random_device.
uint64_t run_seed() {
  static const uint64_t seed = [] {
    if (const char* env = std::getenv("SPARSERING_TEST_SEED")) return static_cast<uint64_t>(std::stoull(env));
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }();
  return seed;
}

/// A generator for the current test, seeded from the run seed and the test's name; prints the seed.
std::mt19937_64 test_rng() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = std::string(info->test_suite_name()) + "." + info->name();
  const uint64_t seed = run_seed();
  std::cout << "[   seed   ] " << name << " seed " << seed << " (repeat with SPARSERING_TEST_SEED=" << seed << ")\n";
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return std::mt19937_64(seed ^ std::hash<std::string>{}(name));
}

int64_t uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

/// A list of random entries in [0, n): any order, with duplicates, sometimes empty.
std::vector<int32_t> random_list(std::mt19937_64& rng, int64_t n) {
  std::vector<int32_t> list(static_cast<size_t>(uniform(rng, 0, 3) == 0 ? 0 : uniform(rng, 1, 2 * n)));
  for (int32_t& v : list) v = static_cast<int32_t>(uniform(rng, 0, n - 1));
  return list;
}

TEST(KeptSet, TakesSortedUniqueInRangeRows) {
  const KeptSet kept(100, {KeptRow{{0, 5, 99}, {0, 1, 2}}, KeptRow{{}, {7}}});
  EXPECT_EQ(kept.rows(), 2);
  EXPECT_EQ(kept.seq_len_tokens(), 100);
  EXPECT_EQ(kept.row(0).vertical_keys, (std::vector<int32_t>{0, 5, 99}));
  EXPECT_EQ(kept.row(1).slash_offsets, (std::vector<int32_t>{7}));
  EXPECT_EQ(kept.capacity(), 3);
  EXPECT_NO_THROW(KeptSet(1, {KeptRow{{0}, {0}}}));
  EXPECT_NO_THROW(KeptSet(100, {}));
}

TEST(KeptSet, RejectsBrokenInvariants) {
  EXPECT_THROW(KeptSet(100, {KeptRow{{}, {5, 3}}}), InputError);      // descending
  EXPECT_THROW(KeptSet(100, {KeptRow{{4, 4}, {}}}), InputError);      // duplicate
  EXPECT_THROW(KeptSet(100, {KeptRow{{100}, {}}}), InputError);       // = N
  EXPECT_THROW(KeptSet(100, {KeptRow{{}, {-1}}}), InputError);        // negative
  EXPECT_THROW(KeptSet(0, {}), InputError);                            // no tokens
  EXPECT_THROW(KeptSet(int64_t{1} << 31, {}), InputError);             // does not fit int32
  EXPECT_THROW(KeptSet::dense(-1, 10), InputError);
  EXPECT_THROW(KeptSet::dense(1, 0), InputError);
  EXPECT_THROW(KeptSet::normalized(10, {KeptRow{{3, 10, 3}, {}}}), InputError);  // sorted, still out of range
  try {
    KeptSet(100, {KeptRow{}, KeptRow{{}, {1, 2, 2}}});
    FAIL() << "duplicate accepted";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("row 1"), std::string::npos) << message;
    EXPECT_NE(message.find("slash_offsets"), std::string::npos) << message;
  }
}

TEST(KeptSet, NormalizedSortsAndDeduplicates) {
  const KeptSet kept = KeptSet::normalized(50, {KeptRow{{9, 1, 9, 0}, {3, 3, 0}}});
  EXPECT_EQ(kept.row(0).vertical_keys, (std::vector<int32_t>{0, 1, 9}));
  EXPECT_EQ(kept.row(0).slash_offsets, (std::vector<int32_t>{0, 3}));
}

TEST(KeptSet, DenseKeepsEveryOffset) {
  const KeptSet kept = KeptSet::dense(3, 5);
  EXPECT_EQ(kept.rows(), 3);
  for (int32_t r = 0; r < 3; ++r) {
    EXPECT_TRUE(kept.row(r).vertical_keys.empty());
    EXPECT_EQ(kept.row(r).slash_offsets, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  }
  const PaddedKeptSet padded = kept.padded();
  EXPECT_EQ(padded.capacity, 5);
  EXPECT_EQ(padded.vertical_count, (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(padded.slash_count, (std::vector<int32_t>{5, 5, 5}));
  EXPECT_EQ(padded.vertical_keys, std::vector<int32_t>(15, -1));
}

TEST(KeptSet, PaddedLayoutByHand) {
  const KeptSet kept(10, {KeptRow{{2}, {0, 4, 6}}, KeptRow{{1, 3}, {}}});
  const PaddedKeptSet padded = kept.padded();
  EXPECT_EQ(padded.rows, 2);
  EXPECT_EQ(padded.capacity, 3);
  EXPECT_EQ(padded.vertical_count, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(padded.vertical_keys, (std::vector<int32_t>{2, -1, -1, 1, 3, -1}));
  EXPECT_EQ(padded.slash_count, (std::vector<int32_t>{3, 0}));
  EXPECT_EQ(padded.slash_offsets, (std::vector<int32_t>{0, 4, 6, -1, -1, -1}));
  EXPECT_EQ(KeptSet::from_padded(padded, 10), kept);
  // Empty rows still get one entry per row; no rows give empty arrays.
  EXPECT_EQ(KeptSet(10, {KeptRow{}}).padded().capacity, 1);
  const PaddedKeptSet none = KeptSet().padded();
  EXPECT_EQ(none.rows, 0);
  EXPECT_EQ(none.capacity, 1);
  EXPECT_TRUE(none.vertical_keys.empty());
}

TEST(KeptSet, FromPaddedChecksTheArrays) {
  PaddedKeptSet padded = KeptSet(10, {KeptRow{{2}, {0, 4}}}).padded();
  PaddedKeptSet bad = padded;
  bad.vertical_count[0] = 3;  // more than capacity 2
  EXPECT_THROW(KeptSet::from_padded(bad, 10), InputError);
  bad = padded;
  bad.slash_offsets.pop_back();
  EXPECT_THROW(KeptSet::from_padded(bad, 10), InputError);
  bad = padded;
  bad.slash_offsets = {4, 0};  // descending
  EXPECT_THROW(KeptSet::from_padded(bad, 10), InputError);
  EXPECT_THROW(KeptSet::from_padded(padded, 4), InputError);  // 4 is not in [0, 4)
}

TEST(KeptSet, RandomSetsMatchTheSetOracle) {
  std::mt19937_64 rng = test_rng();
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t n = uniform(rng, 1, 300);
    const auto rows = static_cast<size_t>(uniform(rng, 0, 6));
    std::vector<KeptRow> raw(rows);
    std::vector<std::set<int32_t>> vertical(rows), slash(rows);
    for (size_t r = 0; r < rows; ++r) {
      raw[r] = KeptRow{random_list(rng, n), random_list(rng, n)};
      vertical[r].insert(raw[r].vertical_keys.begin(), raw[r].vertical_keys.end());
      slash[r].insert(raw[r].slash_offsets.begin(), raw[r].slash_offsets.end());
    }
    SCOPED_TRACE("trial " + std::to_string(trial) + " N=" + std::to_string(n));
    const KeptSet kept = KeptSet::normalized(n, raw);
    ASSERT_EQ(kept.rows(), static_cast<int32_t>(rows));
    size_t longest = 1;
    for (size_t r = 0; r < rows; ++r) {
      const auto row = static_cast<int32_t>(r);
      EXPECT_EQ(kept.row(row).vertical_keys, std::vector<int32_t>(vertical[r].begin(), vertical[r].end()));
      EXPECT_EQ(kept.row(row).slash_offsets, std::vector<int32_t>(slash[r].begin(), slash[r].end()));
      longest = std::max({longest, vertical[r].size(), slash[r].size()});
    }
    const PaddedKeptSet padded = kept.padded();
    ASSERT_EQ(padded.capacity, static_cast<int32_t>(longest));
    const auto capacity = static_cast<size_t>(padded.capacity);
    for (size_t r = 0; r < rows; ++r) {
      EXPECT_EQ(padded.vertical_count[r], static_cast<int32_t>(vertical[r].size()));
      EXPECT_EQ(padded.slash_count[r], static_cast<int32_t>(slash[r].size()));
      for (size_t e = 0; e < capacity; ++e) {
        if (e >= vertical[r].size()) {
          EXPECT_EQ(padded.vertical_keys[r * capacity + e], -1);
        }
        if (e >= slash[r].size()) {
          EXPECT_EQ(padded.slash_offsets[r * capacity + e], -1);
        }
      }
    }
    EXPECT_EQ(KeptSet::from_padded(padded, n), kept);
    // Corrupt one row: an entry out of range, or two entries out of order.
    if (rows > 0) {
      std::vector<KeptRow> broken;
      for (int32_t r = 0; r < kept.rows(); ++r) broken.push_back(kept.row(r));
      KeptRow& victim = broken[static_cast<size_t>(uniform(rng, 0, static_cast<int64_t>(rows) - 1))];
      std::vector<int32_t>& list = uniform(rng, 0, 1) == 0 ? victim.vertical_keys : victim.slash_offsets;
      if (list.size() >= 2 && uniform(rng, 0, 1) == 0) {
        std::swap(list.front(), list.back());
      } else {
        list.push_back(static_cast<int32_t>(n));
      }
      EXPECT_THROW(KeptSet(n, broken), InputError);
    }
  }
}

}  // namespace
}  // namespace sparsering
