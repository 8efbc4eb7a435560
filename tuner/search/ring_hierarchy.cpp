#include "tuner/search/ring_hierarchy.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace sparsering {

namespace {

struct Enumerator {
  const ClusterConfig& cluster;
  const std::vector<int64_t>& order;
  int64_t ring_size;
  std::vector<RingHierarchy>& out;

  /// Extends `partial` (levels whose sizes multiply to `stride`) with every level that keeps the
  /// tiers strictly increasing; records complete nestings of two or more levels.
  void extend(RingHierarchy& partial, int64_t stride) {
    const int64_t remaining = ring_size / stride;
    if (remaining == 1) {
      if (partial.levels.size() >= 2) out.push_back(partial);
      return;
    }
    for (int64_t size = 2; size <= remaining; ++size) {
      if (remaining % size != 0) continue;
      const int32_t tier = level_tier(cluster, order, ring_size, stride, size);
      if (!partial.tiers.empty() && tier <= partial.tiers.back()) continue;
      partial.levels.push_back(RingLevel{size, cluster.level(tier).kind});
      partial.tiers.push_back(tier);
      extend(partial, stride * size);
      partial.levels.pop_back();
      partial.tiers.pop_back();
    }
  }
};

}  // namespace

int32_t level_tier(const ClusterConfig& cluster, const std::vector<int64_t>& ring_order, int64_t ring_size,
                   int64_t stride, int64_t size) {
  int32_t slowest = 0;
  const auto rings = static_cast<int64_t>(ring_order.size()) / ring_size;
  for (int64_t r = 0; r < rings; ++r) {
    const int64_t* ring = ring_order.data() + r * ring_size;
    for (int64_t p = 0; p < ring_size; ++p) {
      const int64_t digit = (p / stride) % size;
      const int64_t next = p + (((digit + 1) % size) - digit) * stride;
      slowest = std::max(slowest, cluster.link_level(ring[p], ring[next]));
    }
  }
  return slowest;
}

std::vector<RingHierarchy> ring_hierarchies(const ClusterConfig& cluster, const std::vector<int64_t>& ring_order,
                                            int64_t ring_size) {
  require(ring_size >= 1 && static_cast<int64_t>(ring_order.size()) % ring_size == 0, "ring size ", ring_size,
          " must be >= 1 and divide the ", ring_order.size(), " ranks of the ring order");
  std::vector<RingHierarchy> out;
  if (ring_size == 1) {
    out.push_back(RingHierarchy{{RingLevel{1, cluster.intra_node.kind}}, {0}});
    return out;
  }
  const int32_t flat = level_tier(cluster, ring_order, ring_size, 1, ring_size);
  out.push_back(RingHierarchy{{RingLevel{ring_size, cluster.level(flat).kind}}, {flat}});
  RingHierarchy partial;
  Enumerator{cluster, ring_order, ring_size, out}.extend(partial, 1);
  return out;
}

}  // namespace sparsering
