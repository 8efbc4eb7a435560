// Export checks: plans built or edited in code with ranks or sizes that do not exist are refused
// with a message naming the field; a valid plan passes; a plan for another cluster is refused.
#include "tuner/export/plan_export_checks.hpp"

#include <gtest/gtest.h>

#include "export_test_util.hpp"

namespace sparsering {
namespace {

test::TestPlan valid() {
  test::PlanSpec spec;
  spec.data_parallel = 2;
  return test::TestPlan(spec, 1, 8);
}

TEST(PlanExportChecks, AcceptsAValidPlan) {
  const test::TestPlan t = valid();
  EXPECT_NO_THROW(check_export_input(t.input()));
}

TEST(PlanExportChecks, RefusesRanksThatDoNotExist) {
  test::TestPlan t = valid();
  t.plan.ring_order[5] = 99;
  test::expect_input_error([&] { check_plan_structure(t.plan); },
                           {"ring.order[5] is rank 99", "does not exist in a world of 8"});
  t = valid();
  t.plan.ring_order[5] = -1;
  test::expect_input_error([&] { check_plan_structure(t.plan); }, {"rank -1"});
  t = valid();
  t.plan.ring_order[5] = t.plan.ring_order[2];
  test::expect_input_error([&] { check_plan_structure(t.plan); }, {"repeats rank"});
  t = valid();
  t.plan.ring_order.pop_back();
  test::expect_input_error([&] { check_plan_structure(t.plan); }, {"lists 7 ranks", "= 8"});
}

TEST(PlanExportChecks, RefusesSizesThatDoNotFit) {
  test::TestPlan t = valid();
  t.plan.ring_levels[0].size = 3;
  test::expect_input_error([&] { check_plan_structure(t.plan); }, {"multiply to 3", "context_parallel is 4"});
  t = valid();
  t.plan.ring_levels.clear();
  test::expect_input_error([&] { check_plan_structure(t.plan); }, {"at least one level"});
  t = valid();
  t.plan.layout = make_token_layout(t.plan.layout.kind(), t.plan.seq_len_tokens, 2, t.plan.layout.granularity_tokens());
  test::expect_input_error([&] { check_plan_structure(t.plan); }, {"layout is over 2 ranks"});
  t = valid();
  // 256 tokens are not whole stripes of 7 x 4: such a layout cannot even be built.
  test::expect_input_error([&] { t.plan.layout = make_token_layout(LayoutKind::striped, 256, 4, 7); },
                           {"layout", "divisible"});
  t = valid();
  t.plan.data_parallel = 0;
  test::expect_input_error([&] { check_plan_structure(t.plan); }, {"must be >= 1"});
}

TEST(PlanExportChecks, RefusesAPlanForAnotherCluster) {
  test::PlanSpec spec;
  spec.data_parallel = 2;
  const test::TestPlan t(spec, 1, 4);  // 8 ranks on 4 GPUs
  test::expect_input_error([&] { check_export_input(t.input()); }, {"= 8", "must equal the GPUs", "4"});
}

}  // namespace
}  // namespace sparsering
