#include "tuner/search/ring_order.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace sparsering {

namespace {

/// Global rank of the q-th member (ascending) of ring (d, h).
int64_t member_rank(const ParallelDegrees& g, RankPlacement placement, int64_t d, int64_t h, int64_t q) {
  if (placement == RankPlacement::hp_inner) return (d * g.context_parallel + q) * g.head_parallel + h;
  return (d * g.head_parallel + h) * g.context_parallel + q;
}

/// The ring's ranks (ascending) split into runs of one node each, in ascending node order.
std::vector<std::vector<int64_t>> by_node(const ClusterConfig& cluster, const std::vector<int64_t>& ranks) {
  std::vector<std::vector<int64_t>> nodes;
  int64_t current = -1;
  for (const int64_t rank : ranks) {
    const int64_t node = cluster.node_of(rank);
    if (node != current) {
      nodes.emplace_back();
      current = node;
    }
    nodes.back().push_back(rank);
  }
  return nodes;
}

}  // namespace

std::vector<int64_t> make_ring_order(const ClusterConfig& cluster, const ParallelDegrees& degrees,
                                     RankPlacement placement, RingOrderFamily family) {
  require(degrees.context_parallel >= 1 && degrees.head_parallel >= 1 && degrees.data_parallel >= 1,
          "parallel degrees must be >= 1, got context_parallel ", degrees.context_parallel, ", head_parallel ",
          degrees.head_parallel, ", data_parallel ", degrees.data_parallel);
  require(degrees.world_size() == cluster.world_size(), "context_parallel x head_parallel x data_parallel = ",
          degrees.world_size(), " must equal the ", cluster.world_size(), " GPUs of cluster ", cluster.name);
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(degrees.world_size()));
  std::vector<int64_t> members(static_cast<size_t>(degrees.context_parallel));
  for (int64_t d = 0; d < degrees.data_parallel; ++d) {
    for (int64_t h = 0; h < degrees.head_parallel; ++h) {
      for (int64_t q = 0; q < degrees.context_parallel; ++q) {
        members[static_cast<size_t>(q)] = member_rank(degrees, placement, d, h, q);
      }
      if (family == RingOrderFamily::node_major) {
        order.insert(order.end(), members.begin(), members.end());
        continue;
      }
      std::vector<std::vector<int64_t>> nodes = by_node(cluster, members);
      if (family == RingOrderFamily::snake) {
        for (size_t n = 0; n < nodes.size(); ++n) {
          if (n % 2 == 1) std::reverse(nodes[n].begin(), nodes[n].end());
          order.insert(order.end(), nodes[n].begin(), nodes[n].end());
        }
      } else {  // interleaved: round robin over the nodes, skipping nodes that ran out
        size_t dealt = 0;
        for (size_t slot = 0; dealt < members.size(); ++slot) {
          for (const auto& node : nodes) {
            if (slot < node.size()) {
              order.push_back(node[slot]);
              ++dealt;
            }
          }
        }
      }
    }
  }
  return order;
}

std::string_view to_string(RankPlacement placement) {
  return placement == RankPlacement::hp_inner ? "hp-inner" : "cp-inner";
}

std::string_view to_string(RingOrderFamily family) {
  switch (family) {
    case RingOrderFamily::node_major: return "node-major";
    case RingOrderFamily::interleaved: return "interleaved";
    case RingOrderFamily::snake: return "snake";
  }
  return "unknown";
}

}  // namespace sparsering
