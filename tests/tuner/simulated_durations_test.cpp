// The Chakra export's in-process simulation (tuner/export/chakra/simulated_durations.hpp): its
// durations equal those read back from `simulate --out`'s result.json, the export needs no
// durations file for a dense plan, and a sparse plan without a trace is refused.
#include "tuner/export/chakra/simulated_durations.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "export_test_util.hpp"
#include "sim/output/result_json.hpp"
#include "tuner/export/export_plan.hpp"

namespace sparsering {
namespace {

// A hierarchical 2 x 2 ring on the test cluster, Qwen2.5-3B, dense or sparse.
std::filesystem::path write_plan(const std::filesystem::path& dir, bool sparse) {
  const std::string source = SPARSERING_SOURCE_DIR;
  const auto path = dir / (sparse ? "sparse.yaml" : "dense.yaml");
  std::ofstream(path) << "name: chakra-sim\nmodel: " << source << "/configs/models/qwen2.5-3b.yaml\ncluster: " << source
                      << "/tests/tuner/data/clusters/test-2x2.yaml\nseq_len_tokens: 1024\ncontext_parallel: 4\n"
                      << "ring:\n  levels:\n    - {size: 2, link: nvlink}\n    - {size: 2, link: infiniband}\n"
                      << "layout:\n  kind: zigzag\nsparse:\n  enabled: " << (sparse ? "true" : "false") << "\n";
  return path;
}

class SimulatedDurations : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("sparsering_sim_durations_" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(SimulatedDurations, EqualTheSimulationResultFile) {
  const LoadedPlan loaded = load_plan_with_inputs(write_plan(dir_, false));
  SimulationOptions options;
  options.keep_ring_records = true;
  SimulationContext context;
  const SimulationResult result = simulate(context, loaded.plan, loaded.model, loaded.cluster, nullptr, options);
  const StepDurations direct = step_durations_from_simulation(result, loaded.plan);
  const StepDurations via_file = parse_step_durations(result_to_json(result).dump(), "result.json", loaded.plan);
  ASSERT_EQ(direct.forward_ns.size(), static_cast<size_t>(loaded.model.layers));
  EXPECT_EQ(direct.forward_ns, via_file.forward_ns);
  EXPECT_EQ(direct.backward_ns, via_file.backward_ns);
  EXPECT_FALSE(direct.backward_ns.empty());
  int64_t total = 0;
  for (const auto& row : direct.forward_ns.front()) {
    for (const int64_t ns : row) total += ns;
  }
  EXPECT_GT(total, 0);

  SimulationResult without_records = result;
  without_records.rings.clear();
  test::expect_input_error([&] { step_durations_from_simulation(without_records, loaded.plan); }, {"ring records"});
}

TEST_F(SimulatedDurations, ChakraExportSimulatesADensePlanItself) {
  const LoadedPlan loaded = load_plan_with_inputs(write_plan(dir_, false));
  ExportOptions options;
  options.chakra_layers = 2;
  const ExportBundle bundle =
      export_plan(ExportTarget::chakra, ExportInput{loaded.plan, loaded.model, loaded.cluster}, options);
  for (int64_t g = 0; g < loaded.plan.world_size(); ++g) {
    EXPECT_NE(bundle.find("chakra/trace." + std::to_string(g) + ".et"), nullptr) << g;
  }
  EXPECT_NE(bundle.find("chakra/comm_group.json"), nullptr);
}

TEST_F(SimulatedDurations, SparsePlanNeedsATrace) {
  const LoadedPlan loaded = load_plan_with_inputs(write_plan(dir_, true));
  const ExportInput input{loaded.plan, loaded.model, loaded.cluster};
  test::expect_input_error([&] { simulate_step_durations(input, "", 0); }, {"sparse", "--trace", "--durations"});
  test::expect_input_error([&] { simulate_step_durations(input, dir_ / "missing.safetensors", 0); },
                           {"missing.safetensors"});
  test::expect_input_error([&] { simulate_step_durations(input, "", -1); }, {"--sample"});
}

}  // namespace
}  // namespace sparsering
