// Parsing and resampling of sparsity priors. Errors name the file and key path, e.g.
// "qwen2.5-3b.yaml: budgets[3][5][0] must be an integer in [0, 2147483647], got -3".
#include "traces/sparsity_prior.hpp"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <limits>
#include <set>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "traces/synth/prng.hpp"

namespace sparsering {
namespace {

constexpr int64_t kMaxDimension = 4096;  // layers or heads; far above any real model
constexpr int64_t kMaxBudget = std::numeric_limits<int32_t>::max();

class PriorReader {
 public:
  explicit PriorReader(std::string_view source) : source_(source) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw InputError(str(source_, ": ", path, " ", what));
  }

  YAML::Node require_key(const YAML::Node& root, const char* key) const {
    YAML::Node found = root[key];
    if (!found) fail(key, "is missing");
    return found;
  }

  std::string string_at(const YAML::Node& node, const std::string& path) const {
    if (!node.IsScalar()) fail(path, "must be a string");
    return node.Scalar();
  }

  int64_t int_at(const YAML::Node& node, const std::string& path, int64_t lo, int64_t hi) const {
    int64_t value = 0;
    if (!node.IsScalar() || !YAML::convert<int64_t>::decode(node, value) || value < lo || value > hi) {
      fail(path, str("must be an integer in [", lo, ", ", hi, "], got ", describe(node)));
    }
    return value;
  }

  double double_at(const YAML::Node& node, const std::string& path) const {
    double value = 0.0;
    if (!node.IsScalar() || !YAML::convert<double>::decode(node, value) || !std::isfinite(value)) {
      fail(path, str("must be a finite number, got ", describe(node)));
    }
    return value;
  }

  static std::string describe(const YAML::Node& node) {
    if (node.IsScalar()) return str("'", node.Scalar(), "'");
    if (node.IsSequence()) return "a list";
    if (node.IsMap()) return "a map";
    return "nothing";
  }

 private:
  std::string source_;
};

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  for (const char c : name) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

SparsityPrior parse_sparsity_prior(const std::string& yaml_text, std::string_view source_name) {
  const PriorReader reader(source_name);
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw InputError(str(source_name, ": not valid YAML: ", e.what()));
  }
  if (!root.IsMap()) throw InputError(str(source_name, ": the top level must be a map of keys"));
  static const std::set<std::string> known = {"name", "model", "source", "score_kind", "layers", "q_heads", "budgets"};
  for (const auto& entry : root) {
    const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : std::string("<non-scalar key>");
    if (known.count(key) == 0)
      reader.fail(key, "is not a known key (known: name, model, source, score_kind, layers, q_heads, budgets)");
  }

  SparsityPrior prior;
  prior.name = reader.string_at(reader.require_key(root, "name"), "name");
  if (!valid_name(prior.name))
    reader.fail("name", str("must be 1-128 letters, digits, '.', '_' or '-', got '", prior.name, "'"));
  prior.model = reader.string_at(reader.require_key(root, "model"), "model");
  prior.source = reader.string_at(reader.require_key(root, "source"), "source");
  prior.score_kind = reader.string_at(reader.require_key(root, "score_kind"), "score_kind");
  if (prior.score_kind != "recall" && prior.score_kind != "raw") {
    reader.fail("score_kind", str("must be 'recall' or 'raw', got '", prior.score_kind, "'"));
  }
  prior.layers = reader.int_at(reader.require_key(root, "layers"), "layers", 1, kMaxDimension);
  prior.q_heads = reader.int_at(reader.require_key(root, "q_heads"), "q_heads", 1, kMaxDimension);

  const YAML::Node budgets = reader.require_key(root, "budgets");
  if (!budgets.IsSequence()) reader.fail("budgets", "must be a list over layers");
  if (static_cast<int64_t>(budgets.size()) != prior.layers) {
    reader.fail("budgets", str("has ", budgets.size(), " layers, but layers is ", prior.layers));
  }
  prior.budgets.reserve(static_cast<size_t>(prior.layers * prior.q_heads));
  for (int64_t l = 0; l < prior.layers; ++l) {
    const YAML::Node layer = budgets[static_cast<size_t>(l)];
    const std::string layer_path = str("budgets[", l, "]");
    if (!layer.IsSequence() || static_cast<int64_t>(layer.size()) != prior.q_heads) {
      reader.fail(layer_path, str("must be a list of ", prior.q_heads, " heads (q_heads)"));
    }
    for (int64_t h = 0; h < prior.q_heads; ++h) {
      const YAML::Node head = layer[static_cast<size_t>(h)];
      const std::string path = str(layer_path, "[", h, "]");
      if (!head.IsSequence() || head.size() != 3) reader.fail(path, "must be [vertical_budget, slash_budget, score]");
      HeadBudget budget;
      budget.vertical_budget = reader.int_at(head[0], path + "[0]", 0, kMaxBudget);
      budget.slash_budget = reader.int_at(head[1], path + "[1]", 0, kMaxBudget);
      budget.score = reader.double_at(head[2], path + "[2]");
      if (prior.score_kind == "recall" && (budget.score < 0.0 || budget.score > 1.0)) {
        reader.fail(path + "[2]", str("is a recall (score_kind: recall) and must be in [0, 1], got ", budget.score));
      }
      prior.budgets.push_back(budget);
    }
  }
  return prior;
}

SparsityPrior load_sparsity_prior(const std::filesystem::path& path) {
  return parse_sparsity_prior(read_file(path), path.string());
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
