#include "tuner/export/mtraining_pattern_config.hpp"

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.hpp"

namespace sparsering {
namespace {

// MInference names its flex configs by the recall with two decimals ("0.95", "0.90").
std::string recall_text(double recall, int digits) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(digits);
  out << recall;
  return out.str();
}

// The shortest decimal that reads back as `recall` (up to 6 digits), for generated names.
std::string short_recall_text(double recall) {
  for (int digits = 2; digits <= 6; ++digits) {
    const std::string text = recall_text(recall, digits);
    if (std::abs(std::stod(text) - recall) < 1e-9) return text;
  }
  return recall_text(recall, 6);
}

}  // namespace

std::string shipped_flex_pattern_config(const PlanConfig& plan, const ModelConfig& model) {
  constexpr int64_t kShippedCap = 4096;
  if (model.name != "qwen2.5-3b" || plan.sparse.max_verticals != kShippedCap ||
      plan.sparse.max_slashes != kShippedCap) {
    return "";
  }
  for (const double shipped : {0.95, 0.90}) {
    if (std::abs(plan.sparse.recall - shipped) < 1e-9) return "Qwen2.5_3B_flex_" + recall_text(shipped, 2);
  }
  return "";
}

std::string flex_pattern_config_name(const PlanConfig& plan, const ModelConfig& model) {
  const std::string shipped = shipped_flex_pattern_config(plan, model);
  if (!shipped.empty()) return shipped;
  return str("sparsering_", model.name, "_flex_", short_recall_text(plan.sparse.recall), "_v",
             plan.sparse.max_verticals, "_s", plan.sparse.max_slashes);
}

std::string flex_pattern_config_json(const PlanConfig& plan, const ModelConfig& model) {
  require(model.layers >= 1 && model.q_heads >= 1, "mtraining pattern config: model ", model.name,
          " needs layers and query heads");
  const nlohmann::json head = {kFlexPatternType,
                               {plan.sparse.recall, plan.sparse.max_verticals},
                               {plan.sparse.recall, plan.sparse.max_slashes},
                               0.0};
  nlohmann::json layer = nlohmann::json::object();
  for (int64_t h = 0; h < model.q_heads; ++h) layer[std::to_string(h)] = head;
  nlohmann::json layers = nlohmann::json::array();
  for (int64_t l = 0; l < model.layers; ++l) layers.push_back(layer);
  return layers.dump(1) + "\n";
}

}  // namespace sparsering
