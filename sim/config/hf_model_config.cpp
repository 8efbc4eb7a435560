// Hugging Face config.json to model config: each field is checked for presence and type here and
// named as config.json spells it; ranges (caps, kv_heads dividing q_heads) are then checked by the
// model parser on the mapped keys, exactly as for a model YAML.
#include "sim/config/hf_model_config.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>

#include "common/error.hpp"
#include "common/input_file.hpp"
#include "common/yaml_reader.hpp"

namespace sparsering {
namespace {

using nlohmann::json;

/// Decoder families whose config.json describes dense attention the way the simulator models it.
constexpr std::array<std::string_view, 4> kSupportedModelTypes = {"llama", "mistral", "qwen2", "qwen3"};
/// Fields that only mixture-of-experts configs carry.
constexpr std::array<std::string_view, 5> kExpertFields = {"num_experts", "num_local_experts", "n_routed_experts",
                                                           "num_experts_per_tok", "moe_intermediate_size"};

std::string shown(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 48) text = text.substr(0, 45) + "...";
  return text;
}

bool present(const json& doc, const char* field) { return doc.contains(field) && !doc.at(field).is_null(); }

int64_t integer_field(const json& doc, const char* field, int64_t min) {
  require(present(doc, field), "field \"", field, "\" is missing");
  const json& value = doc.at(field);
  require(value.is_number_integer(), "field \"", field, "\" must be an integer, got ", shown(value));
  require(!value.is_number_unsigned() || value.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX), "field \"", field,
          "\" is too large: ", shown(value));
  const int64_t number = value.get<int64_t>();
  require(number >= min, "field \"", field, "\" must be at least ", min, ", got ", number);
  return number;
}

std::optional<int64_t> optional_integer_field(const json& doc, const char* field, int64_t min) {
  if (!present(doc, field)) return std::nullopt;
  return integer_field(doc, field, min);
}

std::optional<bool> optional_bool_field(const json& doc, const char* field) {
  if (!present(doc, field)) return std::nullopt;
  require(doc.at(field).is_boolean(), "field \"", field, "\" must be true or false, got ", shown(doc.at(field)));
  return doc.at(field).get<bool>();
}

std::optional<std::string> optional_string_field(const json& doc, const char* field) {
  if (!present(doc, field)) return std::nullopt;
  require(doc.at(field).is_string(), "field \"", field, "\" must be a string, got ", shown(doc.at(field)));
  return doc.at(field).get<std::string>();
}

std::optional<double> optional_positive_number(const json& doc, const char* field) {
  if (!present(doc, field)) return std::nullopt;
  const json& value = doc.at(field);
  require(value.is_number() && value.get<double>() > 0.0, "field \"", field, "\" must be a positive number, got ",
          shown(value));
  return value.get<double>();
}

std::string checked_model_type(const json& doc) {
  const std::optional<std::string> model_type = optional_string_field(doc, "model_type");
  require(model_type.has_value(), "field \"model_type\" is missing");
  require(!optional_bool_field(doc, "is_encoder_decoder").value_or(false), "model_type \"", *model_type,
          "\" is an encoder-decoder model; only decoder-only models are supported");
  for (std::string_view field : kExpertFields) {
    require(!doc.contains(field), "field \"", field, "\" marks a mixture-of-experts model (model_type \"", *model_type,
            "\"); only dense decoders are supported");
  }
  require(std::find(kSupportedModelTypes.begin(), kSupportedModelTypes.end(), *model_type) !=
              kSupportedModelTypes.end(),
          "unsupported model_type \"", *model_type, "\" (supported: llama, mistral, qwen2, qwen3)");
  if (present(doc, "architectures")) {
    const json& architectures = doc.at("architectures");
    require(architectures.is_array(), "field \"architectures\" must be a list of strings, got ", shown(architectures));
    for (const json& architecture : architectures) {
      require(architecture.is_string(), "field \"architectures\" must be a list of strings, got ", shown(architecture));
      const std::string name = architecture.get<std::string>();
      constexpr std::string_view kSuffix = "ForCausalLM";
      require(name.size() >= kSuffix.size() && name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0,
              "unsupported architecture \"", name, "\" (only *ForCausalLM decoders are supported)");
    }
  }
  return *model_type;
}

int64_t bytes_per_param(const json& doc) {
  std::optional<std::string> dtype = optional_string_field(doc, "torch_dtype");
  if (!dtype) dtype = optional_string_field(doc, "dtype");
  if (!dtype || *dtype == "bfloat16" || *dtype == "float16") return 2;
  require(*dtype == "float32", "field \"torch_dtype\" must be bfloat16, float16 or float32, got \"", *dtype, "\"");
  return 4;
}

std::string activation(const json& doc) {
  const std::string act = optional_string_field(doc, "hidden_act").value_or("silu");
  if (act == "silu" || act == "swish") return "swiglu";
  require(act == "gelu" || act == "gelu_new" || act == "gelu_pytorch_tanh", "unsupported hidden_act \"", act,
          "\" (supported: silu, gelu, gelu_new, gelu_pytorch_tanh)");
  return "geglu";
}

double rope_theta(const json& doc) {
  if (const std::optional<double> theta = optional_positive_number(doc, "rope_theta")) return *theta;
  if (present(doc, "rope_parameters") && doc.at("rope_parameters").is_object()) {
    if (const std::optional<double> theta = optional_positive_number(doc.at("rope_parameters"), "rope_theta")) {
      return *theta;
    }
  }
  return 10000.0;
}

YAML::Node build_node(const json& doc) {
  require(doc.is_object(), "a config.json must be a JSON object, got ", doc.type_name());
  const std::string model_type = checked_model_type(doc);
  const int64_t layers = integer_field(doc, "num_hidden_layers", 1);
  const int64_t hidden = integer_field(doc, "hidden_size", 1);
  const int64_t heads = integer_field(doc, "num_attention_heads", 1);
  const int64_t kv_heads = optional_integer_field(doc, "num_key_value_heads", 1).value_or(heads);
  const int64_t ffn = integer_field(doc, "intermediate_size", 1);
  const int64_t vocab = integer_field(doc, "vocab_size", 1);
  std::optional<int64_t> head_dim = optional_integer_field(doc, "head_dim", 1);
  if (!head_dim) {
    require(hidden % heads == 0, "field \"head_dim\" is missing and hidden_size (", hidden,
            ") is not a multiple of num_attention_heads (", heads, ")");
    head_dim = hidden / heads;
  }

  YAML::Node node(YAML::NodeType::Map);
  node["name"] = model_type;
  node["layers"] = layers;
  node["hidden_size"] = hidden;
  node["ffn_hidden_size"] = ffn;
  node["q_heads"] = heads;
  node["kv_heads"] = kv_heads;
  node["head_dim"] = *head_dim;
  node["vocab_size"] = vocab;
  node["tied_embeddings"] = optional_bool_field(doc, "tie_word_embeddings").value_or(false);
  node["qkv_bias"] = optional_bool_field(doc, "attention_bias").value_or(model_type == "qwen2");
  node["norm"] = "rmsnorm";
  node["activation"] = activation(doc);
  node["hidden_is_heads_x_head_dim"] = hidden / heads == *head_dim && hidden % heads == 0;
  node["bytes_per_param"] = bytes_per_param(doc);
  node["rope_theta"] = yaml::format_number(rope_theta(doc));
  node["max_position_tokens"] = optional_integer_field(doc, "max_position_embeddings", 0).value_or(0);
  return node;
}

ModelConfig model_from_node(const YAML::Node& node, std::string_view source_name) {
  YAML::Emitter out;
  out << node;
  return parse_model(out.c_str(), source_name);
}

}  // namespace

bool is_hf_config_path(const std::filesystem::path& path) {
  std::error_code ec;
  return path.extension() == ".json" || std::filesystem::is_directory(path, ec);
}

std::filesystem::path hf_config_file(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) ? path / "config.json" : path;
}

YAML::Node hf_config_to_model_node(const std::string& json_text, std::string_view source_name) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& error) {
    throw InputError(str(source_name, ": not valid JSON: ", error.what()));
  }
  return yaml::with_source(source_name, [&] { return build_node(doc); });
}

ModelConfig parse_hf_config(const std::string& json_text, std::string_view source_name) {
  return model_from_node(hf_config_to_model_node(json_text, source_name), source_name);
}

ModelConfig load_hf_config(const std::filesystem::path& path) {
  const std::filesystem::path file = hf_config_file(path);
  ModelConfig model = parse_hf_config(read_file(file, static_cast<int64_t>(yaml::kMaxDocumentBytes)), file.string());
  model.source_path = file;
  return model;
}

}  // namespace sparsering
