// The flex pattern config of the MTraining export: MInference's shipped names for Qwen2.5-3B at
// recall 0.95 and 0.90 (caps 4096), generated names otherwise, and the file's shape (one object
// per layer, one entry per query head, [type, [recall, cap], [recall, cap], 0.0]).
#include "tuner/export/mtraining_pattern_config.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace sparsering {
namespace {

ModelConfig qwen_like() {
  ModelConfig model;
  model.name = "qwen2.5-3b";
  model.layers = 36;
  model.q_heads = 16;
  model.kv_heads = 2;
  return model;
}

TEST(MTrainingPatternConfig, ShippedNamesForQwenAtItsTwoRecalls) {
  PlanConfig plan;
  const ModelConfig model = qwen_like();
  plan.sparse.recall = 0.95;
  EXPECT_EQ(flex_pattern_config_name(plan, model), "Qwen2.5_3B_flex_0.95");
  plan.sparse.recall = 0.90;
  EXPECT_EQ(shipped_flex_pattern_config(plan, model), "Qwen2.5_3B_flex_0.90");
  plan.sparse.recall = 0.925;
  EXPECT_EQ(shipped_flex_pattern_config(plan, model), "");
  EXPECT_EQ(flex_pattern_config_name(plan, model), "sparsering_qwen2.5-3b_flex_0.925_v4096_s4096");
  plan.sparse.recall = 0.95;
  plan.sparse.max_slashes = 2048;
  EXPECT_EQ(flex_pattern_config_name(plan, model), "sparsering_qwen2.5-3b_flex_0.95_v4096_s2048");
  ModelConfig other = model;
  other.name = "llama-3.1-8b";
  plan.sparse.max_slashes = 4096;
  EXPECT_EQ(flex_pattern_config_name(plan, other), "sparsering_llama-3.1-8b_flex_0.95_v4096_s4096");
}

TEST(MTrainingPatternConfig, OneEntryPerLayerAndQueryHead) {
  PlanConfig plan;
  plan.sparse.recall = 0.9;
  plan.sparse.max_verticals = 1000;
  plan.sparse.max_slashes = 3000;
  const auto doc = nlohmann::json::parse(flex_pattern_config_json(plan, qwen_like()));
  ASSERT_TRUE(doc.is_array());
  ASSERT_EQ(doc.size(), 36u);
  for (const auto& layer : doc) {
    ASSERT_EQ(layer.size(), 16u);
    for (int h = 0; h < 16; ++h) {
      const auto& entry = layer.at(std::to_string(h));
      EXPECT_EQ(entry[0], kFlexPatternType);
      EXPECT_EQ(entry[1], nlohmann::json::parse("[0.9, 1000]"));
      EXPECT_EQ(entry[2], nlohmann::json::parse("[0.9, 3000]"));
      EXPECT_EQ(entry[3], 0.0);
    }
  }
}

}  // namespace
}  // namespace sparsering
