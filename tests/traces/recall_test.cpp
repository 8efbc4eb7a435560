// Recall selection against hand-computed prefixes and a brute-force oracle.
#include "traces/recall.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "common/error.hpp"
#include "trace_test_util.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

int64_t prefix(const std::vector<float>& mass, double p, int64_t min_entries = 0, int64_t cap = 1000,
               int64_t real = -1) {
  return recall_prefix_length(mass, real < 0 ? static_cast<int64_t>(mass.size()) : real, p, min_entries, cap);
}

TEST(RecallPrefix, HandComputedCases) {
  // Total M = 0.8; cumulative shares of M: 0.5, 0.75, 0.875, 0.9375, 1.
  const std::vector<float> m = {0.4f, 0.2f, 0.1f, 0.05f, 0.05f};
  EXPECT_EQ(prefix(m, 0.1), 1);
  EXPECT_EQ(prefix(m, 0.5), 1);
  EXPECT_EQ(prefix(m, 0.51), 2);
  EXPECT_EQ(prefix(m, 0.75), 2);  // exactly on a boundary: float rounding must not add an entry
  EXPECT_EQ(prefix(m, 0.76), 3);
  EXPECT_EQ(prefix(m, 0.875), 3);
  EXPECT_EQ(prefix(m, 0.9), 4);
  EXPECT_EQ(prefix(m, 0.9375), 4);
  EXPECT_EQ(prefix(m, 0.95), 5);
  EXPECT_EQ(prefix(m, 1.0), 5);
  // Minimum and cap.
  EXPECT_EQ(prefix(m, 0.5, 3), 3);
  EXPECT_EQ(prefix(m, 0.5, 10), 5);  // never more than the candidates
  EXPECT_EQ(prefix(m, 0.95, 0, 2), 2);
  EXPECT_EQ(prefix(m, 0.95, 4, 2), 2);  // the cap wins over the minimum
  EXPECT_EQ(prefix(m, 0.95, 0, 0), 0);
}

TEST(RecallPrefix, PadsZeroMassAndEmptyLists) {
  EXPECT_EQ(prefix({0.5f, 0.5f, 0.0f, 0.0f}, 1.0, 0, 1000, 2), 2);
  EXPECT_EQ(prefix({0.5f, 0.5f, 0.0f, 0.0f}, 1.0, 4, 1000, 2), 2);  // pads are never kept
  EXPECT_EQ(prefix({0.6f, 0.4f, 0.0f, 0.0f}, 1.0), 2);              // zero-mass candidates not needed
  EXPECT_EQ(prefix({0.6f, 0.4f, 0.0f, 0.0f}, 1.0, 3), 3);           // ... unless the minimum asks
  EXPECT_EQ(prefix({0.0f, 0.0f, 0.0f}, 0.9), 0);
  EXPECT_EQ(prefix({0.0f, 0.0f, 0.0f}, 0.9, 2), 2);
  EXPECT_EQ(prefix({}, 0.9, 5), 0);
  // Shares are relative to the candidates' total, not to 1.
  EXPECT_EQ(prefix({0.01f, 0.01f}, 0.5), 1);
  EXPECT_EQ(prefix({0.01f, 0.01f}, 0.51), 2);
}

TEST(RecallPrefix, MatchesBruteForceOnRandomLists) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  for (int round = 0; round < 500; ++round) {
    const size_t n = rng() % 40;
    std::vector<float> m(n);
    for (auto& x : m)
      x = static_cast<float>(std::uniform_real_distribution<double>(0.0, 1.0)(rng) / (static_cast<double>(n) + 1.0));
    std::sort(m.begin(), m.end(), std::greater<>());
    const double p = std::uniform_real_distribution<double>(0.01, 1.0)(rng);
    // Oracle: the first k whose cumulative share reaches p (with the documented 1e-6 slack).
    std::vector<double> cumulative(n + 1, 0.0);
    for (size_t i = 0; i < n; ++i) cumulative[i + 1] = cumulative[i] + static_cast<double>(m[i]);
    const double total = cumulative[n];
    int64_t expected = 0;
    if (total > 0.0) {
      while (cumulative[static_cast<size_t>(expected)] < p * total * (1.0 - 1e-6)) ++expected;
    }
    EXPECT_EQ(prefix(m, p), expected) << "n " << n << " p " << p;
  }
}

// head 0: verticals {0, 57, 3} with masses {0.5, 0.25, 0.25}, slashes {0, 1, 2, 64} with
// {0.4, 0.3, 0.2, 0.1}; head 1: one vertical {99}, no slash.
Trace two_heads() {
  Trace t;
  t.samples = 1;
  t.layers = 1;
  t.heads = 2;
  t.vertical_candidates = 4;
  t.slash_candidates = 4;
  t.sample_seq_len = {100};
  t.vertical_index = {0, 57, 3, -1, 99, -1, -1, -1};
  t.vertical_mass = {0.5f, 0.25f, 0.25f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f};
  t.slash_offset = {0, 1, 2, 64, -1, -1, -1, -1};
  t.slash_mass = {0.4f, 0.3f, 0.2f, 0.1f, 0.0f, 0.0f, 0.0f, 0.0f};
  validate_trace(t);
  return t;
}

TEST(SelectHead, KeptPositionsAreTheMassPrefix) {
  const Trace t = two_heads();
  RecallSettings s;
  s.recall = 0.6;
  HeadSelection h0 = select_head(t, 0, 0, 0, s);
  EXPECT_EQ(h0.vertical_keys, (std::vector<int32_t>{0, 57}));
  EXPECT_EQ(h0.slash_offsets, (std::vector<int32_t>{0, 1}));
  s.recall = 0.95;
  h0 = select_head(t, 0, 0, 0, s);
  EXPECT_EQ(h0.vertical_keys, (std::vector<int32_t>{0, 57, 3}));
  EXPECT_EQ(h0.slash_offsets, (std::vector<int32_t>{0, 1, 2, 64}));
  s.max_slashes = 1;
  s.max_verticals = 2;
  h0 = select_head(t, 0, 0, 0, s);
  EXPECT_EQ(h0.vertical_keys, (std::vector<int32_t>{0, 57}));
  EXPECT_EQ(h0.slash_offsets, (std::vector<int32_t>{0}));
  s = RecallSettings{};
  s.min_entries = 2;
  const HeadSelection h1 = select_head(t, 0, 0, 1, s);
  EXPECT_EQ(h1.vertical_keys, (std::vector<int32_t>{99}));
  EXPECT_TRUE(h1.slash_offsets.empty());
  const KeptCounts c = kept_counts(t, 0, 0, 0, RecallSettings{});
  EXPECT_EQ(c.verticals, 3);
  EXPECT_EQ(c.slashes, 4);
}

TEST(RecallSettings, OutOfRangeIsAnInputError) {
  for (const double p : {0.0, -0.5, 1.0000001, 2.0, std::nan("")}) {
    RecallSettings s;
    s.recall = p;
    EXPECT_THROW(validate_recall_settings(s), InputError) << p;
  }
  RecallSettings s;
  EXPECT_NO_THROW(validate_recall_settings(s));
  s.max_verticals = -1;
  EXPECT_THROW(validate_recall_settings(s), InputError);
  s = RecallSettings{};
  s.max_slashes = -1;
  EXPECT_THROW(validate_recall_settings(s), InputError);
  s = RecallSettings{};
  s.min_entries = -1;
  EXPECT_THROW(validate_recall_settings(s), InputError);
}

}  // namespace
}  // namespace sparsering
