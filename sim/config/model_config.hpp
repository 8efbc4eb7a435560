// Model architecture config (configs/models/*.yaml): the shapes the simulator needs for attention
// work, KV transfer sizes, dense-layer FLOPs and memory, plus the name of the sparsity prior that
// `sparsering trace synth` samples from. Schema reference: docs/configs.md. Tested in
// tests/config/model_config_test.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace sparsering {

enum class NormKind : int32_t { rmsnorm = 0, layernorm = 1 };
enum class MlpActivation : int32_t { swiglu = 0, geglu = 1, gelu = 2, relu = 3 };

struct ModelConfig {
  std::string name;              ///< config name, e.g. "qwen2.5-3b" (letters, digits, '.', '_', '-')
  int64_t layers = 0;            ///< transformer blocks
  int64_t hidden_size = 0;       ///< model width d_model
  int64_t ffn_hidden_size = 0;   ///< MLP intermediate width
  int64_t q_heads = 0;           ///< query (attention) heads
  int64_t kv_heads = 0;          ///< key/value heads (GQA groups); divides q_heads
  int64_t head_dim = 0;          ///< channels per head
  int64_t vocab_size = 0;        ///< embedding rows
  std::string sparsity_prior;    ///< name of configs/sparsity/<name>.yaml; empty = none
  std::filesystem::path source_path;  ///< file it was loaded from; empty when parsed from a string

  std::string hf_model_id;                 ///< optional Hugging Face id the numbers come from
  bool tied_embeddings = false;            ///< LM head shares the input embedding matrix
  bool qkv_bias = false;                   ///< Q, K and V projections have biases
  NormKind norm = NormKind::rmsnorm;       ///< normalisation layers (two per block plus a final one)
  MlpActivation activation = MlpActivation::swiglu;  ///< gated (swiglu, geglu) MLPs have 3 matrices
  bool hidden_is_heads_x_head_dim = true;  ///< the model has hidden_size == q_heads x head_dim
  int64_t bytes_per_param = 2;             ///< storage of weights and activations (2 = bf16)
  double rope_theta = 10000.0;             ///< RoPE base frequency
  int64_t max_position_tokens = 0;         ///< longest position the model was trained for; 0 = unknown

  /// True for gated MLPs (swiglu, geglu): up, gate and down projections.
  bool gated_mlp() const { return activation == MlpActivation::swiglu || activation == MlpActivation::geglu; }
  /// Query heads that share one KV head (q_heads / kv_heads).
  int64_t kv_group_size() const { return q_heads / kv_heads; }
  /// Parameters of one transformer block: Q, K, V, O projections (+ QKV biases), MLP matrices,
  /// and its two norms.
  int64_t block_parameter_count() const;
  /// Input embedding plus, unless tied, the LM head.
  int64_t embedding_parameter_count() const;
  /// All parameters: blocks, embeddings, final norm.
  int64_t parameter_count() const;
  /// Parameters excluding the input embedding and LM head.
  int64_t non_embedding_parameter_count() const;
  /// Bytes of K plus V for one token in one layer: 2 x kv_heads x head_dim x bytes_per_param.
  int64_t kv_bytes_per_token_per_layer() const;
};

/// Parses a model config from YAML text. `source_name` prefixes every error message (a file name
/// or "<string>"); an `hf_config:` path is taken relative to its folder. Throws InputError naming the key path and value of the first problem.
ModelConfig parse_model(const std::string& yaml_text, std::string_view source_name);

/// Reads and parses a model file; sets source_path. A path ending in ".json", or a folder, is read
/// as a Hugging Face config.json (load_hf_config); a YAML with `hf_config: <path>` takes the
/// config.json's fields and overrides them with its own keys (docs/configs.md).
/// Throws InputError naming the file.
ModelConfig load_model(const std::filesystem::path& path);

/// Where the model's sparsity prior lives: <models folder>/../sparsity/<sparsity_prior>.yaml
/// relative to source_path (or configs/sparsity/<name>.yaml when parsed from a string).
/// Throws InputError when the model names no prior.
std::filesystem::path sparsity_prior_path(const ModelConfig& model);

/// The YAML spellings of the enums ("rmsnorm", "swiglu", ...).
std::string_view to_string(NormKind kind);
std::string_view to_string(MlpActivation activation);

}  // namespace sparsering
