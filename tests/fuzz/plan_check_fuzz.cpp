// libFuzzer target for the plan parser and its cross-checks: every input goes through parse_plan
// and, when it parses, through check_plan_against with each shipped model and cluster, so the
// rules that relate a plan to its configs (degrees against the cluster, heads against the model,
// ring levels, order, stripe sizes) run on hostile values too. Bad input must end in InputError;
// any other exception, crash, hang or sanitizer report is a bug. Built by tests/fuzz/CMakeLists.txt
// (preset fuzz), seeded with configs/plans and tests/fuzz/corpus/plan_check_fuzz.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "sim/config/cluster_config.hpp"
#include "sim/config/model_config.hpp"
#include "sim/config/plan_config.hpp"

namespace {

struct Shipped {
  std::vector<sparsering::ModelConfig> models;
  std::vector<sparsering::ClusterConfig> clusters;
};

const Shipped& shipped() {
  static const Shipped configs = [] {
    const std::string root = std::string(SPARSERING_SOURCE_DIR) + "/configs/";
    Shipped s;
    for (const char* name : {"qwen2.5-3b", "llama-3.1-8b", "llama-3.1-70b"}) {
      s.models.push_back(sparsering::load_model(root + "models/" + name + ".yaml"));
    }
    for (const char* name : {"h200-2x-nvlink", "h200-8x-nvlink", "mtraining-4x8-a100", "h100-16x8-ndr"}) {
      s.clusters.push_back(sparsering::load_cluster(root + "clusters/" + name + ".yaml"));
    }
    return s;
  }();
  return configs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sparsering;
  const Shipped& configs = shipped();
  const std::string text(reinterpret_cast<const char*>(data), size);
  PlanConfig plan;
  try {
    plan = parse_plan(text, "fuzz-plan.yaml");
  } catch (const InputError&) {
    return 0;  // rejected with a message: the expected outcome for bad input
  }
  for (const ModelConfig& model : configs.models) {
    for (const ClusterConfig& cluster : configs.clusters) {
      try {
        check_plan_against(plan, model, cluster);
      } catch (const InputError&) {
        // A plan that does not fit these configs: expected for most pairs.
      }
    }
  }
  return 0;
}
