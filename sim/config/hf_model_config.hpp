// A Hugging Face `config.json` (Llama, Mistral, Qwen2 and Qwen3 style decoders) read as a model
// config, so a model can be planned without writing its YAML. The mapping of every field and the
// defaults for what config.json does not say are in docs/configs.md. Tested in
// tests/config/hf_model_config_test.cpp.
#pragma once

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <string>
#include <string_view>

#include "sim/config/model_config.hpp"

namespace sparsering {

/// True when `path` names a Hugging Face config: a file whose name ends in ".json", or a folder
/// (a model folder holding config.json).
bool is_hf_config_path(const std::filesystem::path& path);

/// The config.json that `path` names: `path` itself, or <path>/config.json for a folder.
std::filesystem::path hf_config_file(const std::filesystem::path& path);

/// The model YAML keys (layers, hidden_size, ...) that a config.json's text gives, as a YAML
/// mapping, for the model parser to check and for a model YAML with `hf_config:` to override.
/// Throws InputError "<source_name>: <field> ..." for invalid JSON, a missing or ill-typed field,
/// and an unsupported architecture (encoder-decoder, mixture of experts, unknown model_type).
YAML::Node hf_config_to_model_node(const std::string& json_text, std::string_view source_name);

/// Parses config.json text into a ModelConfig (hf_config_to_model_node, then the model checks).
ModelConfig parse_hf_config(const std::string& json_text, std::string_view source_name);

/// Reads a config.json, or the one in a model folder, through read_file; sets source_path to the
/// file. Throws InputError naming the file.
ModelConfig load_hf_config(const std::filesystem::path& path);

}  // namespace sparsering
