// Tests of kernels/reference/pattern_candidates.hpp: top-K by mass with ties to the smaller
// position, zero masses dropped, -1 / 0 pads, shares normalised by the total; candidates from a
// real estimate form a trace that validate_trace accepts; per-rank vertical masses land at their
// global positions.
#include "kernels/reference/pattern_candidates.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "common/error.hpp"
#include "kernels/reference/estimate_pattern_ref.hpp"
#include "kernel_test_support.hpp"
#include "traces/trace.hpp"

namespace sparsering {
namespace {

TEST(PatternCandidates, HandDerivedTopK) {
  const std::vector<float> vertical = {0.5f, 0.0f, 2.0f, 0.5f, 1.0f};  // total 4
  const std::vector<float> slash = {3.0f, 1.0f};                      // total 4
  const PatternCandidates c = select_pattern_candidates(vertical, slash, 4, 3);
  EXPECT_EQ(c.vertical_index, (std::vector<int32_t>{2, 4, 0, 3}));  // tie 0.5: position 0 first
  EXPECT_EQ(c.vertical_mass, (std::vector<float>{0.5f, 0.25f, 0.125f, 0.125f}));
  EXPECT_EQ(c.slash_offset, (std::vector<int32_t>{0, 1, -1}));  // only two non-zero: one pad
  EXPECT_EQ(c.slash_mass, (std::vector<float>{0.75f, 0.25f, 0.0f}));
  const PatternCandidates few = select_pattern_candidates(vertical, slash, 1, 0);
  EXPECT_EQ(few.vertical_index, (std::vector<int32_t>{2}));
  EXPECT_TRUE(few.slash_offset.empty());
  EXPECT_THROW(select_pattern_candidates(std::vector<float>{-1.0f}, slash, 1, 1), InputError);
  EXPECT_THROW(select_pattern_candidates(vertical, slash, -1, 1), InputError);
}

TEST(PatternCandidates, RandomMassesAgainstSorting) {
  std::mt19937_64 rng = testing_support::test_rng();
  for (int trial = 0; trial < 50; ++trial) {
    const auto n = static_cast<size_t>(testing_support::uniform(rng, 1, 500));
    std::vector<float> mass(n);
    for (float& m : mass) m = static_cast<float>(testing_support::uniform(rng, 0, 20)) / 4.0f;  // many ties and zeros
    const int64_t slots = testing_support::uniform(rng, 0, 600);
    const PatternCandidates c = select_pattern_candidates(mass, mass, slots, slots);
    std::vector<int32_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return mass[static_cast<size_t>(a)] > mass[static_cast<size_t>(b)];
    });
    const double total = std::accumulate(mass.begin(), mass.end(), 0.0, [](double s, float m) { return s + static_cast<double>(m); });
    for (size_t slot = 0; slot < static_cast<size_t>(slots); ++slot) {
      const bool real = slot < n && mass[static_cast<size_t>(order[slot])] > 0.0f;
      ASSERT_EQ(c.vertical_index[slot], real ? order[slot] : -1) << slot;
      ASSERT_EQ(c.vertical_mass[slot],
                real ? static_cast<float>(static_cast<double>(mass[static_cast<size_t>(order[slot])]) / total) : 0.0f);
    }
    EXPECT_EQ(c.slash_offset, c.vertical_index);
  }
}

// Estimate one head's pattern over a striped 4-rank sequence, gather it, select candidates, and
// write them into a trace: the trace validator accepts it.
TEST(PatternCandidates, EstimateToValidTrace) {
  std::mt19937_64 rng = testing_support::test_rng();
  const TokenLayout layout = make_token_layout(LayoutKind::striped, 128, 4, 8);
  const int64_t last_q = 16;
  const auto q = testing_support::random_bf16(rng, static_cast<size_t>(last_q * 64), 2.0f);
  const auto k = testing_support::random_bf16(rng, static_cast<size_t>(128 * 64), 1.0f);
  std::vector<std::vector<bf16_bits>> keys;
  for (int32_t r = 0; r < 4; ++r) keys.push_back(testing_support::to_local(k, layout, r, 1, 64));
  std::vector<float> row_max(last_q, -std::numeric_limits<float>::infinity()), row_sum(last_q, 0.0f);
  std::vector<float> slash(128, 0.0f);
  std::vector<std::vector<float>> vertical(4, std::vector<float>(32));
  for (const int pass : {1, 2}) {
    for (int32_t r = 0; r < 4; ++r) {
      EstimateParams params;
      params.shape.head_dim = 64;
      params.shape.q_len = last_q;
      params.shape.kv_len = 32;
      params.position = RingPosition{layout, 0, r};
      params.softmax_scale = 0.125f;
      params.q_last = q.data();
      params.k = keys[static_cast<size_t>(r)].data();
      if (pass == 1) {
        std::vector<float> shard_max(last_q), shard_sum(last_q);
        params.row_max = shard_max.data();
        params.row_sum = shard_sum.data();
        estimate_pattern_pass1_ref(params);
        estimate_pattern_combine_ref(last_q, shard_max.data(), shard_sum.data(), row_max.data(), row_sum.data());
      } else {
        params.row_max = row_max.data();
        params.row_sum = row_sum.data();
        params.vertical_mass = vertical[static_cast<size_t>(r)].data();
        params.slash_mass = slash.data();
        estimate_pattern_pass2_ref(params);
      }
    }
  }
  const std::vector<std::span<const float>> per_rank(vertical.begin(), vertical.end());
  const std::vector<float> by_token = vertical_mass_by_token(layout, per_rank);
  for (int32_t r = 0; r < 4; ++r) {
    for (int64_t x = 0; x < 32; ++x) {
      ASSERT_EQ(by_token[static_cast<size_t>(layout.global_token(r, x))], vertical[static_cast<size_t>(r)][static_cast<size_t>(x)]);
    }
  }
  const PatternCandidates c = select_pattern_candidates(by_token, slash, 40, 200);
  Trace trace;
  trace.metadata.source = "captured";
  trace.samples = 1;
  trace.layers = 1;
  trace.heads = 1;
  trace.vertical_candidates = 40;
  trace.slash_candidates = 200;
  trace.vertical_index = c.vertical_index;
  trace.vertical_mass = c.vertical_mass;
  trace.slash_offset = c.slash_offset;
  trace.slash_mass = c.slash_mass;
  trace.sample_seq_len = {128};
  EXPECT_NO_THROW(validate_trace(trace));
  EXPECT_EQ(c.slash_offset[128], -1);  // 128 offsets at most: the rest are pads
  const std::vector<std::span<const float>> too_few(per_rank.begin(), per_rank.begin() + 3);
  EXPECT_THROW(vertical_mass_by_token(layout, too_few), InputError);
}

}  // namespace
}  // namespace sparsering
