// Ring-order families (tuner/search/ring_order.hpp): every family is a permutation for any
// degrees and node shape, and each has its defining property.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "common/error.hpp"
#include "tests/tuner_search/tuner_test_inputs.hpp"
#include "tuner/search/ring_order.hpp"

namespace sparsering {
namespace {

const RankPlacement kPlacements[] = {RankPlacement::cp_inner, RankPlacement::hp_inner};
const RingOrderFamily kFamilies[] = {RingOrderFamily::node_major, RingOrderFamily::interleaved, RingOrderFamily::snake};

std::vector<ParallelDegrees> all_degrees(int64_t world) {
  std::vector<ParallelDegrees> out;
  for (int64_t w = 1; w <= world; ++w) {
    for (int64_t h = 1; w * h <= world; ++h) {
      if (world % (w * h) == 0) out.push_back(ParallelDegrees{w, h, world / (w * h)});
    }
  }
  return out;
}

TEST(RingOrder, EveryFamilyIsAPermutationForAnyDegreesAndNodeShape) {
  for (const auto& [nodes, gpus] : std::vector<std::pair<int64_t, int64_t>>{{1, 4}, {2, 2}, {2, 4}, {3, 4}, {3, 2}, {5, 3}}) {
    const ClusterConfig cluster = testing::test_cluster(nodes, gpus, 80);
    for (const ParallelDegrees& g : all_degrees(cluster.world_size())) {
      for (const RankPlacement placement : kPlacements) {
        for (const RingOrderFamily family : kFamilies) {
          std::vector<int64_t> order = make_ring_order(cluster, g, placement, family);
          ASSERT_EQ(static_cast<int64_t>(order.size()), cluster.world_size());
          std::sort(order.begin(), order.end());
          for (size_t i = 0; i < order.size(); ++i) ASSERT_EQ(order[i], static_cast<int64_t>(i));
        }
      }
    }
  }
}

TEST(RingOrder, NodeMajorCpInnerIsTheIdentityAndKeepsNodeSizedInnerRingsInsideNodes) {
  const ClusterConfig cluster = testing::test_cluster(4, 8, 80);
  const std::vector<int64_t> order =
      make_ring_order(cluster, ParallelDegrees{16, 2, 1}, RankPlacement::cp_inner, RingOrderFamily::node_major);
  std::vector<int64_t> identity(order.size());
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(order, identity);
  for (size_t ring = 0; ring < 2; ++ring) {
    for (size_t p = 0; p < 16; ++p) {
      // An inner ring of 8 positions = one node.
      EXPECT_EQ(cluster.node_of(order[ring * 16 + p]), cluster.node_of(order[ring * 16 + (p / 8) * 8]));
    }
  }
}

TEST(RingOrder, HeadParallelInnerPutsUlyssesGroupsOnConsecutiveRanks) {
  const ClusterConfig cluster = testing::test_cluster(2, 4, 80);
  const ParallelDegrees g{2, 2, 2};
  const std::vector<int64_t> order = make_ring_order(cluster, g, RankPlacement::hp_inner, RingOrderFamily::node_major);
  for (int64_t d = 0; d < 2; ++d) {
    for (int64_t p = 0; p < 2; ++p) {
      const int64_t h0 = order[static_cast<size_t>((d * 2 + 0) * 2 + p)];
      const int64_t h1 = order[static_cast<size_t>((d * 2 + 1) * 2 + p)];
      EXPECT_EQ(h1, h0 + 1) << "replica " << d << " position " << p;
      EXPECT_EQ(h0 % 2, 0);
    }
  }
  // Ring (0, 0) strides over the head-parallel ranks: 0, 2.
  EXPECT_EQ(order[0], 0);
  EXPECT_EQ(order[1], 2);
}

TEST(RingOrder, InterleavedDealsConsecutivePositionsToDifferentNodes) {
  const ClusterConfig cluster = testing::test_cluster(4, 4, 80);
  const std::vector<int64_t> order =
      make_ring_order(cluster, ParallelDegrees{16, 1, 1}, RankPlacement::cp_inner, RingOrderFamily::interleaved);
  EXPECT_EQ(order, (std::vector<int64_t>{0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}));
  for (size_t p = 0; p < order.size(); ++p) {
    EXPECT_NE(cluster.node_of(order[p]), cluster.node_of(order[(p + 1) % order.size()]));
  }
}

TEST(RingOrder, InterleavedHandlesUnevenNodeShares) {
  // hp-inner with H = 3 on nodes of 4: a ring's 4 ranks fall 2, 1, 1 on three nodes.
  const ClusterConfig cluster = testing::test_cluster(3, 4, 80);
  const std::vector<int64_t> order =
      make_ring_order(cluster, ParallelDegrees{4, 3, 1}, RankPlacement::hp_inner, RingOrderFamily::interleaved);
  // Ring h = 0 owns ranks 0, 3, 6, 9 on nodes 0, 0, 1, 2: round robin gives 0, 6, 9, 3.
  EXPECT_EQ(std::vector<int64_t>(order.begin(), order.begin() + 4), (std::vector<int64_t>{0, 6, 9, 3}));
}

TEST(RingOrder, SnakeReversesEveryOtherNode) {
  const ClusterConfig cluster = testing::test_cluster(3, 4, 80);
  const std::vector<int64_t> order =
      make_ring_order(cluster, ParallelDegrees{12, 1, 1}, RankPlacement::cp_inner, RingOrderFamily::snake);
  EXPECT_EQ(order, (std::vector<int64_t>{0, 1, 2, 3, 7, 6, 5, 4, 8, 9, 10, 11}));
  // Within a node, consecutive positions are neighbouring GPUs; the ring leaves each node once.
  int64_t crossings = 0;
  for (size_t p = 0; p < order.size(); ++p) {
    crossings += cluster.node_of(order[p]) != cluster.node_of(order[(p + 1) % order.size()]) ? 1 : 0;
  }
  EXPECT_EQ(crossings, 3);
}

TEST(RingOrder, SingleNodeRingsAreTheSameInEveryFamily) {
  const ClusterConfig cluster = testing::test_cluster(2, 8, 80);
  const ParallelDegrees g{8, 1, 2};
  const std::vector<int64_t> base = make_ring_order(cluster, g, RankPlacement::cp_inner, RingOrderFamily::node_major);
  for (const RingOrderFamily family : kFamilies) {
    EXPECT_EQ(make_ring_order(cluster, g, RankPlacement::cp_inner, family), base) << to_string(family);
  }
}

TEST(RingOrder, RejectsDegreesThatDoNotCoverTheCluster) {
  const ClusterConfig cluster = testing::test_cluster(2, 4, 80);
  EXPECT_THROW(make_ring_order(cluster, ParallelDegrees{4, 1, 1}, RankPlacement::cp_inner, RingOrderFamily::node_major),
               InputError);
  EXPECT_THROW(make_ring_order(cluster, ParallelDegrees{0, 8, 1}, RankPlacement::cp_inner, RingOrderFamily::node_major),
               InputError);
}

TEST(RingOrder, Names) {
  EXPECT_EQ(to_string(RankPlacement::cp_inner), "cp-inner");
  EXPECT_EQ(to_string(RankPlacement::hp_inner), "hp-inner");
  EXPECT_EQ(to_string(RingOrderFamily::node_major), "node-major");
  EXPECT_EQ(to_string(RingOrderFamily::interleaved), "interleaved");
  EXPECT_EQ(to_string(RingOrderFamily::snake), "snake");
}

}  // namespace
}  // namespace sparsering
