// Parsing and resampling of sparsity priors. Parsing goes through the shared YAML reader
// (common/yaml_reader.hpp), so errors name the file, key path and value the same way the configs
// do, e.g. "qwen2.5-3b.yaml: budgets[3][5][0] must be an integer in [0, 2147483647], got -3".
#include "traces/sparsity_prior.hpp"

#include <cmath>
#include <limits>

#include "common/error.hpp"
#include "common/yaml_reader.hpp"
#include "traces/synth/prng.hpp"

namespace sparsering {
namespace {

constexpr int64_t kMaxDimension = 4096;  // layers or heads; far above any real model
constexpr int64_t kMaxBudget = std::numeric_limits<int32_t>::max();

HeadBudget read_head(const YAML::Node& node, const std::string& path, bool score_is_recall) {
  require(node.IsSequence() && node.size() == 3, path, " must be [vertical_budget, slash_budget, score]");
  HeadBudget budget;
  budget.vertical_budget = yaml::to_int(node[0], path + "[0]", 0, kMaxBudget);
  budget.slash_budget = yaml::to_int(node[1], path + "[1]", 0, kMaxBudget);
  budget.score = yaml::to_number(node[2], path + "[2]");
  require(!score_is_recall || (budget.score >= 0.0 && budget.score <= 1.0), path,
          "[2] is a recall (score_kind: recall) and must be in [0, 1], got ", yaml::format_number(budget.score));
  return budget;
}

SparsityPrior read_prior(const YAML::Node& root) {
  yaml::MapReader map(root, "");
  // Unknown keys are reported before missing ones: a misspelt key is the likelier mistake, and
  // finish() then names the spelling it was probably meant to be.
  for (const char* key : {"name", "model", "source", "score_kind", "layers", "q_heads", "budgets"}) map.allow(key);
  map.finish();

  SparsityPrior prior;
  prior.name = map.required_name("name");
  prior.model = map.required_string("model");
  prior.source = map.required_string("source");
  prior.score_kind = map.required_choice("score_kind", {"recall", "raw"});
  prior.layers = map.required_int("layers", 1, kMaxDimension);
  prior.q_heads = map.required_int("q_heads", 1, kMaxDimension);

  const std::vector<YAML::Node> layers = map.required_sequence("budgets", kMaxDimension);
  require(static_cast<int64_t>(layers.size()) == prior.layers, "budgets has ", layers.size(),
          " layers, but layers is ", prior.layers);
  prior.budgets.reserve(static_cast<size_t>(prior.layers * prior.q_heads));
  for (size_t l = 0; l < layers.size(); ++l) {
    const std::string layer_path = str("budgets[", l, "]");
    const std::vector<YAML::Node> heads = yaml::to_sequence(layers[l], layer_path, kMaxDimension);
    require(static_cast<int64_t>(heads.size()) == prior.q_heads, layer_path, " must be a list of ", prior.q_heads,
            " heads (q_heads), got ", heads.size());
    for (size_t h = 0; h < heads.size(); ++h) {
      prior.budgets.push_back(read_head(heads[h], str(layer_path, "[", h, "]"), prior.score_kind == "recall"));
    }
  }
  return prior;
}

}  // namespace

SparsityPrior parse_sparsity_prior(const std::string& yaml_text, std::string_view source_name) {
  const YAML::Node root = yaml::parse_document(yaml_text, source_name);
  return yaml::with_source(source_name, [&] { return read_prior(root); });
}

SparsityPrior load_sparsity_prior(const std::filesystem::path& path) {
  return parse_sparsity_prior(yaml::read_config_file(path), path.string());
}

SparsityPrior resample_prior(const SparsityPrior& prior, int64_t layers, int64_t q_heads, uint64_t seed) {
  require(layers >= 1 && q_heads >= 1, "cannot resample a sparsity prior onto ", layers, " layers x ", q_heads,
          " heads");
  if (layers == prior.layers && q_heads == prior.q_heads) return prior;
  SparsityPrior out = prior;
  out.layers = layers;
  out.q_heads = q_heads;
  out.budgets.clear();
  out.budgets.reserve(static_cast<size_t>(layers * q_heads));
  for (int64_t l = 0; l < layers; ++l) {
    // Nearest relative depth: the first and last layers map onto the prior's first and last.
    const double depth = layers == 1 ? 0.0 : static_cast<double>(l) / static_cast<double>(layers - 1);
    const auto source_layer = static_cast<int64_t>(std::llround(depth * static_cast<double>(prior.layers - 1)));
    for (int64_t h = 0; h < q_heads; ++h) {
      int64_t source_head = h;
      if (q_heads != prior.q_heads) {
        synth::SplitMix64 rng(
            synth::derive_seed({seed, 0x7072696f72ULL, static_cast<uint64_t>(l), static_cast<uint64_t>(h)}));
        source_head = static_cast<int64_t>(rng.below(static_cast<uint64_t>(prior.q_heads)));
      }
      out.budgets.push_back(prior.at(source_layer, source_head));
    }
  }
  out.resampled_from = str(prior.name, " (", prior.layers, " layers x ", prior.q_heads, " heads) onto ", layers, " x ",
                           q_heads, ": each layer takes the prior layer nearest in relative depth",
                           q_heads != prior.q_heads ? ", heads drawn at random from it" : ", same heads");
  return out;
}

}  // namespace sparsering
