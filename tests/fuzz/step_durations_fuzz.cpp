// libFuzzer target for the Chakra exporter's step-durations reader
// (tuner/export/chakra/step_durations.hpp): both schemas (sparsering-step-durations and a
// simulation's result.json) against a flat 2-rank plan and a 32-rank two-level plan. Bad input
// must end in InputError; anything else (another exception, crash, sanitizer report) is a bug.
// Accepted durations must have one row of context_parallel steps per global rank. Built by
// tests/fuzz/CMakeLists.txt (preset fuzz), seeded with tests/fuzz/corpus/step_durations_fuzz.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/input_file.hpp"
#include "sim/config/plan_config.hpp"
#include "tuner/export/chakra/step_durations.hpp"

namespace {

const std::vector<sparsering::PlanConfig>& plans() {
  static const std::vector<sparsering::PlanConfig> shipped = [] {
    const std::string root = std::string(SPARSERING_SOURCE_DIR) + "/tests/golden/data/";
    std::vector<sparsering::PlanConfig> out;
    for (const char* name : {"qwen2.5-3b-32k-h200x2-striped.yaml", "qwen2.5-3b-32k-mtraining-zigzag-hier.yaml"}) {
      out.push_back(sparsering::parse_plan(sparsering::read_file(root + name), name));
    }
    return out;
  }();
  return shipped;
}

void check_shape(const std::vector<sparsering::StepMatrix>& passes, const sparsering::PlanConfig& plan) {
  for (const sparsering::StepMatrix& matrix : passes) {
    if (static_cast<int64_t>(matrix.size()) != plan.world_size()) std::abort();
    for (const auto& row : matrix) {
      if (static_cast<int64_t>(row.size()) != plan.context_parallel) std::abort();
      for (const int64_t ns : row) {
        if (ns < 0) std::abort();
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sparsering;
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const PlanConfig& plan : plans()) {
    try {
      const StepDurations durations = parse_step_durations(text, "fuzz-durations.json", plan);
      if (durations.forward_ns.empty()) std::abort();
      check_shape(durations.forward_ns, plan);
      check_shape(durations.backward_ns, plan);
    } catch (const InputError&) {
      // Rejected with a message: the expected outcome for bad input.
    }
  }
  return 0;
}
