// NIC sharing among concurrent ring hops (sim/network/nic_contention.hpp).
// Tested in tests/sim/nic_contention_test.cpp.
#include "sim/network/nic_contention.hpp"

#include <algorithm>

namespace sparsering {

NicContention::NicContention(const ClusterNetwork& network) : network_(&network) {
  // Flat counters per (node, level): every node and level of the cluster, so a lookup never
  // allocates and the counts do not depend on the order hops are added in.
  const auto slots = static_cast<size_t>(network.cluster().nodes) *
                     static_cast<size_t>(network.cluster().level_count());
  leaving_.assign(slots, 0);
  entering_.assign(slots, 0);
}

size_t NicContention::slot(int64_t node, int32_t level) const {
  return static_cast<size_t>(node) * static_cast<size_t>(network_->cluster().level_count()) +
         static_cast<size_t>(level);
}

void NicContention::add_hop(int64_t rank_a, int64_t rank_b) {
  const int32_t level = network_->link_level(rank_a, rank_b);
  if (level == 0) return;  // NVLink within a node: every GPU has its own links
  ++leaving_[slot(network_->node_of(rank_a), level)];
  ++entering_[slot(network_->node_of(rank_b), level)];
}

double NicContention::share(int64_t rank_a, int64_t rank_b) const {
  const int32_t level = network_->link_level(rank_a, rank_b);
  if (level == 0) return 1.0;
  const int64_t nics = network_->level_link(level).nics_per_node;
  // A hop is slowed by the busier end: its source's NICs or its destination's.
  return std::min(nic_share(leaving_[slot(network_->node_of(rank_a), level)], nics),
                  nic_share(entering_[slot(network_->node_of(rank_b), level)], nics));
}

int64_t NicContention::hops(int64_t node, int32_t level, bool leaving) const {
  return (leaving ? leaving_ : entering_)[slot(node, level)];
}

}  // namespace sparsering
