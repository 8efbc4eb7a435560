// NIC sharing among concurrent ring hops: every hop that crosses a fabric level above the node
// (level > 0) leaves its source node and enters its destination node through that level's NICs,
// and the hops in flight at once share them. A hop a->b over level f gets
//   min(nic_share(hops leaving node(a) over f), nic_share(hops entering node(b) over f))
// of its link's bandwidth (nic_share: sim/network/link_model.hpp); intra-node hops get all of it.
// The one place this count is made, so that the collectives (sim/network/cluster_network.cpp), the
// ring passes of the simulator (sim/step/simulation.cpp) and the tuner's lower bound
// (tuner/search/step_lower_bound.cpp) share NICs alike. Model: docs/simulator.md.
// Tested in tests/sim/nic_contention_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/network/cluster_network.hpp"

namespace sparsering {

class NicContention {
 public:
  /// No hops yet. `network` must outlive this object.
  explicit NicContention(const ClusterNetwork& network);

  /// Counts the hop from global rank `rank_a` to global rank `rank_b` as in flight with every
  /// other hop added. Hops within a node (fabric level 0) use no NIC and are not counted.
  /// Throws InputError for ranks outside the cluster.
  void add_hop(int64_t rank_a, int64_t rank_b);

  /// Bandwidth share in (0, 1] of the hop `rank_a` -> `rank_b` over its fabric level
  /// (ClusterNetwork::link_level): 1 within a node, else the smaller of its NIC shares leaving
  /// node_of(rank_a) and entering node_of(rank_b) among the hops added so far. The hop itself
  /// need not have been added (a hop not counted shares with the others only).
  double share(int64_t rank_a, int64_t rank_b) const;

  /// Hops added that leave (`leaving` true) or enter node `node` over fabric level `level` (>= 1).
  int64_t hops(int64_t node, int32_t level, bool leaving) const;

 private:
  size_t slot(int64_t node, int32_t level) const;

  const ClusterNetwork* network_;
  std::vector<int64_t> leaving_;   // [node x levels + level]: hops leaving the node over the level
  std::vector<int64_t> entering_;  // [node x levels + level]: hops entering the node over the level
};

}  // namespace sparsering
