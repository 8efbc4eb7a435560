// How a training framework places plan roles on global ranks, and what changes when that placement
// or its flat ring differs from the plan: Megatron-LM and TransformerEngine number ranks with the
// head-parallel (a2a) index fastest, then the context-parallel position, then the data-parallel
// replica (tp-cp-ep-dp-pp with tp = ep = pp = 1); torchtitan and MTraining take consecutive ranks
// per ring (the plan's slot order). Tested in tests/tuner/framework_rank_order_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/cluster_config.hpp"
#include "sim/config/plan_config.hpp"

namespace sparsering {

enum class RankConvention : int32_t {
  head_fastest = 0,  ///< rank = (d x context_parallel + p) x head_parallel + h  (Megatron, TE)
  slot_order = 1,    ///< rank = (d x head_parallel + h) x context_parallel + p  (torchtitan, MTraining)
};

/// The global rank a framework puts at each slot, indexed like plan.ring_order.
std::vector<int64_t> framework_ring_order(const PlanConfig& plan, RankConvention convention);

/// Counts hops by link kind ("12 over nvlink, 4 over infiniband") of the flat rings (position p to
/// p+1, cyclic) when slot i runs on global rank order[i]. `merged_rings` consecutive plan rings
/// form one framework ring (a framework without head parallelism joins the head_parallel rings of
/// a replica; 1 = every plan ring is a framework ring). Preconditions: order is a permutation of
/// the cluster's ranks with plan.world_size() entries; merged_rings divides plan.ring_count().
std::string flat_ring_hops_text(const PlanConfig& plan, const ClusterConfig& cluster, const std::vector<int64_t>& order,
                                int64_t merged_rings = 1);

/// Counts hops by link kind of each hierarchy level of the plan, e.g.
/// "level 0 (8 ranks, nvlink): 32 hops over nvlink; level 1 (4 ranks, infiniband): 32 hops over infiniband".
std::string plan_level_hops_text(const PlanConfig& plan, const ClusterConfig& cluster);

/// Empty when `framework_order` equals the plan's ring order; otherwise one "lost" line saying how
/// many slots move, an example, the flat-ring hops by link kind in both orders, and how
/// rank_map.json restores the plan's placement.
/// `rule` says in words how the framework orders ranks (e.g. convention_rule()).
std::vector<std::string> describe_order_change(const PlanConfig& plan, const ClusterConfig& cluster,
                                               const std::vector<int64_t>& framework_order,
                                               std::string_view framework, std::string_view rule,
                                               int64_t merged_rings = 1);

/// The rank rule of a convention in words.
std::string_view convention_rule(RankConvention convention);

/// Empty when the plan has at most one level with more than one rank; otherwise one "lost" line:
/// the hierarchical ring becomes one flat ring in position order (part of a ring of
/// merged_rings x context_parallel when rings are joined), with the hop counts of both.
std::vector<std::string> describe_flattening(const PlanConfig& plan, const ClusterConfig& cluster,
                                             const std::vector<int64_t>& framework_order,
                                             std::string_view framework, int64_t merged_rings = 1);

/// rank_map.json: for every framework rank f, the plan GPU (global rank of the plan's cluster)
/// that must run it to reproduce the plan's placement, plus the role of each rank.
std::string rank_map_json(const PlanConfig& plan, const std::vector<int64_t>& framework_order,
                          std::string_view framework);

}  // namespace sparsering
