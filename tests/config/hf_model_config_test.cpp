// Hugging Face config.json as a model config (sim/config/hf_model_config.hpp): config.json files
// matching the published Qwen2.5-3B and Llama-3.1-8B give the same ModelConfig as the shipped
// YAMLs for every field config.json carries; a YAML with hf_config adds what it lacks; missing or
// ill-typed fields and unsupported architectures are refused naming the file and the field.
#include "sim/config/hf_model_config.hpp"

#include <gtest/gtest.h>

#include <string>

#include "common/error.hpp"
#include "sim/config/config_ref.hpp"
#include "sim/config/model_config.hpp"
#include "tests/config/config_test_util.hpp"

namespace sparsering {
namespace {

const std::filesystem::path kModels = std::filesystem::path(SPARSERING_SOURCE_DIR) / "configs" / "models";
const std::filesystem::path kHf = std::filesystem::path(SPARSERING_SOURCE_DIR) / "tests" / "config" / "hf";

void expect_same_shared_fields(const ModelConfig& from_hf, const ModelConfig& from_yaml) {
  EXPECT_EQ(from_hf.layers, from_yaml.layers);
  EXPECT_EQ(from_hf.hidden_size, from_yaml.hidden_size);
  EXPECT_EQ(from_hf.ffn_hidden_size, from_yaml.ffn_hidden_size);
  EXPECT_EQ(from_hf.q_heads, from_yaml.q_heads);
  EXPECT_EQ(from_hf.kv_heads, from_yaml.kv_heads);
  EXPECT_EQ(from_hf.head_dim, from_yaml.head_dim);
  EXPECT_EQ(from_hf.vocab_size, from_yaml.vocab_size);
  EXPECT_EQ(from_hf.tied_embeddings, from_yaml.tied_embeddings);
  EXPECT_EQ(from_hf.qkv_bias, from_yaml.qkv_bias);
  EXPECT_EQ(from_hf.norm, from_yaml.norm);
  EXPECT_EQ(from_hf.activation, from_yaml.activation);
  EXPECT_EQ(from_hf.hidden_is_heads_x_head_dim, from_yaml.hidden_is_heads_x_head_dim);
  EXPECT_EQ(from_hf.bytes_per_param, from_yaml.bytes_per_param);
  EXPECT_DOUBLE_EQ(from_hf.rope_theta, from_yaml.rope_theta);
  EXPECT_EQ(from_hf.max_position_tokens, from_yaml.max_position_tokens);
  EXPECT_EQ(from_hf.parameter_count(), from_yaml.parameter_count());
}

TEST(HfModelConfig, Qwen25MatchesShippedYaml) {
  const ModelConfig hf = load_model(kHf / "qwen2.5-3b" / "config.json");
  expect_same_shared_fields(hf, load_model(kModels / "qwen2.5-3b.yaml"));
  EXPECT_EQ(hf.name, "qwen2");
  EXPECT_TRUE(hf.sparsity_prior.empty());
  EXPECT_EQ(hf.source_path, kHf / "qwen2.5-3b" / "config.json");
}

TEST(HfModelConfig, Llama31MatchesShippedYamlFromFolder) {
  const ModelConfig hf = load_model(kHf / "llama-3.1-8b");
  expect_same_shared_fields(hf, load_model(kModels / "llama-3.1-8b.yaml"));
  EXPECT_EQ(hf.name, "llama");
  EXPECT_EQ(hf.source_path, kHf / "llama-3.1-8b" / "config.json");
}

TEST(HfModelConfig, YamlOverlayAddsWhatConfigJsonLacks) {
  const ModelConfig overlay = load_model(kHf / "qwen2.5-3b-overlay.yaml");
  const ModelConfig shipped = load_model(kModels / "qwen2.5-3b.yaml");
  expect_same_shared_fields(overlay, shipped);
  EXPECT_EQ(overlay.name, shipped.name);
  EXPECT_EQ(overlay.hf_model_id, shipped.hf_model_id);
  EXPECT_EQ(overlay.sparsity_prior, shipped.sparsity_prior);
}

TEST(HfModelConfig, YamlOverlayOverridesAField) {
  const std::string yaml = "hf_config: " + (kHf / "llama-3.1-8b").string() + "\nname: short\nmax_position_tokens: 8192\n";
  const ModelConfig model = parse_model(yaml, "<string>");
  EXPECT_EQ(model.name, "short");
  EXPECT_EQ(model.max_position_tokens, 8192);
  EXPECT_EQ(model.layers, 32);
}

TEST(HfModelConfig, JsonIsAPathReference) {
  EXPECT_TRUE(is_path_ref("config.json"));
  EXPECT_TRUE(is_hf_config_path("config.json"));
  EXPECT_TRUE(is_hf_config_path(kHf / "qwen2.5-3b"));
  EXPECT_FALSE(is_hf_config_path(kModels / "qwen2.5-3b.yaml"));
}

const std::string kTiny = R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"],
  "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 512,
  "vocab_size": 1000})";

TEST(HfModelConfig, DefaultsForAbsentOptionalFields) {
  const ModelConfig model = parse_hf_config(kTiny, "tiny.json");
  EXPECT_EQ(model.kv_heads, 4);  // num_key_value_heads absent: one KV head per query head
  EXPECT_EQ(model.head_dim, 64);
  EXPECT_FALSE(model.tied_embeddings);
  EXPECT_FALSE(model.qkv_bias);
  EXPECT_EQ(model.bytes_per_param, 2);
  EXPECT_DOUBLE_EQ(model.rope_theta, 10000.0);
  EXPECT_EQ(model.max_position_tokens, 0);
}

TEST(HfModelConfig, ExplicitHeadDimMayDifferFromHiddenOverHeads) {
  const std::string json = R"({"model_type": "qwen3", "num_hidden_layers": 2, "hidden_size": 256,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": 512,
    "vocab_size": 1000, "torch_dtype": "float32"})";
  const ModelConfig model = parse_hf_config(json, "qwen3.json");
  EXPECT_EQ(model.head_dim, 128);
  EXPECT_FALSE(model.hidden_is_heads_x_head_dim);
  EXPECT_EQ(model.bytes_per_param, 4);
}

std::string with_field(const std::string& field, const std::string& value) {
  std::string json = kTiny;
  json.insert(json.size() - 1, ", \"" + field + "\": " + value);
  return json;
}

TEST(HfModelConfig, RefusesMissingAndIllTypedFields) {
  test::expect_input_error([] { load_model(kHf / "bad" / "missing-layers.json"); },
                           {"missing-layers.json", "num_hidden_layers", "missing"});
  test::expect_input_error([] { parse_hf_config(R"({"model_type": "llama", "num_hidden_layers": "2"})", "a.json"); },
                           {"a.json", "num_hidden_layers", "integer"});
  test::expect_input_error([] { parse_hf_config(with_field("tie_word_embeddings", "1"), "b.json"); },
                           {"b.json", "tie_word_embeddings"});
  test::expect_input_error([] { parse_hf_config(with_field("torch_dtype", "\"int8\""), "c.json"); },
                           {"c.json", "torch_dtype", "int8"});
  test::expect_input_error([] { parse_hf_config(with_field("num_key_value_heads", "3"), "d.json"); },
                           {"d.json", "kv_heads"});
  test::expect_input_error([] { parse_hf_config("[1, 2]", "e.json"); }, {"e.json", "JSON object"});
  test::expect_input_error([] { parse_hf_config("{", "f.json"); }, {"f.json", "not valid JSON"});
  test::expect_input_error([] { load_model(kHf / "no-such-model"); }, {"no-such-model"});
}

TEST(HfModelConfig, RefusesUnsupportedArchitectures) {
  test::expect_input_error([] { load_model(kHf / "bad" / "t5-encoder-decoder.json"); },
                           {"t5-encoder-decoder.json", "encoder-decoder"});
  test::expect_input_error([] { load_model(kHf / "bad" / "mixtral-moe.json"); },
                           {"mixtral-moe.json", "num_local_experts", "mixture-of-experts"});
  test::expect_input_error([] { parse_hf_config(with_field("hidden_act", "\"relu2\""), "g.json"); },
                           {"g.json", "hidden_act", "relu2"});
  std::string gpt2 = kTiny;
  gpt2.replace(gpt2.find("\"llama\""), 7, "\"gpt2\"");
  test::expect_input_error([&] { parse_hf_config(gpt2, "h.json"); }, {"h.json", "model_type", "gpt2"});
}

}  // namespace
}  // namespace sparsering
