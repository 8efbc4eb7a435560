// libFuzzer target for the config parsers (models, GPUs, clusters, plans). Every input is given to
// all four parsers, so the shipped configs/ files seed it as they are. Bad input must end in
// InputError; any other exception, crash, hang or sanitizer report is a bug. Accepted configs are
// also re-emitted and queried so the emitters and derived lookups run too. Built by
// tests/fuzz/CMakeLists.txt (preset fuzz), seeded with configs/{models,gpus,clusters,plans} and the
// hostile plans and clusters of tests/cli/data.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/error.hpp"
#include "sim/config/cluster_config.hpp"
#include "sim/config/gpu_config.hpp"
#include "sim/config/model_config.hpp"
#include "sim/config/plan_config.hpp"

namespace {

void exercise(int parser, const std::string& text) {
  using namespace sparsering;
  switch (parser) {
    case 0: {
      const ModelConfig model = parse_model(text, "fuzz-model.yaml");
      (void)model.parameter_count();
      (void)model.kv_bytes_per_token_per_layer();
      break;
    }
    case 1: {
      const GpuConfig gpu = parse_gpu(text, "fuzz-gpu.yaml");
      (void)parse_gpu(write_gpu_yaml(gpu), "fuzz-gpu-again.yaml");
      if (gpu.calibration) (void)set_gpu_calibration(text, *gpu.calibration, "fuzz-gpu-set.yaml");
      break;
    }
    case 2: {
      const ClusterConfig cluster = parse_cluster(text, "fuzz-cluster.yaml");
      const int64_t last = cluster.world_size() - 1;
      (void)cluster.link(0, last);
      (void)cluster.link(last, last / 2);
      break;
    }
    default: {
      const PlanConfig plan = parse_plan(text, "fuzz-plan.yaml");
      (void)parse_plan(write_plan_yaml(plan), "fuzz-plan-again.yaml");
      for (size_t level = 0; level < plan.ring_levels.size(); ++level) (void)plan.next_position(0, level);
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (int parser = 0; parser < 4; ++parser) {
    try {
      exercise(parser, text);
    } catch (const sparsering::InputError&) {
      // Rejected with a message: the expected outcome for bad input.
    }
  }
  return 0;
}
