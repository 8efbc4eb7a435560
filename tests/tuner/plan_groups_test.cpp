// Plan groups: slots invert ring_order; level rings, head-parallel and data-parallel groups checked
// against brute force over the plan's index arithmetic on randomly permuted ring orders.
#include "tuner/export/plan_groups.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "export_test_util.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

PlanConfig random_plan(std::mt19937_64& rng) {
  test::PlanSpec spec;
  spec.context_parallel = 8;
  spec.head_parallel = 2;
  spec.data_parallel = 2;
  spec.levels = {{2, "nvlink"}, {2, "nvlink"}, {2, "nvlink"}};
  spec.order.resize(32);
  for (int64_t i = 0; i < 32; ++i) spec.order[static_cast<size_t>(i)] = i;
  std::shuffle(spec.order.begin(), spec.order.end(), rng);
  return parse_plan(test::plan_yaml(spec), "random.yaml");
}

TEST(PlanGroups, SlotsInvertTheRingOrder) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  const PlanConfig plan = random_plan(rng);
  const std::vector<RankSlot> slots = rank_slots(plan);
  for (int64_t g = 0; g < plan.world_size(); ++g) {
    const RankSlot& s = slots[static_cast<size_t>(g)];
    EXPECT_EQ(plan.global_rank(s.ring, s.position), g);
    EXPECT_EQ(s.ring, s.replica * plan.head_parallel + s.head_index);
  }
}

TEST(PlanGroups, LevelRingsFollowTheLevelIndex) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  const PlanConfig plan = random_plan(rng);
  const std::vector<RankSlot> slots = rank_slots(plan);
  for (size_t level = 0; level < plan.ring_levels.size(); ++level) {
    const auto groups = level_groups(plan, level);
    ASSERT_EQ(static_cast<int64_t>(groups.size()), plan.world_size() / plan.ring_levels[level].size);
    std::set<int64_t> covered;
    for (const auto& group : groups) {
      for (size_t i = 0; i < group.size(); ++i) {
        EXPECT_TRUE(covered.insert(group[i]).second) << "rank in two level rings";
        const RankSlot& a = slots[static_cast<size_t>(group[i])];
        const RankSlot& b = slots[static_cast<size_t>(group[(i + 1) % group.size()])];
        EXPECT_EQ(a.ring, b.ring);
        EXPECT_EQ(plan.level_index(a.position, level), static_cast<int64_t>(i));
        // Brute force: b's position differs from a's by one in this level's digit only.
        for (size_t other = 0; other < plan.ring_levels.size(); ++other) {
          const int64_t da = plan.level_index(a.position, other);
          const int64_t db = plan.level_index(b.position, other);
          if (other == level) {
            EXPECT_EQ(db, (da + 1) % plan.ring_levels[other].size);
          } else {
            EXPECT_EQ(da, db);
          }
        }
      }
    }
    EXPECT_EQ(static_cast<int64_t>(covered.size()), plan.world_size());
  }
}

TEST(PlanGroups, HeadAndDataParallelGroups) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  const PlanConfig plan = random_plan(rng);
  const std::vector<RankSlot> slots = rank_slots(plan);
  for (const auto& group : head_parallel_groups(plan)) {
    ASSERT_EQ(static_cast<int64_t>(group.size()), plan.head_parallel);
    for (size_t h = 0; h < group.size(); ++h) {
      const RankSlot& s = slots[static_cast<size_t>(group[h])];
      EXPECT_EQ(s.head_index, static_cast<int64_t>(h));
      EXPECT_EQ(s.position, slots[static_cast<size_t>(group[0])].position);
      EXPECT_EQ(s.replica, slots[static_cast<size_t>(group[0])].replica);
    }
  }
  for (const auto& group : data_parallel_groups(plan)) {
    ASSERT_EQ(static_cast<int64_t>(group.size()), plan.data_parallel);
    for (size_t d = 0; d < group.size(); ++d) {
      const RankSlot& s = slots[static_cast<size_t>(group[d])];
      EXPECT_EQ(s.replica, static_cast<int64_t>(d));
      EXPECT_EQ(s.position, slots[static_cast<size_t>(group[0])].position);
      EXPECT_EQ(s.head_index, slots[static_cast<size_t>(group[0])].head_index);
    }
  }
  EXPECT_EQ(ring_groups(plan).size(), 4u);
  EXPECT_EQ(effective_levels(plan), (std::vector<size_t>{0, 1, 2}));
}

}  // namespace
}  // namespace sparsering
