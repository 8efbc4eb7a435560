// NIC sharing among concurrent ring hops (sim/network/nic_contention.hpp): hop counts per node and
// fabric level, and the share of each hop, against values derived by hand in the comments.
#include "sim/network/nic_contention.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "sim/network/cluster_network.hpp"
#include "tests/sim/sim_test_inputs.hpp"

namespace sparsering {
namespace {

/// small_cluster (NVLink 100 GB/s + 2 us; InfiniBand 10 GB/s per NIC + 5 us) with `nics` NICs per node.
ClusterConfig cluster_with_nics(int64_t nodes, int64_t gpus_per_node, int64_t nics) {
  ClusterConfig cluster = testing::small_cluster(nodes, gpus_per_node);
  cluster.inter_node->nics_per_node = nics;
  return cluster;
}

/// Adds every hop of the ring `ranks` (in order, the last back to the first).
void add_ring(NicContention& nics, const std::vector<int64_t>& ranks) {
  for (size_t k = 0; k < ranks.size(); ++k) nics.add_hop(ranks[k], ranks[(k + 1) % ranks.size()]);
}

// 2 nodes x 4 GPUs (node 0: ranks 0-3, node 1: ranks 4-7), 2 NICs per node.
TEST(NicContentionTest, RingsCrossingTwoNodesShareTheirNics) {
  const ClusterConfig cluster = cluster_with_nics(2, 4, 2);
  const ClusterNetwork network(cluster);
  NicContention nics(network);
  // Nothing in flight: any hop has its NIC to itself; a hop within a node never shares.
  EXPECT_DOUBLE_EQ(nics.share(0, 4), 1.0);
  EXPECT_DOUBLE_EQ(nics.share(0, 1), 1.0);

  // Ring A, node-major 0 1 2 3 4 5 6 7: hops 3->4 and 7->0 cross; each node has one hop leaving
  // and one entering: 1 flow on 2 NICs -> share 1.
  add_ring(nics, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(nics.hops(0, 1, true), 1);
  EXPECT_EQ(nics.hops(0, 1, false), 1);
  EXPECT_EQ(nics.hops(1, 1, true), 1);
  EXPECT_EQ(nics.hops(1, 1, false), 1);
  EXPECT_EQ(nics.hops(0, 0, true), 0);  // NVLink hops are not counted
  EXPECT_DOUBLE_EQ(nics.share(3, 4), 1.0);
  EXPECT_DOUBLE_EQ(nics.share(7, 0), 1.0);

  // Ring B, interleaved 0 4 1 5 2 6 3 7: all 8 hops cross, 4 in each direction. Each node now has
  // 1 + 4 = 5 hops leaving and 5 entering: 2 NICs / 5 flows = 0.4 for every crossing hop.
  add_ring(nics, {0, 4, 1, 5, 2, 6, 3, 7});
  EXPECT_EQ(nics.hops(0, 1, true), 5);
  EXPECT_EQ(nics.hops(1, 1, false), 5);
  EXPECT_DOUBLE_EQ(nics.share(3, 4), 0.4);
  EXPECT_DOUBLE_EQ(nics.share(4, 1), 0.4);
  EXPECT_DOUBLE_EQ(nics.share(1, 2), 1.0);

  // Ring C, 0 1 4 5: hops 1->4 and 5->0 cross: 6 leaving and 6 entering each node -> 2 / 6.
  add_ring(nics, {0, 1, 4, 5});
  EXPECT_EQ(nics.hops(0, 1, true), 6);
  EXPECT_EQ(nics.hops(0, 1, false), 6);
  EXPECT_DOUBLE_EQ(nics.share(1, 4), 2.0 / 6.0);
  EXPECT_DOUBLE_EQ(nics.share(7, 0), 2.0 / 6.0);
  EXPECT_DOUBLE_EQ(nics.share(4, 5), 1.0);
}

// 3 nodes x 2 GPUs (node 0: ranks 0-1, node 1: 2-3, node 2: 4-5), 2 NICs per node: the share is
// set by the busier end of the hop.
TEST(NicContentionTest, TheBusierEndSetsTheShare) {
  const ClusterConfig cluster = cluster_with_nics(3, 2, 2);
  const ClusterNetwork network(cluster);
  NicContention nics(network);
  // Hops 0->2, 1->3 (node 0 -> node 1), 4->2, 5->3 (node 2 -> node 1) and 4->0 (node 2 -> node 0).
  // Leaving: node 0: 2, node 2: 3. Entering: node 1: 4, node 0: 1.
  for (const auto& [a, b] : std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {1, 3}, {4, 2}, {5, 3}, {4, 0}}) {
    nics.add_hop(a, b);
  }
  // 0->2: leaving node 0 2/2 = 1, entering node 1 2/4 = 0.5 -> 0.5.
  EXPECT_DOUBLE_EQ(nics.share(0, 2), 0.5);
  // 4->0: leaving node 2 2/3, entering node 0 min(1, 2/1) = 1 -> 2/3.
  EXPECT_DOUBLE_EQ(nics.share(4, 0), 2.0 / 3.0);
  // 4->2: leaving node 2 2/3, entering node 1 0.5 -> 0.5.
  EXPECT_DOUBLE_EQ(nics.share(4, 2), 0.5);
  // 0->4 (not added): leaving node 0 2 flows -> 1, entering node 2 none -> 1.
  EXPECT_DOUBLE_EQ(nics.share(0, 4), 1.0);
  // 2->0 (not added): nothing leaves node 1; node 0 has 1 hop entering -> 1.
  EXPECT_DOUBLE_EQ(nics.share(2, 0), 1.0);
}

// Hops over different fabric levels use different NICs and never share.
TEST(NicContentionTest, FabricLevelsAreCountedApart) {
  // 4 nodes x 1 GPU, groups of 2 nodes: 0-1 over InfiniBand (level 1), 0-2 over the spine (level 2).
  ClusterConfig cluster = parse_cluster(R"(name: tiers
nodes: 4
gpus_per_node: 1
gpu: test-gpu
intra_node: {kind: nvlink, bandwidth_gbytes_per_s: 100, latency_us: 2}
inter_node: {kind: infiniband, nics_per_node: 1, bandwidth_gbytes_per_s: 10, latency_us: 5}
outer_levels:
  - {name: spine, nodes_per_group: 2, kind: ethernet, nics_per_node: 1, bandwidth_gbytes_per_s: 5, latency_us: 20}
)",
                                        "<tiers>");
  const ClusterNetwork network(cluster);
  NicContention nics(network);
  // Ring 0 1 3 2: 0->1 and 3->2 within a group (level 1), 1->3 and 2->0 across groups (level 2);
  // then 0->2 across groups. Node 0: 1 leaving at level 1 (0->1), 1 leaving at level 2 (0->2),
  // 1 entering at level 2 (2->0). Node 2: 1 leaving (2->0) and 1 entering (0->2) at level 2.
  add_ring(nics, {0, 1, 3, 2});
  nics.add_hop(0, 2);
  EXPECT_EQ(nics.hops(0, 1, true), 1);
  EXPECT_EQ(nics.hops(0, 2, true), 1);
  EXPECT_EQ(nics.hops(0, 2, false), 1);
  EXPECT_EQ(nics.hops(2, 2, true), 1);
  EXPECT_EQ(nics.hops(2, 2, false), 1);
  EXPECT_DOUBLE_EQ(nics.share(0, 2), 1.0);
  // 0->3 across groups: node 0 now has 2 hops leaving at level 2 (one spine NIC), node 3 has 2
  // entering at level 2 (1->3, 0->3).
  nics.add_hop(0, 3);
  // 0->2: leaving node 0 at level 2: 1 / 2 = 0.5; entering node 2: 1 flow -> 1. Share 0.5.
  EXPECT_DOUBLE_EQ(nics.share(0, 2), 0.5);
  // 1->3: leaving node 1 at level 2: 1 flow -> 1; entering node 3: 1 / 2. Share 0.5.
  EXPECT_DOUBLE_EQ(nics.share(1, 3), 0.5);
  // 0->1 at level 1: one flow at each end, whatever node 0 sends over the spine -> 1.
  EXPECT_DOUBLE_EQ(nics.share(0, 1), 1.0);
}

// The ring collectives take their NIC shares from the same count.
TEST(NicContentionTest, RingRoundsUseTheShares) {
  const ClusterConfig cluster = cluster_with_nics(2, 4, 2);
  const ClusterNetwork network(cluster);
  // Ring B alone: 4 hops leave each node through 2 NICs -> share 0.5. A round of the all-gather
  // moves 8e6 / 8 = 1e6 bytes per hop: 5 us + 1e6 B / (10 B/ns x 0.5) = 205 us; 7 rounds.
  EXPECT_EQ(network.all_gather_ns(std::vector<int64_t>{0, 4, 1, 5, 2, 6, 3, 7}, 8000000), 7 * 205000);
  // Node-major ring: one hop leaves each node -> share 1: 5 us + 100 us per round.
  EXPECT_EQ(network.all_gather_ns(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}, 8000000), 7 * 105000);
}

}  // namespace
}  // namespace sparsering
