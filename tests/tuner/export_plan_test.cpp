// The export entry point: target names, every target on valid plans (flat and hierarchical), every
// target refusing a plan that names a rank that does not exist, and the chakra target's need for
// durations or a trace to simulate.
#include "tuner/export/export_plan.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "export_test_util.hpp"

namespace sparsering {
namespace {

ExportOptions options_with_durations(const std::filesystem::path& path) {
  ExportOptions options;
  options.durations_path = path;
  options.pattern_config_name = "Tiny_pattern";
  return options;
}

TEST(ExportPlan, TargetNames) {
  for (const ExportTarget target : all_export_targets()) EXPECT_EQ(parse_export_target(to_string(target)), target);
  test::expect_input_error([] { parse_export_target("deepspeed"); }, {"unknown export target 'deepspeed'", "chakra"});
}

TEST(ExportPlan, EveryTargetExportsAndRefusesMissingRanks) {
  const auto dir = std::filesystem::temp_directory_path() / ("sparsering_export_plan_" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  const auto durations = dir / "durations.json";
  std::ofstream(durations) << R"({"forward": [[1000, 2000, 3000, 4000], [1000, 2000, 3000, 4000], )"
                              R"([1000, 2000, 3000, 4000], [1000, 2000, 3000, 4000]]})";
  test::PlanSpec hierarchical;
  hierarchical.levels = {{2, "nvlink"}, {2, "infiniband"}};
  for (const test::PlanSpec& spec : {test::PlanSpec{}, hierarchical}) {
    test::TestPlan t(spec, spec.levels.size() == 1 ? 1 : 2, spec.levels.size() == 1 ? 4 : 2);
    for (const ExportTarget target : all_export_targets()) {
      const ExportBundle bundle = export_plan(target, t.input(), options_with_durations(durations));
      EXPECT_EQ(bundle.target, to_string(target));
      EXPECT_FALSE(bundle.files.empty());
    }
    t.plan.ring_order[2] = 7;  // a rank of a world of 4 that does not exist
    for (const ExportTarget target : all_export_targets()) {
      test::expect_input_error([&] { export_plan(target, t.input(), options_with_durations(durations)); },
                               {"rank 7", "does not exist"});
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(ExportPlan, ChakraNeedsDurationsOrATraceForASparsePlan) {
  const test::TestPlan t(test::PlanSpec{}, 1, 4);
  test::expect_input_error([&] { export_plan(ExportTarget::chakra, t.input(), ExportOptions{}); },
                           {"sparse", "--trace", "--durations"});
  ExportOptions both = options_with_durations("durations.json");
  both.trace_path = "trace.safetensors";
  test::expect_input_error([&] { export_plan(ExportTarget::chakra, t.input(), both); }, {"not both"});
  test::expect_input_error(
      [&] { export_plan(ExportTarget::chakra, t.input(), options_with_durations("/no/such/durations.json")); },
      {"/no/such/durations.json"});
}

}  // namespace
}  // namespace sparsering
