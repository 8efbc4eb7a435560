// Model config parsing and derived counts; a Hugging Face config.json (a path ending in ".json" or a
// model folder), or a YAML naming one with `hf_config:`, goes through sim/config/hf_model_config.hpp. The per-field caps keep every derived product (parameter
// counts, KV bytes) far inside int64 range whatever the input, so no later arithmetic can overflow.
#include "sim/config/model_config.hpp"

#include "common/error.hpp"
#include "common/input_file.hpp"
#include "common/yaml_reader.hpp"
#include "sim/config/hf_model_config.hpp"

namespace sparsering {
namespace {

// Sanity caps (2^12 layers/heads, 2^20 width, 2^24 FFN width, 2^27 vocabulary): with them the
// largest product, layers x 3 x hidden x ffn, stays below 2^62.
constexpr int64_t kMaxLayers = int64_t{1} << 12;
constexpr int64_t kMaxHeads = int64_t{1} << 12;
constexpr int64_t kMaxHeadDim = int64_t{1} << 12;
constexpr int64_t kMaxHidden = int64_t{1} << 20;
constexpr int64_t kMaxFfn = int64_t{1} << 24;
constexpr int64_t kMaxVocab = int64_t{1} << 27;
constexpr int64_t kMaxPositions = int64_t{1} << 40;

/// A model YAML with `hf_config: <path>` (relative to the YAML's folder): the keys config.json
/// gives, overridden by every other key of the YAML. Any other document is returned as it is.
YAML::Node with_hf_config(const YAML::Node& root, std::string_view source_name) {
  if (!root.IsMap() || !root["hf_config"]) return root;
  const std::string ref = yaml::to_string(root["hf_config"], "model.hf_config");
  std::filesystem::path path{ref};
  if (!path.is_absolute()) path = std::filesystem::path(source_name).parent_path() / path;
  const std::filesystem::path file = hf_config_file(path.lexically_normal());
  YAML::Node merged = hf_config_to_model_node(read_file(file, static_cast<int64_t>(yaml::kMaxDocumentBytes)),
                                              file.string());
  for (const auto& entry : root) {
    const std::string key = entry.first.as<std::string>();
    if (key != "hf_config") merged[key] = entry.second;
  }
  return merged;
}

ModelConfig build_model(const YAML::Node& root) {
  yaml::MapReader map(root, "model");
  ModelConfig model;
  model.name = map.required_name("name");
  model.hf_model_id = map.optional_string("hf_model_id", "");
  model.layers = map.required_int("layers", 1, kMaxLayers);
  model.hidden_size = map.required_int("hidden_size", 1, kMaxHidden);
  model.ffn_hidden_size = map.required_int("ffn_hidden_size", 1, kMaxFfn);
  model.q_heads = map.required_int("q_heads", 1, kMaxHeads);
  model.kv_heads = map.required_int("kv_heads", 1, kMaxHeads);
  model.head_dim = map.required_int("head_dim", 1, kMaxHeadDim);
  model.vocab_size = map.required_int("vocab_size", 1, kMaxVocab);
  if (map.has("sparsity_prior")) model.sparsity_prior = yaml::to_name(map.required("sparsity_prior"), "model.sparsity_prior");
  model.tied_embeddings = map.optional_bool("tied_embeddings", false);
  model.qkv_bias = map.optional_bool("qkv_bias", false);
  model.norm = map.optional_choice("norm", "rmsnorm", {"rmsnorm", "layernorm"}) == "rmsnorm" ? NormKind::rmsnorm
                                                                                            : NormKind::layernorm;
  const std::string activation = map.optional_choice("activation", "swiglu", {"swiglu", "geglu", "gelu", "relu"});
  model.activation = activation == "swiglu"  ? MlpActivation::swiglu
                     : activation == "geglu" ? MlpActivation::geglu
                     : activation == "gelu"  ? MlpActivation::gelu
                                             : MlpActivation::relu;
  model.hidden_is_heads_x_head_dim = map.optional_bool("hidden_is_heads_x_head_dim", true);
  model.bytes_per_param = map.optional_int("bytes_per_param", 2, 1, 8);
  model.rope_theta = map.optional_number("rope_theta", 10000.0, yaml::NumberBounds::positive());
  model.max_position_tokens = map.optional_int("max_position_tokens", 0, 0, kMaxPositions);
  map.finish();

  require(model.q_heads % model.kv_heads == 0, "model.kv_heads (", model.kv_heads, ") must divide model.q_heads (",
          model.q_heads, ")");
  if (model.hidden_is_heads_x_head_dim) {
    require(model.hidden_size == model.q_heads * model.head_dim, "model.hidden_size (", model.hidden_size,
            ") must equal model.q_heads x model.head_dim = ", model.q_heads, " x ", model.head_dim, " = ",
            model.q_heads * model.head_dim, " (set hidden_is_heads_x_head_dim: false if the model differs)");
  }
  return model;
}

}  // namespace

int64_t ModelConfig::block_parameter_count() const {
  const int64_t q_width = q_heads * head_dim;
  const int64_t kv_width = kv_heads * head_dim;
  const int64_t attention = hidden_size * q_width + 2 * hidden_size * kv_width + q_width * hidden_size +
                            (qkv_bias ? q_width + 2 * kv_width : 0);
  const int64_t mlp = (gated_mlp() ? 3 : 2) * hidden_size * ffn_hidden_size;
  const int64_t norms = 2 * (norm == NormKind::layernorm ? 2 : 1) * hidden_size;
  return attention + mlp + norms;
}

int64_t ModelConfig::embedding_parameter_count() const {
  return (tied_embeddings ? 1 : 2) * vocab_size * hidden_size;
}

int64_t ModelConfig::non_embedding_parameter_count() const {
  const int64_t final_norm = (norm == NormKind::layernorm ? 2 : 1) * hidden_size;
  return layers * block_parameter_count() + final_norm;
}

int64_t ModelConfig::parameter_count() const { return non_embedding_parameter_count() + embedding_parameter_count(); }

int64_t ModelConfig::kv_bytes_per_token_per_layer() const { return 2 * kv_heads * head_dim * bytes_per_param; }

ModelConfig parse_model(const std::string& yaml_text, std::string_view source_name) {
  const YAML::Node root = yaml::parse_document(yaml_text, source_name);
  return yaml::with_source(source_name, [&] { return build_model(with_hf_config(root, source_name)); });
}

ModelConfig load_model(const std::filesystem::path& path) {
  if (is_hf_config_path(path)) return load_hf_config(path);
  ModelConfig model = parse_model(yaml::read_config_file(path), path.string());
  model.source_path = path;
  return model;
}

std::filesystem::path sparsity_prior_path(const ModelConfig& model) {
  require(!model.sparsity_prior.empty(), "model ", model.name, " names no sparsity_prior");
  const std::filesystem::path folder = model.source_path.empty()
                                           ? std::filesystem::path("configs") / "sparsity"
                                           : model.source_path.parent_path() / ".." / "sparsity";
  return (folder / (model.sparsity_prior + ".yaml")).lexically_normal();
}

std::string_view to_string(NormKind kind) { return kind == NormKind::rmsnorm ? "rmsnorm" : "layernorm"; }

std::string_view to_string(MlpActivation activation) {
  switch (activation) {
    case MlpActivation::swiglu: return "swiglu";
    case MlpActivation::geglu: return "geglu";
    case MlpActivation::gelu: return "gelu";
    case MlpActivation::relu: return "relu";
  }
  return "unknown";
}

}  // namespace sparsering
