// The export targets of `sparsering export --to ...`, their names, and the options and inputs every
// exporter receives. Tested in tests/tuner/export_plan_test.cpp and
// tests/tuner/framework_exports_test.cpp (torchtitan formats).
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

/// The file torchtitan receives (`--torchtitan-format`).
enum class TorchtitanFormat : int32_t {
  python = 0,     ///< torchtitan_config.py: sets the fields of a Trainer.Config (current torchtitan)
  toml_v0_2 = 1,  ///< torchtitan.toml: the job-config TOML of torchtitan up to v0.2.2
};

/// "python" or "toml-v0.2".
std::string_view to_string(TorchtitanFormat format);
/// Parses a torchtitan format name; throws InputError listing the choices.
TorchtitanFormat parse_torchtitan_format(std::string_view name);

/// Target-specific options (CLI flags of `sparsering export`).
struct ExportOptions {
  /// chakra: simulator step durations (JSON, schema in tuner/export/chakra/step_durations.hpp);
  /// empty = simulate the plan in-process (trace_path).
  std::filesystem::path durations_path;
  /// chakra without durations_path: the sparsity trace the in-process simulation reads; empty =
  /// the plan's `trace:` (dense plans need none).
  std::filesystem::path trace_path;
  /// chakra without durations_path: the trace sample whose patterns are simulated.
  int64_t trace_sample = 0;
  /// torchtitan: which config form to write.
  TorchtitanFormat torchtitan_format = TorchtitanFormat::python;
  /// chakra: attention layers to chain in each rank's trace (forward 0..L-1, then backward L-1..0);
  /// 0 = every layer the durations hold.
  int64_t chakra_layers = 0;
  /// mtraining: MInference pattern config name (per-head budgets); empty = derived from the model name.
  std::string pattern_config_name;
};

}  // namespace sparsering
