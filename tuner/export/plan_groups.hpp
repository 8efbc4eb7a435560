// Who works with whom in a plan: the role (slot) of every global rank and the rank groups every
// exporter writes: context-parallel rings, the rings of each hierarchy level, head-parallel
// (Ulysses) groups, data-parallel groups and gradient-synchronisation groups. Follows the rank conventions of
// sim/config/plan_config.hpp (slot index (d x head_parallel + h) x context_parallel + p).
// Tested in tests/tuner/plan_groups_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/config/plan_config.hpp"

namespace sparsering {

/// The role of one global rank in a plan.
struct RankSlot {
  int64_t ring = 0;        ///< d x head_parallel + h
  int64_t position = 0;    ///< ring position p (the context-parallel rank), 0 .. context_parallel-1
  int64_t head_index = 0;  ///< h, 0 .. head_parallel-1
  int64_t replica = 0;     ///< d, 0 .. data_parallel-1
};

/// Index into plan.ring_order of (ring, position).
inline int64_t slot_index(const PlanConfig& plan, int64_t ring, int64_t position) {
  return ring * plan.context_parallel + position;
}

/// The role of slot index `slot` (0 .. world-1).
RankSlot slot_of_index(const PlanConfig& plan, int64_t slot);

/// For every global rank g, its role. Precondition: the plan passed check_plan_structure.
std::vector<RankSlot> rank_slots(const PlanConfig& plan);

/// Levels of the ring hierarchy with more than one rank (indices into plan.ring_levels).
std::vector<size_t> effective_levels(const PlanConfig& plan);

/// The rings of hierarchy level `level`: for every context-parallel ring and every value of the
/// other level indices, the global ranks whose level index runs 0 .. size-1, in that order (so
/// group[i + 1] follows group[i] in the level-`level` ring). Ordered by ring, then by position
/// of the group's first member.
std::vector<std::vector<int64_t>> level_groups(const PlanConfig& plan, size_t level);

/// The context-parallel rings (plan.ring_members of every ring), ring-ordered.
std::vector<std::vector<int64_t>> ring_groups(const PlanConfig& plan);

/// Head-parallel (Ulysses all-to-all) groups: for each replica d and position p, the ranks of
/// h = 0 .. head_parallel-1 in that order.
std::vector<std::vector<int64_t>> head_parallel_groups(const PlanConfig& plan);

/// Data-parallel groups: for each head index h and position p, the ranks of d = 0 .. data_parallel-1.
std::vector<std::vector<int64_t>> data_parallel_groups(const PlanConfig& plan);

/// Gradient-synchronisation groups: the ranks that compute gradients of the same parameters and
/// reduce them together. Plans have neither tensor nor pipeline parallelism, and head-parallel
/// (Ulysses) ranks run the whole layer on their own tokens, so every rank holds (a replica or a
/// ZeRO shard of) every parameter: one group of all ranks, ascending, as the simulator's gradient
/// all-reduce and ZeRO sharding (over context x head x data parallel) assume.
std::vector<std::vector<int64_t>> grad_sync_groups(const PlanConfig& plan);

}  // namespace sparsering
