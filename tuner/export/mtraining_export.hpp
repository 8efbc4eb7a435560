// Export to MTraining (microsoft/MInference, branch wenxuan/mtrain, commit
// f74982d3f46d32d1a421a102c187b6ba2da434cd, mtraining/): mtraining_attn.yaml
// {pattern_config_name, implementation: stripe | zigzag | dr_stripe, granularity} as
// mtraining/train.py reads it, for a sparse plan the flex pattern config of its recall and caps
// (minference_configs/<name>.json, mtraining_pattern_config.hpp), the token permutation of the
// layout MTraining runs, and rank_map.json when its consecutive-rank rings differ from the plan's
// ring order. Tested in tests/tuner/framework_exports_test.cpp.
#pragma once

#include <string>

#include "tuner/export/export_bundle.hpp"
#include "tuner/export/export_target.hpp"

namespace sparsering {

/// The MInference pattern config published for a model config name (e.g. "qwen2.5-3b" ->
/// "Qwen2.5_3B_kv_out_v32_fit_o_best_pattern"), or "" when none is known.
std::string known_pattern_config(const std::string& model_name);

/// Builds the MTraining export. A sparse plan gets the flex pattern config of its recall and caps
/// unless options.pattern_config_name names another; a dense plan takes options.pattern_config_name
/// or the known budget config. InputError when a dense plan has neither, or for a plan that fails
/// check_export_input.
ExportBundle export_mtraining(const ExportInput& input, const ExportOptions& options);

}  // namespace sparsering
