// The torch export: plan.json holds the rings, level rings, groups (gradient synchronisation
// included), roles, heads, per-level neighbours (checked against the plan's index arithmetic) and
// the layout's permutation; the module copied beside it is byte for byte
// tuner/python/sparsering_plan.py.
#include "tuner/export/torch_export.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "common/atomic_file.hpp"
#include "export_test_util.hpp"
#include "tuner/export/plan_groups.hpp"
#include "tuner/export/torch_module_source.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

TEST(TorchExport, PlanJsonHoldsGroupsNeighboursAndPermutation) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  test::PlanSpec spec;
  spec.context_parallel = 4;
  spec.head_parallel = 2;
  spec.levels = {{2, "nvlink"}, {2, "nvlink"}};
  spec.order = {0, 1, 2, 3, 4, 5, 6, 7};
  std::shuffle(spec.order.begin(), spec.order.end(), rng);
  const test::TestPlan t(spec, 1, 8);
  const ExportBundle bundle = export_torch(t.input());
  EXPECT_TRUE(bundle.exact());
  const auto doc = nlohmann::json::parse(bundle.find("plan.json")->bytes);
  EXPECT_EQ(doc["format"], "sparsering-torch-plan");
  EXPECT_EQ(doc["world_size"], 8);
  EXPECT_EQ(doc["rings"], ring_groups(t.plan));
  EXPECT_EQ(doc["level_rings"][1], level_groups(t.plan, 1));
  EXPECT_EQ(doc["head_parallel_groups"], head_parallel_groups(t.plan));
  const auto slots = rank_slots(t.plan);
  for (int64_t g = 0; g < 8; ++g) {
    const auto& role = doc["ranks"][static_cast<size_t>(g)];
    const RankSlot& s = slots[static_cast<size_t>(g)];
    EXPECT_EQ(role["rank"], g);
    EXPECT_EQ(role["cp_rank"], s.position);
    EXPECT_EQ(role["head_index"], s.head_index);
    EXPECT_EQ(role["token_slice"], (std::vector<int64_t>{s.head_index * 32, s.head_index * 32 + 32}));
    for (size_t l = 0; l < 2; ++l) {
      const int64_t next = t.plan.global_rank(s.ring, t.plan.next_position(s.position, l));
      EXPECT_EQ(role["neighbours"][l]["next"], next);
      // prev is the rank whose next is this one.
      const int64_t prev = role["neighbours"][l]["prev"];
      const RankSlot& ps = slots[static_cast<size_t>(prev)];
      EXPECT_EQ(t.plan.global_rank(ps.ring, t.plan.next_position(ps.position, l)), g);
    }
  }
  for (int32_t r = 0; r < 4; ++r) {
    for (int64_t i = 0; i < 64; ++i) {
      EXPECT_EQ(doc["token_permutation"][static_cast<size_t>(r)][static_cast<size_t>(i)],
                t.plan.layout.global_token(r, i));
    }
  }
}

TEST(TorchExport, GradientSyncGroupAndHeadsOfEveryRank) {
  test::PlanSpec spec;
  spec.context_parallel = 2;
  spec.head_parallel = 2;
  spec.data_parallel = 2;
  spec.levels = {{2, "nvlink"}};
  spec.zero_stage = 2;
  test::TestPlan t(spec, 1, 8);
  auto doc = nlohmann::json::parse(export_torch(t.input()).find("plan.json")->bytes);
  EXPECT_EQ(doc["version"], 2);
  // Weights are replicated (or ZeRO-sharded) over context x head x data parallel: one group of all.
  EXPECT_EQ(doc["grad_sync_groups"], (std::vector<std::vector<int64_t>>{{0, 1, 2, 3, 4, 5, 6, 7}}));
  EXPECT_EQ(doc["grad_sync"]["collective"], "reduce_scatter");
  EXPECT_EQ(doc["grad_sync"]["parameters"], "replicated");
  const auto slots = rank_slots(t.plan);
  for (int64_t g = 0; g < 8; ++g) {
    const int64_t h = slots[static_cast<size_t>(g)].head_index;
    EXPECT_EQ(doc["ranks"][static_cast<size_t>(g)]["heads"]["q"], (std::vector<int64_t>{4 * h, 4 * h + 4}));
    EXPECT_EQ(doc["ranks"][static_cast<size_t>(g)]["heads"]["kv"], (std::vector<int64_t>{2 * h, 2 * h + 2}));
  }
  // head_parallel 2 over one K/V head: both head ranks hold (a replica of) K/V head 0.
  t.model.kv_heads = 1;
  doc = nlohmann::json::parse(export_torch(t.input()).find("plan.json")->bytes);
  EXPECT_EQ(doc["attention_heads"]["kv_head_replicas"], 2);
  for (int64_t g = 0; g < 8; ++g) {
    EXPECT_EQ(doc["ranks"][static_cast<size_t>(g)]["heads"]["kv"], (std::vector<int64_t>{0, 1}));
  }
  t.plan.zero_stage = 0;
  doc = nlohmann::json::parse(export_torch(t.input()).find("plan.json")->bytes);
  EXPECT_EQ(doc["grad_sync"]["collective"], "all_reduce");
}

TEST(TorchExport, CopiesTheModuleVerbatim) {
  const test::TestPlan t(test::PlanSpec{}, 1, 4);
  const ExportBundle bundle = export_torch(t.input());
  const std::string on_disk = read_file(std::string(SPARSERING_SOURCE_DIR) + "/tuner/python/sparsering_plan.py");
  EXPECT_EQ(std::string(torch_module_source()), on_disk);
  EXPECT_EQ(bundle.find("sparsering_plan.py")->bytes, on_disk);
}

TEST(TorchExport, RefusesHeadSlicesThatDoNotDivide) {
  test::PlanSpec odd;  // 9 tokens per ring position, fed by 2 head-parallel ranks
  odd.seq_len_tokens = 36;
  odd.context_parallel = 4;
  odd.granularity_tokens = 9;
  odd.head_parallel = 2;
  const test::TestPlan t(odd, 1, 8);
  test::expect_input_error([&] { export_torch(t.input()); }, {"9 tokens", "head_parallel (2)"});
}

}  // namespace
}  // namespace sparsering
