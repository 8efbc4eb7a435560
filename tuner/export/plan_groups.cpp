#include "tuner/export/plan_groups.hpp"

namespace sparsering {

RankSlot slot_of_index(const PlanConfig& plan, int64_t slot) {
  RankSlot role;
  role.ring = slot / plan.context_parallel;
  role.position = slot % plan.context_parallel;
  role.head_index = role.ring % plan.head_parallel;
  role.replica = role.ring / plan.head_parallel;
  return role;
}

std::vector<RankSlot> rank_slots(const PlanConfig& plan) {
  std::vector<RankSlot> slots(plan.ring_order.size());
  for (size_t i = 0; i < plan.ring_order.size(); ++i) {
    slots[static_cast<size_t>(plan.ring_order[i])] = slot_of_index(plan, static_cast<int64_t>(i));
  }
  return slots;
}

std::vector<size_t> effective_levels(const PlanConfig& plan) {
  std::vector<size_t> levels;
  for (size_t l = 0; l < plan.ring_levels.size(); ++l) {
    if (plan.ring_levels[l].size > 1) levels.push_back(l);
  }
  return levels;
}

std::vector<std::vector<int64_t>> level_groups(const PlanConfig& plan, size_t level) {
  std::vector<std::vector<int64_t>> groups;
  const int64_t size = plan.ring_levels[level].size;
  for (int64_t ring = 0; ring < plan.ring_count(); ++ring) {
    for (int64_t p = 0; p < plan.context_parallel; ++p) {
      if (plan.level_index(p, level) != 0) continue;  // p starts a level ring
      std::vector<int64_t> group;
      group.reserve(static_cast<size_t>(size));
      int64_t q = p;
      for (int64_t i = 0; i < size; ++i) {
        group.push_back(plan.global_rank(ring, q));
        q = plan.next_position(q, level);
      }
      groups.push_back(std::move(group));
    }
  }
  return groups;
}

std::vector<std::vector<int64_t>> ring_groups(const PlanConfig& plan) {
  std::vector<std::vector<int64_t>> groups;
  for (int64_t ring = 0; ring < plan.ring_count(); ++ring) groups.push_back(plan.ring_members(ring));
  return groups;
}

std::vector<std::vector<int64_t>> head_parallel_groups(const PlanConfig& plan) {
  std::vector<std::vector<int64_t>> groups;
  for (int64_t d = 0; d < plan.data_parallel; ++d) {
    for (int64_t p = 0; p < plan.context_parallel; ++p) {
      std::vector<int64_t> group;
      for (int64_t h = 0; h < plan.head_parallel; ++h) group.push_back(plan.global_rank(d * plan.head_parallel + h, p));
      groups.push_back(std::move(group));
    }
  }
  return groups;
}

std::vector<std::vector<int64_t>> data_parallel_groups(const PlanConfig& plan) {
  std::vector<std::vector<int64_t>> groups;
  for (int64_t h = 0; h < plan.head_parallel; ++h) {
    for (int64_t p = 0; p < plan.context_parallel; ++p) {
      std::vector<int64_t> group;
      for (int64_t d = 0; d < plan.data_parallel; ++d) group.push_back(plan.global_rank(d * plan.head_parallel + h, p));
      groups.push_back(std::move(group));
    }
  }
  return groups;
}

std::vector<std::vector<int64_t>> grad_sync_groups(const PlanConfig& plan) {
  std::vector<int64_t> all(static_cast<size_t>(plan.world_size()));
  for (size_t g = 0; g < all.size(); ++g) all[g] = static_cast<int64_t>(g);
  return {all};
}

}  // namespace sparsering
