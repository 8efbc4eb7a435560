// The cluster's fabric as the simulator uses it: a link model per level, the level between two
// global ranks, and collective times (ring all-reduce / all-gather, all-to-all, broadcast) over a
// group of global ranks, with NIC sharing between the flows that leave one node at once.
// Collective formulas (documented in docs/simulator.md):
//   all-reduce:  2 (n-1) rounds of latency + (bytes/n) / bw of the slowest ring edge
//   all-gather / reduce-scatter: (n-1) such rounds (bytes = the full gathered size per rank)
//   all-to-all:  each member sends bytes/n to each other one, all at once; time = latency of the
//                slowest level crossed + max(per-GPU intra-node bytes / NVLink bandwidth,
//                per-node bytes leaving the node / NIC bandwidth of the node)
//   broadcast:   pipelined along the group order: (n-1) latencies + bytes / slowest edge
// Tested in tests/sim/cluster_network_test.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/config/cluster_config.hpp"
#include "sim/core/sim_time.hpp"
#include "sim/network/link_model.hpp"

namespace sparsering {

class ClusterNetwork {
 public:
  /// Builds link models for every fabric level. Throws InputError for a level without bandwidth.
  explicit ClusterNetwork(const ClusterConfig& cluster);

  const ClusterConfig& cluster() const { return *cluster_; }
  const LinkModel& level_link(int32_t level) const { return links_[static_cast<size_t>(level)]; }
  int32_t link_level(int64_t rank_a, int64_t rank_b) const { return cluster_->link_level(rank_a, rank_b); }
  const LinkModel& link(int64_t rank_a, int64_t rank_b) const { return level_link(link_level(rank_a, rank_b)); }
  int64_t node_of(int64_t rank) const { return cluster_->node_of(rank); }

  /// Ring all-reduce of `bytes` per rank over `ranks` (ring in the given order).
  SimNs all_reduce_ns(std::span<const int64_t> ranks, int64_t bytes) const;
  /// Ring all-gather (or reduce-scatter) whose full result is `bytes` per rank.
  SimNs all_gather_ns(std::span<const int64_t> ranks, int64_t bytes) const;
  /// All-to-all in which each member holds `bytes_per_rank` and sends 1/n of it to each member.
  SimNs all_to_all_ns(std::span<const int64_t> ranks, int64_t bytes_per_rank) const;
  /// Broadcast of `bytes` from ranks[0] to the others.
  SimNs broadcast_ns(std::span<const int64_t> ranks, int64_t bytes) const;

 private:
  /// Time of one ring round moving `bytes` over every edge of the ring `ranks` at once: the
  /// slowest edge, with NIC sharing among the ring edges that leave or enter the same node
  /// (sim/network/nic_contention.hpp).
  SimNs ring_round_ns(std::span<const int64_t> ranks, int64_t bytes) const;

  const ClusterConfig* cluster_;
  std::vector<LinkModel> links_;
};

}  // namespace sparsering
