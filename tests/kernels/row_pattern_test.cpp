// Tests of kernels/index/row_pattern.hpp: merging offsets into intervals (offset 0 always in),
// deduplicating keys, and InputError on values outside [0, N).
#include "kernels/index/row_pattern.hpp"

#include <gtest/gtest.h>

#include <set>

#include "common/error.hpp"
#include "kernel_test_support.hpp"

namespace sparsering {
namespace {

TEST(RowPattern, MergesOffsetsAndAddsZero) {
  const std::vector<int64_t> offsets = {9, 3, 4, 5, 5, 11, 10, 20};
  const std::vector<int64_t> keys = {7, 2, 7, 0};
  const PreparedRowPattern row = prepare_row_pattern(offsets, keys, 32);
  const std::vector<OffsetInterval> expected = {{0, 0}, {3, 5}, {9, 11}, {20, 20}};
  EXPECT_EQ(row.slash_intervals, expected);
  EXPECT_EQ(row.vertical_tokens, (std::vector<int64_t>{0, 2, 7}));
  EXPECT_EQ(kept_slash_offsets(row), 8);
  const PreparedRowPattern adjacent = prepare_row_pattern(std::vector<int64_t>{1, 2}, {}, 4);
  EXPECT_EQ(adjacent.slash_intervals, (std::vector<OffsetInterval>{{0, 2}}));
}

TEST(RowPattern, IntervalsCoverExactlyTheKeptOffsets) {
  std::mt19937_64 rng = testing_support::test_rng();
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t n = testing_support::uniform(rng, 1, 300);
    const RowPattern pattern = testing_support::random_row_pattern(rng, n);
    const PreparedRowPattern row = prepare_row_pattern(pattern, n);
    std::set<int64_t> expected(pattern.slash_offsets.begin(), pattern.slash_offsets.end());
    expected.insert(0);
    std::set<int64_t> covered;
    for (size_t i = 0; i < row.slash_intervals.size(); ++i) {
      const OffsetInterval& interval = row.slash_intervals[i];
      ASSERT_LE(interval.lo, interval.hi);
      if (i > 0) {
        ASSERT_GT(interval.lo, row.slash_intervals[i - 1].hi + 1) << "intervals must not touch";
      }
      for (int64_t d = interval.lo; d <= interval.hi; ++d) covered.insert(d);
    }
    EXPECT_EQ(covered, expected);
    EXPECT_EQ(kept_slash_offsets(row), static_cast<int64_t>(expected.size()));
    const std::set<int64_t> keys(pattern.vertical_tokens.begin(), pattern.vertical_tokens.end());
    EXPECT_EQ(row.vertical_tokens, std::vector<int64_t>(keys.begin(), keys.end()));
  }
}

TEST(RowPattern, RejectsValuesOutsideTheSequence) {
  EXPECT_THROW(prepare_row_pattern(std::vector<int64_t>{-1}, {}, 8), InputError);
  EXPECT_THROW(prepare_row_pattern(std::vector<int64_t>{8}, {}, 8), InputError);
  EXPECT_THROW(prepare_row_pattern({}, std::vector<int64_t>{8}, 8), InputError);
  EXPECT_THROW(prepare_row_pattern({}, std::vector<int64_t>{-2}, 8), InputError);
  EXPECT_THROW(prepare_row_pattern({}, {}, 0), InputError);
  const std::vector<RowPattern> rows = {RowPattern{{1}, {}}, RowPattern{{}, {9}}};
  try {
    prepare_row_patterns(rows, 8);
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("row 1: vertical key #0 = 9"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace sparsering
