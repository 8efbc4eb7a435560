// Collective times over a cluster: ring all-reduce / all-gather, broadcast, all-to-all, with NIC
// sharing; exact values against hand-computed formulas (sim/network/cluster_network.hpp).
#include "sim/network/cluster_network.hpp"

#include <gtest/gtest.h>

#include "tests/sim/sim_test_inputs.hpp"

namespace sparsering {
namespace {

// small_cluster: NVLink 100 GB/s + 2 us; InfiniBand 10 GB/s per NIC + 5 us, one NIC per node.

TEST(ClusterNetworkTest, OneNodeCollectives) {
  const ClusterConfig cluster = testing::small_cluster(1, 4);
  const ClusterNetwork net(cluster);
  const std::vector<int64_t> all = {0, 1, 2, 3};
  // Rounds move 1e6 bytes: 2 us + 1e6 B / 100 B/ns = 12 us.
  EXPECT_EQ(net.all_reduce_ns(all, 4000000), 6 * 12000);
  EXPECT_EQ(net.all_gather_ns(all, 4000000), 3 * 12000);
  EXPECT_EQ(net.broadcast_ns(all, 1000000), 3 * 2000 + 10000);
  EXPECT_EQ(net.all_to_all_ns(all, 4000000), 2000 + 3 * 10000);
  EXPECT_EQ(net.all_reduce_ns(std::vector<int64_t>{2}, 4000000), 0);
}

TEST(ClusterNetworkTest, TwoNodesShareTheirNic) {
  const ClusterConfig cluster = testing::small_cluster(2, 2);
  const ClusterNetwork net(cluster);
  // Node-major ring 0 1 | 2 3: one edge leaves each node: 5 us + 1e6 / 10 = 105 us per round.
  EXPECT_EQ(net.all_reduce_ns(std::vector<int64_t>{0, 1, 2, 3}, 4000000), 6 * 105000);
  // Interleaved ring 0 2 1 3: two edges leave each node through one NIC: half the bandwidth.
  EXPECT_EQ(net.all_reduce_ns(std::vector<int64_t>{0, 2, 1, 3}, 4000000), 6 * 205000);
  // All-to-all: each node sends 2 members x 2 remote members x 1e6 bytes through 10 GB/s.
  EXPECT_EQ(net.all_to_all_ns(std::vector<int64_t>{0, 1, 2, 3}, 4000000), 5000 + 400000);
  EXPECT_EQ(net.link_level(0, 1), 0);
  EXPECT_EQ(net.link_level(1, 2), 1);
}

}  // namespace
}  // namespace sparsering
