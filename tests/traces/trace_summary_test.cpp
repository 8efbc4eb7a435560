// Trace summaries: pair counts against brute-force enumeration of the kernel's semantics,
// distributions, layer aggregation, and the JSON / table renderings.
#include "traces/trace_summary.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "traces/trace_summary_report.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

// Enumerates every causal pair of an n-token sequence. Element level: q - k in the kept offsets
// (plus 0) or k a kept vertical. Tile level (kernels/sparse_index.hpp): a tile is computed when
// some pair in it, causal or not, has q - k in the kept offsets (plus 0); a vertical's pair is
// computed when its tile is not.
HeadPairs brute_force(const std::vector<int32_t>& verticals, const std::vector<int32_t>& slashes, int64_t n,
                      int64_t b) {
  std::set<int64_t> offsets(slashes.begin(), slashes.end());
  offsets.insert(0);
  const std::set<int64_t> keys(verticals.begin(), verticals.end());
  const int64_t blocks = (n + b - 1) / b;
  std::vector<char> touched(static_cast<size_t>(blocks * blocks), 0);
  for (int64_t q = 0; q < n; ++q) {
    for (int64_t k = 0; k < n; ++k) {
      if (offsets.count(q - k)) touched[static_cast<size_t>((q / b) * blocks + k / b)] = 1;
    }
  }
  HeadPairs pairs;
  for (int64_t q = 0; q < n; ++q) {
    for (int64_t k = 0; k <= q; ++k) {
      pairs.causal_pairs += 1;
      const bool slash = offsets.count(q - k) > 0, vertical = keys.count(k) > 0;
      pairs.element_pairs += slash || vertical;
      pairs.tile_pairs += touched[static_cast<size_t>((q / b) * blocks + k / b)] || vertical;
    }
  }
  return pairs;
}

TEST(HeadPairs, MatchesBruteForce) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  for (int round = 0; round < 300; ++round) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 200);
    const int64_t b = 1 + static_cast<int64_t>(rng() % 40);
    std::vector<int32_t> verticals, slashes;
    const auto nv = rng() % 12, ns = rng() % 12;
    for (size_t i = 0; i < nv; ++i) verticals.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(n)));
    // Offsets biased small, like real slashes, but reaching the far end too.
    for (size_t i = 0; i < ns; ++i) {
      const auto range = static_cast<uint64_t>(rng() % 2 ? std::min<int64_t>(n, 3 * b) : n);
      slashes.push_back(static_cast<int32_t>(rng() % range));
    }
    const HeadPairs expected = brute_force(verticals, slashes, n, b);
    const HeadPairs got = head_pairs(verticals, slashes, n, b);
    ASSERT_EQ(got.causal_pairs, expected.causal_pairs);
    ASSERT_EQ(got.element_pairs, expected.element_pairs) << "n " << n << " b " << b << " round " << round;
    ASSERT_EQ(got.tile_pairs, expected.tile_pairs) << "n " << n << " b " << b << " round " << round;
  }
}

HeadPairs pairs_of(std::vector<int32_t> verticals, std::vector<int32_t> slashes, int64_t n, int64_t b) {
  return head_pairs(verticals, slashes, n, b);
}

TEST(HeadPairs, HandComputed) {
  // n = 8, b = 4: 36 causal pairs; diagonal tiles hold 10 + 10.
  EXPECT_EQ(pairs_of({}, {}, 8, 4).element_pairs, 8);
  EXPECT_EQ(pairs_of({}, {}, 8, 4).tile_pairs, 20);
  // Vertical at key 0: 8 pairs, one shared with the diagonal; in tiles, rows 4..7 add 4.
  EXPECT_EQ(pairs_of({0}, {}, 8, 4).element_pairs, 15);
  EXPECT_EQ(pairs_of({0}, {}, 8, 4).tile_pairs, 24);
  // Offset 4 touches block diagonal 1 only (4 is a multiple of b): the 16-pair tile.
  EXPECT_EQ(pairs_of({}, {4}, 8, 4).element_pairs, 12);
  EXPECT_EQ(pairs_of({}, {4}, 8, 4).tile_pairs, 36);
  // n = 7: the last block has 3 rows, so its tile on block diagonal 1 holds offsets 1..6 and
  // offset 6 (q = 6, k = 0) touches it: diagonal tiles 10 + 6, plus that 3 x 4 tile.
  EXPECT_EQ(pairs_of({}, {6}, 7, 4).tile_pairs, 10 + 6 + 12);
}

TEST(Distribution, NearestRankPercentiles) {
  const Distribution d = distribution_of({5, 1, 4, 2, 3, 10, 6, 7, 8, 9});
  EXPECT_EQ(d.min, 1);
  EXPECT_EQ(d.p50, 5);
  EXPECT_EQ(d.p90, 9);
  EXPECT_EQ(d.max, 10);
  EXPECT_DOUBLE_EQ(d.mean, 5.5);
  const Distribution one = distribution_of({3});
  EXPECT_EQ(one.p50, 3);
  EXPECT_EQ(one.p90, 3);
  EXPECT_EQ(distribution_of({}).max, 0);
}

// Two samples x 2 layers x 1 head over 8 tokens.
Trace small_trace() {
  Trace t;
  t.samples = 2;
  t.layers = 2;
  t.heads = 1;
  t.vertical_candidates = 2;
  t.slash_candidates = 2;
  t.sample_seq_len = {8, 8};
  // (sample, layer): (0,0) (0,1) (1,0) (1,1)
  t.vertical_index = {0, 5, -1, -1, 0, -1, 3, 2};
  t.vertical_mass = {0.6f, 0.4f, 0, 0, 1.0f, 0, 0.5f, 0.5f};
  t.slash_offset = {4, -1, 0, 1, -1, -1, 2, 0};
  t.slash_mass = {0.9f, 0, 0.5f, 0.25f, 0, 0, 0.5f, 0.1f};
  validate_trace(t);
  return t;
}

TEST(SummarizeTrace, AggregatesLayersAndHeads) {
  const Trace t = small_trace();
  SummarySettings s;
  s.recall.recall = 0.5;
  s.block_tokens = 4;
  const TraceSummary summary = summarize_trace(t, s);
  ASSERT_EQ(summary.layer_summaries.size(), 2u);
  ASSERT_EQ(summary.head_summaries.size(), 2u);
  // Layer 0: sample 0 keeps vertical {0}, slash {4}; sample 1 keeps vertical {0}, nothing else.
  const HeadPairs a = pairs_of({0}, {4}, 8, 4);
  const HeadPairs b = pairs_of({0}, {}, 8, 4);
  EXPECT_DOUBLE_EQ(summary.layer_summaries[0].tile_density, (a.tile_pairs + b.tile_pairs) / 72.0);
  EXPECT_DOUBLE_EQ(summary.layer_summaries[0].element_density, (a.element_pairs + b.element_pairs) / 72.0);
  EXPECT_DOUBLE_EQ(summary.layer_summaries[0].kept_verticals, 1.0);
  EXPECT_DOUBLE_EQ(summary.layer_summaries[0].kept_slashes, 0.5);
  // Layer 1: sample 0 keeps nothing vertical and slash {0}; sample 1 keeps {3} and {2}.
  EXPECT_DOUBLE_EQ(summary.layer_summaries[1].kept_verticals, 0.5);
  EXPECT_DOUBLE_EQ(summary.layer_summaries[1].kept_slashes, 1.0);
  EXPECT_EQ(summary.kept_verticals.max, 1);
  EXPECT_EQ(summary.kept_slashes.min, 0);
  const double total =
      a.tile_pairs + b.tile_pairs + pairs_of({}, {0}, 8, 4).tile_pairs + pairs_of({3}, {2}, 8, 4).tile_pairs;
  EXPECT_DOUBLE_EQ(summary.tile_density, total / 144.0);
  s.recall.max_verticals = 1;
  s.recall.recall = 1.0;
  EXPECT_EQ(summarize_trace(t, s).heads_at_vertical_cap, 3);
  s.block_tokens = 0;
  EXPECT_THROW(summarize_trace(t, s), InputError);
  s.block_tokens = 4;
  s.recall.recall = 0;
  EXPECT_THROW(summarize_trace(t, s), InputError);
}

TEST(SummaryReport, JsonAndTable) {
  Trace t = small_trace();
  t.metadata.model = "m";
  t.metadata.provenance["seed"] = "3";
  const TraceSummary summary = summarize_trace(t, SummarySettings{});
  const auto doc = nlohmann::json::parse(trace_summary_json(summary, true));
  EXPECT_EQ(doc["trace"]["model"], "m");
  EXPECT_EQ(doc["trace"]["provenance"]["seed"], "3");
  EXPECT_EQ(doc["trace"]["seq_len_tokens"], nlohmann::json({8, 8}));
  EXPECT_EQ(doc["settings"]["recall"], 0.95);
  EXPECT_EQ(doc["layers"].size(), 2u);
  EXPECT_EQ(doc["heads"].size(), 2u);
  EXPECT_DOUBLE_EQ(doc["overall"]["tile_density"].get<double>(), summary.tile_density);
  EXPECT_DOUBLE_EQ(doc["overall"]["tile_sparsity"].get<double>(), 1.0 - summary.tile_density);
  EXPECT_FALSE(nlohmann::json::parse(trace_summary_json(summary, false)).contains("heads"));
  std::ostringstream text;
  print_trace_summary(text, summary, true);
  EXPECT_NE(text.str().find("tile sparsity"), std::string::npos);
  EXPECT_NE(text.str().find("element sparsity %"), std::string::npos);
}

}  // namespace
}  // namespace sparsering
