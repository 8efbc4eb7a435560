// Ring-order families: where the tuner puts the ranks of every context-parallel ring, Ulysses
// group and data-parallel replica on the cluster, as a plan `ring.order` (the convention of
// sim/config/plan_config.hpp: entry (d x head_parallel + h) x context_parallel + p is the global
// rank at ring position p of the ring of head-parallel index h and replica d).
//
// An order is two choices:
//   placement: which ranks form a ring. cp_inner gives ring (d, h) the consecutive ranks
//     ((d x H + h) x W + q), q = 0..W-1, so rings fill nodes first; hp_inner puts the Ulysses index
//     fastest, (d x W + q) x H + h, so each Ulysses group sits on consecutive ranks (inside a node
//     when H divides the GPUs per node) and a ring strides over nodes.
//   family: the order of a ring's ranks along the ring, with the ring's ranks grouped by node
//     (ascending): node_major walks node after node (a flat ring crosses each node boundary once;
//     inner hierarchy levels stay inside nodes); interleaved deals positions round robin across
//     the ring's nodes (consecutive positions on different nodes); snake walks node after node but
//     reverses every other node (boustrophedon), so a node is entered and left at the same end.
// Every combination yields a permutation of 0 .. world-1 for any degrees whose product is the
// cluster's GPU count, whatever the node shape. Tested in tests/tuner_search/ring_order_test.cpp.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/config/cluster_config.hpp"

namespace sparsering {

enum class RankPlacement : int32_t { cp_inner = 0, hp_inner = 1 };
enum class RingOrderFamily : int32_t { node_major = 0, interleaved = 1, snake = 2 };

/// Parallel degrees of a plan: context_parallel x head_parallel x data_parallel GPUs.
struct ParallelDegrees {
  int64_t context_parallel = 1;  ///< ring size W
  int64_t head_parallel = 1;     ///< Ulysses degree H
  int64_t data_parallel = 1;     ///< replicas D

  int64_t world_size() const { return context_parallel * head_parallel * data_parallel; }
  friend bool operator==(const ParallelDegrees&, const ParallelDegrees&) = default;
};

/// The plan ring_order of `degrees` on `cluster` for a placement and a family (file comment).
/// Throws InputError unless every degree is >= 1 and their product equals the cluster's GPUs.
std::vector<int64_t> make_ring_order(const ClusterConfig& cluster, const ParallelDegrees& degrees,
                                     RankPlacement placement, RingOrderFamily family);

/// "cp-inner" / "hp-inner".
std::string_view to_string(RankPlacement placement);
/// "node-major" / "interleaved" / "snake".
std::string_view to_string(RingOrderFamily family);

}  // namespace sparsering
