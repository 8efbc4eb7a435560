// The recall-style ("flex") MInference pattern config that expresses a plan's top-p recall and caps
// for MTraining. MTraining (microsoft/MInference, branch wenxuan/mtrain, commit
// f74982d3f46d32d1a421a102c187b6ba2da434cd) loads `<pattern_config_name>.json` from MInference's
// minference/configs/ (mtraining/train.py); the file is a list with one object per layer mapping
// each query-head index ("0", "1", ...) to ["flex_vertical_and_slash", [recall, max verticals],
// [recall, max slashes], 0.0]. When both budgets are [p, size] pairs, calc_index
// (minference/ops/op_utils/vertical_slash_utils.py) keeps, per head, the smallest set of vertical
// columns and of slash offsets whose softmax mass over the last queries reaches p, at most `size`
// of each. MInference ships such configs for Qwen2.5-3B at 0.95 and 0.90 with caps of 4096.
// Tested in tests/tuner/mtraining_pattern_config_test.cpp.
#pragma once

#include <string>

#include "sim/config/model_config.hpp"
#include "sim/config/plan_config.hpp"

namespace sparsering {

/// The pattern type MTraining's flex configs name for a recall-selected vertical-slash head.
inline constexpr const char* kFlexPatternType = "flex_vertical_and_slash";

/// The name of the flex config MInference ships for this model, recall and caps (e.g.
/// "Qwen2.5_3B_flex_0.95"), or "" when it ships none.
std::string shipped_flex_pattern_config(const PlanConfig& plan, const ModelConfig& model);

/// The pattern config name of the plan's recall and caps: the shipped one when it exists,
/// otherwise "sparsering_<model>_flex_<recall>_v<max verticals>_s<max slashes>".
std::string flex_pattern_config_name(const PlanConfig& plan, const ModelConfig& model);

/// The flex config's JSON text: model.layers objects of model.q_heads entries, each
/// [kFlexPatternType, [recall, max_verticals], [recall, max_slashes], 0.0].
std::string flex_pattern_config_json(const PlanConfig& plan, const ModelConfig& model);

}  // namespace sparsering
