// Collective times over the cluster's fabric (sim/network/cluster_network.hpp).
// Tested in tests/sim/cluster_network_test.cpp.
#include "sim/network/cluster_network.hpp"

#include <algorithm>
#include <map>

#include "common/error.hpp"
#include "sim/network/nic_contention.hpp"

namespace sparsering {

ClusterNetwork::ClusterNetwork(const ClusterConfig& cluster) : cluster_(&cluster) {
  for (int32_t l = 0; l < cluster.level_count(); ++l) links_.push_back(make_link_model(cluster.level(l)));
}

SimNs ClusterNetwork::ring_round_ns(std::span<const int64_t> ranks, int64_t bytes) const {
  const size_t n = ranks.size();
  if (n <= 1 || bytes <= 0) return 0;
  // Every edge of the ring moves at once: they share the NICs of the nodes they leave and enter.
  NicContention nics(*this);
  for (size_t k = 0; k < n; ++k) nics.add_hop(ranks[k], ranks[(k + 1) % n]);
  SimNs worst = 0;
  for (size_t k = 0; k < n; ++k) {
    const int64_t a = ranks[k];
    const int64_t b = ranks[(k + 1) % n];
    worst = std::max(worst, transfer_time_ns(link(a, b), bytes, nics.share(a, b)));
  }
  return worst;
}

SimNs ClusterNetwork::all_reduce_ns(std::span<const int64_t> ranks, int64_t bytes) const {
  const auto n = static_cast<int64_t>(ranks.size());
  if (n <= 1 || bytes <= 0) return 0;
  return 2 * (n - 1) * ring_round_ns(ranks, (bytes + n - 1) / n);
}

SimNs ClusterNetwork::all_gather_ns(std::span<const int64_t> ranks, int64_t bytes) const {
  const auto n = static_cast<int64_t>(ranks.size());
  if (n <= 1 || bytes <= 0) return 0;
  return (n - 1) * ring_round_ns(ranks, (bytes + n - 1) / n);
}

SimNs ClusterNetwork::all_to_all_ns(std::span<const int64_t> ranks, int64_t bytes_per_rank) const {
  const auto n = static_cast<int64_t>(ranks.size());
  if (n <= 1 || bytes_per_rank <= 0) return 0;
  const int64_t message = (bytes_per_rank + n - 1) / n;
  std::map<int64_t, int64_t> members_per_node;
  for (const int64_t r : ranks) ++members_per_node[node_of(r)];
  int32_t slowest_level = 0;
  for (const int64_t a : ranks) {
    for (const int64_t b : ranks) slowest_level = std::max(slowest_level, link_level(a, b));
  }
  double worst_ns = 0.0;
  // Intra-node: each GPU sends to the other members of its node over its own NVLink bandwidth.
  const LinkModel& intra = level_link(0);
  for (const auto& [node, members] : members_per_node) {
    const double bytes = static_cast<double>((members - 1) * message);
    worst_ns = std::max(worst_ns, bytes / intra.gbytes_per_s(message));
    if (members < n) {
      // Every member of the node sends to every member elsewhere, through the node's NICs.
      const LinkModel& out = level_link(slowest_level);
      const double leaving = static_cast<double>(members * (n - members) * message);
      const double node_rate = out.gbytes_per_s(message) * static_cast<double>(std::max<int64_t>(1, out.nics_per_node));
      worst_ns = std::max(worst_ns, leaving / node_rate);
    }
  }
  return round_to_ns(level_link(slowest_level).latency_us * 1e3 + worst_ns);
}

SimNs ClusterNetwork::broadcast_ns(std::span<const int64_t> ranks, int64_t bytes) const {
  const auto n = static_cast<int64_t>(ranks.size());
  if (n <= 1 || bytes <= 0) return 0;
  double latency_ns = 0.0;
  double slowest_ns_per_byte = 0.0;
  for (int64_t k = 0; k + 1 < n; ++k) {
    const LinkModel& model = link(ranks[static_cast<size_t>(k)], ranks[static_cast<size_t>(k + 1)]);
    latency_ns += model.latency_us * 1e3;
    slowest_ns_per_byte = std::max(slowest_ns_per_byte, 1.0 / model.gbytes_per_s(bytes));
  }
  return round_to_ns(latency_ns + static_cast<double>(bytes) * slowest_ns_per_byte);
}

}  // namespace sparsering
