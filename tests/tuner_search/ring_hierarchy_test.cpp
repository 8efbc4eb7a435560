// Ring hierarchies (tuner/search/ring_hierarchy.hpp): hand-derived lists for small clusters, tiers
// against brute force, and every hierarchy accepted by the plan checker.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "sim/config/plan_config.hpp"
#include "tests/tuner_search/tuner_test_inputs.hpp"
#include "tuner/search/ring_hierarchy.hpp"
#include "tuner/search/ring_order.hpp"

namespace sparsering {
namespace {

std::vector<std::vector<int64_t>> sizes_of(const std::vector<RingHierarchy>& hierarchies) {
  std::vector<std::vector<int64_t>> out;
  for (const RingHierarchy& h : hierarchies) {
    std::vector<int64_t> sizes;
    for (const RingLevel& l : h.levels) sizes.push_back(l.size);
    out.push_back(sizes);
  }
  return out;
}

/// A plan with these degrees, order and levels passes check_plan_against (declared links right).
void expect_accepted(const ClusterConfig& cluster, const ParallelDegrees& g, const std::vector<int64_t>& order,
                     const RingHierarchy& h) {
  const ModelConfig model = testing::tiny_model(2, 8, 8);
  PlanConfig plan;
  plan.model = model.name;
  plan.cluster = cluster.name;
  plan.seq_len_tokens = 4096;
  plan.context_parallel = g.context_parallel;
  plan.head_parallel = g.head_parallel;
  plan.data_parallel = g.data_parallel;
  plan.ring_levels = h.levels;
  plan.ring_order = order;
  plan.layout = make_token_layout(LayoutKind::contiguous, 4096, static_cast<int32_t>(g.context_parallel));
  EXPECT_NO_THROW(check_plan_against(plan, model, cluster));
}

TEST(RingHierarchy, NodeMajorOnFourNodesOfEight) {
  const ClusterConfig cluster = testing::test_cluster(4, 8, 80);
  const ParallelDegrees g{32, 1, 1};
  const std::vector<int64_t> order = make_ring_order(cluster, g, RankPlacement::cp_inner, RingOrderFamily::node_major);
  const std::vector<RingHierarchy> h = ring_hierarchies(cluster, order, 32);
  // Flat; then an inner ring inside a node (2, 4 or 8 GPUs) with an outer ring over InfiniBand.
  // 16 x 2 is left out: its inner ring already crosses nodes, as does the outer one.
  EXPECT_EQ(sizes_of(h), (std::vector<std::vector<int64_t>>{{32}, {2, 16}, {4, 8}, {8, 4}}));
  EXPECT_EQ(h[0].levels[0].link, LinkKind::infiniband);
  for (size_t k = 1; k < h.size(); ++k) {
    EXPECT_EQ(h[k].levels[0].link, LinkKind::nvlink);
    EXPECT_EQ(h[k].levels[1].link, LinkKind::infiniband);
    EXPECT_EQ(h[k].tiers, (std::vector<int32_t>{0, 1}));
  }
  for (const RingHierarchy& x : h) expect_accepted(cluster, g, order, x);
}

TEST(RingHierarchy, HandDerivedCountsPerFamilyOnTwoNodesOfTwo) {
  const ClusterConfig cluster = testing::test_cluster(2, 2, 80);
  const ParallelDegrees g{4, 1, 1};
  // node-major 0 1 2 3 and snake 0 1 3 2: inner pairs stay on a node -> flat and 2 x 2.
  // interleaved 0 2 1 3: the inner pairs cross nodes and the outer hops do not -> flat only.
  const std::pair<RingOrderFamily, size_t> expected[] = {
      {RingOrderFamily::node_major, 2}, {RingOrderFamily::interleaved, 1}, {RingOrderFamily::snake, 2}};
  for (const auto& [family, count] : expected) {
    const std::vector<int64_t> order = make_ring_order(cluster, g, RankPlacement::cp_inner, family);
    const std::vector<RingHierarchy> h = ring_hierarchies(cluster, order, 4);
    EXPECT_EQ(h.size(), count) << to_string(family);
    for (const RingHierarchy& x : h) expect_accepted(cluster, g, order, x);
  }
}

TEST(RingHierarchy, ThreeTiersWithRacks) {
  // 4 nodes of 2 GPUs in racks of 2 nodes: intra-node, inter-node (same rack), rack level.
  const ClusterConfig cluster = testing::test_cluster(4, 2, 80, 2);
  const ParallelDegrees g{8, 1, 1};
  const std::vector<int64_t> order = make_ring_order(cluster, g, RankPlacement::cp_inner, RingOrderFamily::node_major);
  const std::vector<RingHierarchy> h = ring_hierarchies(cluster, order, 8);
  EXPECT_EQ(sizes_of(h), (std::vector<std::vector<int64_t>>{{8}, {2, 2, 2}, {2, 4}, {4, 2}}));
  EXPECT_EQ(h[1].tiers, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(h[1].levels[2].link, LinkKind::ethernet);
  for (const RingHierarchy& x : h) expect_accepted(cluster, g, order, x);
}

TEST(RingHierarchy, LevelTierIsTheSlowestHopOfAnyRing) {
  const ClusterConfig cluster = testing::test_cluster(4, 2, 80, 2);
  for (const RingOrderFamily family : {RingOrderFamily::node_major, RingOrderFamily::interleaved, RingOrderFamily::snake}) {
    const std::vector<int64_t> order = make_ring_order(cluster, ParallelDegrees{4, 1, 2}, RankPlacement::cp_inner, family);
    for (const auto& [stride, size] : std::vector<std::pair<int64_t, int64_t>>{{1, 4}, {1, 2}, {2, 2}}) {
      int32_t slowest = 0;
      for (int64_t r = 0; r < 2; ++r) {
        for (int64_t p = 0; p < 4; ++p) {
          const int64_t digit = (p / stride) % size;
          const int64_t next = digit + 1 < size ? p + stride : p - digit * stride;
          slowest = std::max(slowest, cluster.link_level(order[static_cast<size_t>(r * 4 + p)],
                                                         order[static_cast<size_t>(r * 4 + next)]));
        }
      }
      EXPECT_EQ(level_tier(cluster, order, 4, stride, size), slowest);
    }
  }
}

TEST(RingHierarchy, RingsOfOneAndRingsInsideOneNode) {
  const ClusterConfig cluster = testing::test_cluster(1, 8, 80);
  std::vector<int64_t> identity(8);
  for (size_t i = 0; i < 8; ++i) identity[i] = static_cast<int64_t>(i);
  const std::vector<RingHierarchy> one = ring_hierarchies(cluster, identity, 1);
  ASSERT_EQ(one.size(), 1U);
  EXPECT_EQ(one[0].levels[0].size, 1);
  // Inside one node every level has tier 0: no nesting is strictly slower outwards.
  EXPECT_EQ(ring_hierarchies(cluster, identity, 8).size(), 1U);
  EXPECT_THROW(ring_hierarchies(cluster, identity, 3), InputError);
}

}  // namespace
}  // namespace sparsering
