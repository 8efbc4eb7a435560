// The export targets of `sparsering export --to ...`, their names, and the options and inputs every
// exporter receives. Tested in tests/tuner/export_plan_test.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/cluster_config.hpp"
#include "sim/config/model_config.hpp"
#include "sim/config/plan_config.hpp"

namespace sparsering {

enum class ExportTarget : int32_t { megatron = 0, te = 1, torchtitan = 2, mtraining = 3, chakra = 4, torch = 5 };

/// "megatron", "te", "torchtitan", "mtraining", "chakra" or "torch".
std::string_view to_string(ExportTarget target);
/// Parses a target name; throws InputError listing the choices.
ExportTarget parse_export_target(std::string_view name);
/// Every target, in the order above.
std::vector<ExportTarget> all_export_targets();

/// A plan with the model and cluster it references (see load_plan_with_inputs).
struct ExportInput {
  const PlanConfig& plan;
  const ModelConfig& model;
  const ClusterConfig& cluster;
};

/// Target-specific options (CLI flags of `sparsering export`).
struct ExportOptions {
  /// chakra: simulator step durations (JSON, schema in tuner/export/chakra/step_durations.hpp);
  /// empty = none.
  std::filesystem::path durations_path;
  /// chakra: attention layers to chain in each rank's trace (forward 0..L-1, then backward L-1..0);
  /// 0 = every layer the durations hold.
  int64_t chakra_layers = 0;
  /// mtraining: MInference pattern config name (per-head budgets); empty = derived from the model name.
  std::string pattern_config_name;
};

}  // namespace sparsering
