// Export to MTraining (microsoft/MInference, mtraining/): mtraining_attn.yaml
// {pattern_config_name, implementation: stripe | zigzag | dr_stripe, granularity}, the token
// permutation of the layout MTraining runs, and rank_map.json when its consecutive-rank rings
// differ from the plan's ring order. Tested in tests/tuner/framework_exports_test.cpp.
#pragma once

#include <string>

#include "tuner/export/export_bundle.hpp"
#include "tuner/export/export_target.hpp"

namespace sparsering {

/// The MInference pattern config published for a model config name (e.g. "qwen2.5-3b" ->
/// "Qwen2.5_3B_kv_out_v32_fit_o_best_pattern"), or "" when none is known.
std::string known_pattern_config(const std::string& model_name);

/// Builds the MTraining export. options.pattern_config_name overrides the known pattern config;
/// InputError when neither exists, or for a plan that fails check_export_input.
ExportBundle export_mtraining(const ExportInput& input, const ExportOptions& options);

}  // namespace sparsering
