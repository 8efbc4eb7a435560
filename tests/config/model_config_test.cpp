// Model configs: the shipped files parse and their parameter counts match the published model-card
// figures; every validation rule rejects a bad value with a message naming the key path and value.
#include "sim/config/model_config.hpp"

#include <gtest/gtest.h>

#include <string>

#include "common/error.hpp"
#include "tests/config/config_test_util.hpp"

namespace sparsering {
namespace {

const std::filesystem::path kModels = std::filesystem::path(SPARSERING_SOURCE_DIR) / "configs" / "models";

const std::string kMinimal = R"(name: tiny
layers: 2
hidden_size: 256
ffn_hidden_size: 512
q_heads: 4
kv_heads: 2
head_dim: 64
vocab_size: 1000
)";

TEST(ModelConfig, ParsesMinimalWithDefaults) {
  const ModelConfig model = parse_model(kMinimal, "tiny.yaml");
  EXPECT_EQ(model.name, "tiny");
  EXPECT_EQ(model.layers, 2);
  EXPECT_EQ(model.kv_group_size(), 2);
  EXPECT_TRUE(model.sparsity_prior.empty());
  EXPECT_TRUE(model.source_path.empty());
  EXPECT_EQ(model.norm, NormKind::rmsnorm);
  EXPECT_EQ(model.activation, MlpActivation::swiglu);
  EXPECT_EQ(model.bytes_per_param, 2);
  EXPECT_FALSE(model.tied_embeddings);
  // Hand count: attention 256*256*2 + 2*256*128 = 196608; MLP 3*256*512 = 393216; norms 512.
  EXPECT_EQ(model.block_parameter_count(), 196608 + 393216 + 512);
  EXPECT_EQ(model.embedding_parameter_count(), 2 * 1000 * 256);
  EXPECT_EQ(model.parameter_count(), 2 * (196608 + 393216 + 512) + 256 + 2 * 1000 * 256);
  EXPECT_EQ(model.kv_bytes_per_token_per_layer(), 2 * 2 * 64 * 2);
}

TEST(ModelConfig, ShippedModelsMatchPublishedParameterCounts) {
  struct Expected {
    const char* file;
    double total_billions;
    double non_embedding_billions;  // 0 = not published
    double half_last_digit;         // the published figures are rounded to this
  };
  // Model cards: Qwen2.5-3B 3.09B / 2.77B, Qwen2.5-7B 7.61B / 6.53B, Llama 3.1 8B 8.03B, 70B 70.6B.
  // The Qwen2.5-7B card truncates 7.6156B to 7.61B, hence its wider tolerance.
  for (const Expected& e :
       {Expected{"qwen2.5-3b.yaml", 3.09, 2.77, 0.005}, Expected{"qwen2.5-7b.yaml", 7.61, 6.53, 0.01},
        Expected{"llama-3.1-8b.yaml", 8.03, 0.0, 0.005}, Expected{"llama-3.1-70b.yaml", 70.6, 0.0, 0.05}}) {
    const ModelConfig model = load_model(kModels / e.file);
    EXPECT_EQ(model.source_path, kModels / e.file);
    EXPECT_NEAR(static_cast<double>(model.parameter_count()) / 1e9, e.total_billions, e.half_last_digit) << e.file;
    if (e.non_embedding_billions > 0) {
      EXPECT_NEAR(static_cast<double>(model.non_embedding_parameter_count()) / 1e9, e.non_embedding_billions, e.half_last_digit)
          << e.file;
    }
    EXPECT_FALSE(model.sparsity_prior.empty()) << e.file;
  }
}

TEST(ModelConfig, SparsityPriorPathIsBesideTheModelsFolder) {
  const ModelConfig model = load_model(kModels / "llama-3.1-70b.yaml");
  EXPECT_EQ(model.sparsity_prior, "llama-3.1-8b");
  EXPECT_EQ(sparsity_prior_path(model),
            (std::filesystem::path(SPARSERING_SOURCE_DIR) / "configs" / "sparsity" / "llama-3.1-8b.yaml").lexically_normal());
  EXPECT_THROW(sparsity_prior_path(parse_model(kMinimal, "tiny.yaml")), InputError);
}

TEST(ModelConfig, ShippedModelsNameAnExistingSparsityPrior) {
  for (const auto& entry : std::filesystem::directory_iterator(kModels)) {
    if (entry.path().extension() != ".yaml") continue;
    const ModelConfig model = load_model(entry.path());
    EXPECT_TRUE(std::filesystem::exists(sparsity_prior_path(model))) << entry.path() << " -> " << sparsity_prior_path(model);
  }
}

TEST(ModelConfig, RejectsBadValuesNamingKeyPathAndValue) {
  using test::expect_input_error;
  expect_input_error([&] { parse_model(test::with_value(kMinimal, "layers", "abc"), "m.yaml"); },
                     {"m.yaml: ", "model.layers must be an integer in [1, 4096]", "got \"abc\""});
  expect_input_error([&] { parse_model(test::with_value(kMinimal, "layers", "0"), "m.yaml"); },
                     {"model.layers", "got 0"});
  expect_input_error([&] { parse_model(test::with_value(kMinimal, "layers", "1.5"), "m.yaml"); },
                     {"model.layers", "got 1.5"});
  expect_input_error([&] { parse_model(test::with_value(kMinimal, "layers", "99999999999999999999999"), "m.yaml"); },
                     {"model.layers", "99999999999999999999999"});
  expect_input_error([&] { parse_model(test::with_value(kMinimal, "layers", "[1, 2]"), "m.yaml"); },
                     {"model.layers", "got a sequence"});
  expect_input_error([&] { parse_model(test::with_value(kMinimal, "kv_heads", "3"), "m.yaml"); },
                     {"model.kv_heads (3)", "model.q_heads (4)"});
  expect_input_error([&] { parse_model(test::with_value(kMinimal, "hidden_size", "300"), "m.yaml"); },
                     {"model.hidden_size (300)", "4 x 64 = 256"});
  expect_input_error([&] { parse_model(test::with_value(kMinimal, "name", "../etc/passwd"), "m.yaml"); },
                     {"model.name", "../etc/passwd"});
  expect_input_error([&] { parse_model(kMinimal + "rope_theta: .nan\n", "m.yaml"); }, {"model.rope_theta", ".nan"});
  expect_input_error([&] { parse_model(kMinimal + "rope_theta: -1\n", "m.yaml"); },
                     {"model.rope_theta must be > 0, got -1"});
  expect_input_error([&] { parse_model(kMinimal + "norm: batchnorm\n", "m.yaml"); },
                     {"model.norm must be one of rmsnorm, layernorm", "batchnorm"});
  expect_input_error([&] { parse_model(kMinimal + "tied_embeddings: maybe\n", "m.yaml"); },
                     {"model.tied_embeddings must be true or false", "maybe"});
  expect_input_error([&] { parse_model(kMinimal + "layres: 3\n", "m.yaml"); },
                     {"unknown key model.layres", "did you mean layers?", "valid keys: name"});
  expect_input_error([&] { parse_model(test::without_key(kMinimal, "vocab_size"), "m.yaml"); },
                     {"model.vocab_size is required"});
  expect_input_error([&] { parse_model("- 1\n- 2\n", "m.yaml"); }, {"model must be a mapping, got a sequence"});
  expect_input_error([&] { parse_model("", "m.yaml"); }, {"model must be a mapping, got null"});
}

TEST(ModelConfig, HiddenMayDifferFromHeadsWhenTheModelSaysSo) {
  const std::string text = test::with_value(kMinimal, "hidden_size", "300") + "hidden_is_heads_x_head_dim: false\n";
  EXPECT_EQ(parse_model(text, "m.yaml").hidden_size, 300);
}

TEST(ModelConfig, LoadNamesAMissingFile) {
  test::expect_input_error([&] { load_model("/nonexistent/model.yaml"); }, {"/nonexistent/model.yaml"});
}

}  // namespace
}  // namespace sparsering
