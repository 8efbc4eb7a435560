// The plan space (tuner/search/search_space.hpp): hand-counted enumerations, and every candidate
// is a distinct, valid plan that the plan checker and the YAML round trip accept.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>

#include "common/error.hpp"
#include "sim/config/plan_config.hpp"
#include "tests/tuner_search/tuner_test_inputs.hpp"
#include "tuner/search/search_space.hpp"

namespace sparsering {
namespace {

SearchSpaceOptions narrow_options() {
  SearchSpaceOptions o;
  o.block_sizes = {64};
  o.stripe_shifts = {0};
  o.recomputes = {RecomputeMode::none};
  o.zero_stages = {0};
  o.layout_shuffles = {LayoutShuffleMode::per_layer};
  return o;
}

TEST(SearchSpace, HandCountedOnOneNodeOfFour) {
  // Degrees (W, H): (1,1) (2,1) (4,1) (1,2) (2,2) (1,4). One node: every family gives the same
  // order; H = 2, W = 2 has two placements (rings {0,1},{2,3} or {0,2},{1,3}); W = 1 has one
  // placement. Rings inside one node have only the flat hierarchy. W = 1: contiguous, p2p only;
  // W > 1: contiguous, zigzag, striped G=64, each with p2p and all-gather.
  // Candidates: 1 + 6 + 6 + 1 + 2 x 6 + 1 = 27.
  const SearchSpace space =
      enumerate_search_space(testing::tiny_model(), testing::test_cluster(1, 4, 80), 4096, narrow_options());
  EXPECT_EQ(space.degrees.size(), 6U);
  EXPECT_EQ(space.orders.size(), 7U);
  EXPECT_EQ(space.geometries.size(), 1U + 3U + 3U + 1U + 3U + 1U);
  EXPECT_EQ(space.candidates.size(), 27U);
  // With the loader layout too: each striped geometry of W > 1 (W = 2 and 4 with H = 1, W = 2
  // with H = 2 in two placements) gets it with both comms: 27 + 4 x 2 = 35.
  SearchSpaceOptions both = narrow_options();
  both.layout_shuffles = {LayoutShuffleMode::per_layer, LayoutShuffleMode::loader};
  const SearchSpace with_loader =
      enumerate_search_space(testing::tiny_model(), testing::test_cluster(1, 4, 80), 4096, both);
  EXPECT_EQ(with_loader.candidates.size(), 35U);
  int64_t loader = 0;
  for (const Candidate& c : with_loader.candidates) {
    if (c.shuffle == LayoutShuffleMode::loader && with_loader.geometry_of(c).layout.kind() == LayoutKind::striped) ++loader;
    const PlanConfig plan = make_candidate_plan(with_loader, c, PlanTemplate{});
    ASSERT_TRUE(plan.layout_shuffle.has_value());
    EXPECT_EQ(*plan.layout_shuffle, c.shuffle);
  }
  EXPECT_EQ(loader, 8);
}

TEST(SearchSpace, HandCountedOnTwoNodesOfTwo) {
  // W = 4: node-major (flat, 2 x 2), interleaved (flat), snake (flat, 2 x 2) = 5 p2p rings, and
  // all-gather on the flat ring of each order = 3; 3 layouts each: 24.
  SearchSpaceOptions o = narrow_options();
  o.placements = {RankPlacement::cp_inner};
  const SearchSpace space = enumerate_search_space(testing::tiny_model(2, 1, 1), testing::test_cluster(2, 2, 80), 4096, o);
  // H = 1 only (one query head). W = 1: 1 order; W = 2: rings {0,1}, {2,3} in every family: 1
  // order; W = 4: 3 orders. Candidates: W = 1: 1; W = 2: 3 layouts x 2 comms = 6; W = 4: 24.
  EXPECT_EQ(space.degrees.size(), 3U);
  EXPECT_EQ(space.orders.size(), 5U);
  int64_t w4 = 0;
  for (const Candidate& c : space.candidates) w4 += space.degrees_of(c).context_parallel == 4 ? 1 : 0;
  EXPECT_EQ(w4, 24);
  EXPECT_EQ(space.candidates.size(), 1U + 6U + 24U);
}

TEST(SearchSpace, GranularitiesAreDivisorsAndMultiplesOfTheBlockThatDivideTheSequence) {
  SearchSpaceOptions o = narrow_options();
  o.block_sizes = {64, 128};
  o.stripe_shifts = {-1, 0, 1, 2};
  o.layouts = {LayoutKind::striped};
  const SearchSpace space = enumerate_search_space(testing::tiny_model(2, 1, 1), testing::test_cluster(1, 4, 80), 2048, o);
  std::set<std::tuple<int64_t, int64_t, int64_t>> seen;  // (W, block, G)
  for (const Geometry& g : space.geometries) {
    if (g.layout.ranks() == 1) continue;
    seen.insert({g.layout.ranks(), g.block, g.layout.granularity_tokens()});
    EXPECT_EQ(2048 % (g.layout.granularity_tokens() * g.layout.ranks()), 0);
    EXPECT_NE(g.layout.granularity_tokens() * g.layout.ranks(), 2048) << "one stripe per rank is contiguous";
  }
  // W = 4: G in {32, 64, 128, 256} for b = 64 and {64, 128, 256} for b = 128 (512 x 4 = 2048 is
  // contiguous). W = 2: the same, with 512 allowed for b = 128.
  EXPECT_TRUE(seen.count({4, 64, 32}) && seen.count({4, 64, 256}) && seen.count({4, 128, 256}));
  EXPECT_FALSE(seen.count({4, 128, 512}));
  EXPECT_TRUE(seen.count({2, 128, 512}));
  EXPECT_EQ(seen.size(), 4U + 3U + 4U + 4U);
}

TEST(SearchSpace, EveryCandidateIsADistinctValidPlan) {
  const ModelConfig model = testing::tiny_model();
  for (const auto& [nodes, gpus] : std::vector<std::pair<int64_t, int64_t>>{{2, 2}, {2, 4}, {4, 2}}) {
    const ClusterConfig cluster = testing::test_cluster(nodes, gpus, 80, nodes == 4 ? 2 : 0);
    SearchSpaceOptions o;
    o.zero_stages = {1};
    const SearchSpace space = enumerate_search_space(model, cluster, 8192, o);
    PlanTemplate tmpl;
    tmpl.model = model.name;
    tmpl.cluster = cluster.name;
    std::set<std::string> keys;
    for (const Candidate& c : space.candidates) {
      const PlanConfig plan = make_candidate_plan(space, c, tmpl);
      ASSERT_NO_THROW(check_plan_against(plan, model, cluster)) << describe_candidate(space, c);
      const PlanConfig back = parse_plan(write_plan_yaml(plan), "<round trip>");
      EXPECT_EQ(back.ring_order, plan.ring_order);
      EXPECT_EQ(back.ring_levels.size(), plan.ring_levels.size());
      EXPECT_EQ(back.layout.granularity_tokens(), plan.layout.granularity_tokens());
      std::string levels;
      for (const RingLevel& l : plan.ring_levels) levels += str(l.size, ",");
      std::string order;
      for (const int64_t r : plan.ring_order) order += str(r, ",");
      EXPECT_TRUE(keys.insert(str(plan.context_parallel, "|", plan.head_parallel, "|", order, "|", levels, "|",
                                  to_string(plan.layout.kind()), plan.layout.granularity_tokens(), "|",
                                  plan.sparse.block_q, "|", to_string(plan.comm), "|", to_string(plan.recompute), "|",
                                  plan.layout_shuffle ? to_string(*plan.layout_shuffle) : ""))
                      .second)
          << "duplicate " << describe_candidate(space, c);
      if (c.comm == CommPrimitive::all_gather) {
        EXPECT_EQ(c.hierarchy, 0);
      }
      if (plan.context_parallel == 1) {
        EXPECT_EQ(plan.layout.kind(), LayoutKind::contiguous);
        EXPECT_EQ(plan.comm, CommPrimitive::p2p);
      }
    }
  }
}

TEST(SearchSpace, HeadParallelRespectsQueryAndKvHeads) {
  // 12 query heads, 3 KV heads: H must divide 12 and divide 3 or be a multiple of it, so 2 and 4
  // are out.
  SearchSpaceOptions o = narrow_options();
  const SearchSpace space =
      enumerate_search_space(testing::tiny_model(2, 12, 3), testing::test_cluster(1, 12, 80), 4096 * 3, o);
  std::set<int64_t> h;
  for (const ParallelDegrees& g : space.degrees) h.insert(g.head_parallel);
  EXPECT_EQ(h, (std::set<int64_t>{1, 3, 6, 12}));
}

TEST(SearchSpace, RejectsBadOptionsAndImpossibleLengths) {
  const ModelConfig model = testing::tiny_model();
  const ClusterConfig cluster = testing::test_cluster(1, 4, 80);
  SearchSpaceOptions o;
  o.block_sizes = {48};
  EXPECT_THROW(enumerate_search_space(model, cluster, 4096, o), InputError);
  o = SearchSpaceOptions{};
  o.zero_stages = {4};
  EXPECT_THROW(enumerate_search_space(model, cluster, 4096, o), InputError);
  o = SearchSpaceOptions{};
  o.comms.clear();
  EXPECT_THROW(enumerate_search_space(model, cluster, 4096, o), InputError);
  EXPECT_THROW(enumerate_search_space(model, cluster, 0, SearchSpaceOptions{}), InputError);
}

TEST(SearchSpace, Descriptions) {
  const SearchSpace space =
      enumerate_search_space(testing::tiny_model(), testing::test_cluster(2, 2, 80), 4096, SearchSpaceOptions{});
  for (const Candidate& c : space.candidates) {
    const std::string d = describe_candidate(space, c);
    EXPECT_NE(d.find(" | "), std::string::npos);
    EXPECT_NE(d.find("zero"), std::string::npos);
  }
  EXPECT_EQ(describe_degrees(ParallelDegrees{16, 2, 1}), "H2 W16 D1");
  EXPECT_EQ(describe_layout(make_token_layout(LayoutKind::striped, 4096, 4, 64)), "striped G=64");
}

}  // namespace
}  // namespace sparsering
