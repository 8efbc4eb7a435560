// Ring hierarchies the tuner considers for one ring order: the flat ring, and every nesting of
// ring sizes (inner -> outer, any number of levels, each of size >= 2, product = the ring size)
// whose levels cross strictly slower fabric tiers from inner to outer. A level's tier is the
// slowest cluster level (intra-node, inter-node, then the cluster's outer levels) that any of its
// hops crosses in any ring, the rule check_plan_against applies to the declared link; its link
// kind is that tier's kind. So an inner level never straddles a node (or rack) boundary unless
// every level outside it is slower still, and no two levels share a tier (that nesting would only
// split one fabric into two rings). Tested in tests/tuner_search/ring_hierarchy_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/config/cluster_config.hpp"
#include "sim/config/plan_config.hpp"

namespace sparsering {

/// One hierarchy: its levels (inner -> outer, links set) and the fabric tier of each level.
struct RingHierarchy {
  std::vector<RingLevel> levels;
  std::vector<int32_t> tiers;  ///< cluster level index (0 intra-node, 1 inter-node, 2 + i outer level i)
};

/// Fabric tier of a level of size `size` whose positions are `stride` apart (the product of the
/// inner level sizes): the slowest cluster level crossed by any of its hops in any of the
/// `ring_order.size() / ring_size` rings. Preconditions: ring_size divides ring_order.size(),
/// stride x size divides ring_size, every rank is a rank of `cluster`.
int32_t level_tier(const ClusterConfig& cluster, const std::vector<int64_t>& ring_order, int64_t ring_size,
                   int64_t stride, int64_t size);

/// The flat ring first, then every nesting described in the file comment, in lexicographic order
/// of the level sizes. Rings of size 1 get one level of size 1 on the intra-node link.
/// Throws InputError unless ring_size >= 1 divides ring_order.size().
std::vector<RingHierarchy> ring_hierarchies(const ClusterConfig& cluster, const std::vector<int64_t>& ring_order,
                                            int64_t ring_size);

}  // namespace sparsering
