// Framework rank orders: Megatron/TE's head-fastest numbering and the slot order checked against
// hand-derived tables; the order-change and flattening descriptions with hop counts derived by
// hand on a 2-node cluster; rank_map.json inverts the framework order.
#include "tuner/export/framework_rank_order.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "export_test_util.hpp"

namespace sparsering {
namespace {

TEST(FrameworkRankOrder, HeadFastestMatchesMegatronNumbering) {
  test::PlanSpec spec;
  spec.context_parallel = 2;
  spec.head_parallel = 2;
  spec.data_parallel = 2;
  spec.levels = {{2, "nvlink"}};
  spec.seq_len_tokens = 64;
  const PlanConfig plan = parse_plan(test::plan_yaml(spec), "p.yaml");
  // Slots (d, h, p) in ring_order order: (0,0,0) (0,0,1) (0,1,0) (0,1,1) (1,0,0) ...
  // Megatron rank = (d x 2 + p) x 2 + h.
  EXPECT_EQ(framework_ring_order(plan, RankConvention::head_fastest), (std::vector<int64_t>{0, 2, 1, 3, 4, 6, 5, 7}));
  EXPECT_EQ(framework_ring_order(plan, RankConvention::slot_order), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(FrameworkRankOrder, DescribesAChangedOrderWithHopCounts) {
  // Flat ring of 4 over 2 nodes x 2 GPUs in the order 0 2 1 3: every hop crosses nodes (4 over
  // infiniband). The identity order has hops 0-1 and 2-3 inside nodes and 1-2, 3-0 across.
  test::PlanSpec spec;
  spec.levels = {{4, "infiniband"}};
  spec.order = {0, 2, 1, 3};
  const test::TestPlan t(spec, 2, 2);
  const auto identity = framework_ring_order(t.plan, RankConvention::slot_order);
  EXPECT_EQ(flat_ring_hops_text(t.plan, t.cluster, t.plan.ring_order), "4 over infiniband");
  EXPECT_EQ(flat_ring_hops_text(t.plan, t.cluster, identity), "2 over infiniband, 2 over nvlink");
  const auto lines = describe_order_change(t.plan, t.cluster, identity, "Fw", "rule text");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("2 of 4 roles run on another GPU"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("[0, 2, 1, 3] in the plan but [0, 1, 2, 3] in Fw"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("rule text"), std::string::npos);
  EXPECT_NE(lines[0].find("rank_map.json"), std::string::npos);
  EXPECT_TRUE(describe_order_change(t.plan, t.cluster, t.plan.ring_order, "Fw", "r").empty());

  const nlohmann::json map = nlohmann::json::parse(rank_map_json(t.plan, identity, "fw"));
  EXPECT_EQ(map["plan_gpu_of_rank"], (std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(map["ranks"][1]["position"], 1);
  EXPECT_EQ(map["ranks"][1]["plan_gpu"], 2);
}

TEST(FrameworkRankOrder, DescribesFlatteningOfAHierarchy) {
  test::PlanSpec spec;
  spec.levels = {{2, "nvlink"}, {2, "infiniband"}};
  const test::TestPlan t(spec, 2, 2);
  EXPECT_EQ(plan_level_hops_text(t.plan, t.cluster),
            "level 0 (2 ranks, nvlink): 4 over nvlink; level 1 (2 ranks, infiniband): 4 over infiniband");
  const auto lines = describe_flattening(t.plan, t.cluster, t.plan.ring_order, "Fw");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("2 (nvlink) x 2 (infiniband) hierarchy"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("one flat ring of 4"), std::string::npos);
  EXPECT_NE(lines[0].find("2 over infiniband, 2 over nvlink"), std::string::npos);

  test::PlanSpec flat;
  flat.levels = {{1, "nvlink"}, {4, "nvlink"}};  // a size-1 level is no hierarchy
  flat.head_parallel = 2;
  const test::TestPlan f(flat, 1, 8);
  EXPECT_TRUE(describe_flattening(f.plan, f.cluster, f.plan.ring_order, "Fw").empty());
  // Joining the two head-parallel rings of 4 into one ring of 8 on 2 nodes x 4: 0 .. 7 in order
  // crosses nodes at 3 -> 4 and 7 -> 0.
  const test::TestPlan joined(flat, 2, 4);
  EXPECT_EQ(flat_ring_hops_text(joined.plan, joined.cluster, joined.plan.ring_order, 2), "2 over infiniband, 6 over nvlink");
  EXPECT_EQ(flat_ring_hops_text(joined.plan, joined.cluster, joined.plan.ring_order, 1), "8 over nvlink");
}

}  // namespace
}  // namespace sparsering
