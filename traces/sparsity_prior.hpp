// Sparsity priors: published per-head budgets of real models (configs/sparsity/<name>.yaml, made
// from MInference's offline pattern search) that the synthetic trace generator draws from, and
// the resampling that maps a prior onto a model of another shape (a 70B model from an 8B prior).
// Tested in tests/traces/sparsity_prior_test.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace sparsering {

/// One head's published budget.
struct HeadBudget {
  int64_t vertical_budget = 0;  ///< kept key columns (vertical lines)
  int64_t slash_budget = 0;     ///< kept diagonals (slash lines)
  double score = 0.0;           ///< the search's score (a recall in [0, 1] when score_kind == "recall")
};

struct SparsityPrior {
  std::string name;        ///< file stem, e.g. "qwen2.5-3b"
  std::string model;       ///< model the budgets were measured on, e.g. "Qwen2.5-3B"
  std::string source;      ///< where the numbers come from (search method and file)
  std::string score_kind;  ///< "recall" (score is a fraction) or "raw" (score kept for reference)
  int64_t layers = 0;
  int64_t q_heads = 0;
  std::vector<HeadBudget> budgets;  ///< (layers, q_heads), row-major
  /// Non-empty when this prior was resampled onto another shape: says from what and how.
  std::string resampled_from;

  /// Budget of (layer, head); preconditions: 0 <= layer < layers, 0 <= head < q_heads.
  const HeadBudget& at(int64_t layer, int64_t head) const {
    return budgets[static_cast<size_t>(layer * q_heads + head)];
  }
};

/// Parses a prior from YAML text (schema: configs/sparsity/README.md). `source_name` prefixes every
/// error message. Throws InputError naming the key path and value of the first problem.
SparsityPrior parse_sparsity_prior(const std::string& yaml_text, std::string_view source_name);

/// Reads and parses configs/sparsity/<name>.yaml (or any path). Throws InputError naming the file.
SparsityPrior load_sparsity_prior(const std::filesystem::path& path);

/// Maps `prior` onto `layers` x `q_heads`. Layer l takes the prior layer nearest in relative depth,
/// round(l * (prior.layers - 1) / (layers - 1)); head h keeps head h when the head counts agree and
/// otherwise takes a head of that prior layer drawn with a generator seeded by `seed`, (l, h).
/// Returns the prior unchanged when the shapes agree; otherwise sets resampled_from.
/// Preconditions: layers >= 1, q_heads >= 1.
SparsityPrior resample_prior(const SparsityPrior& prior, int64_t layers, int64_t q_heads, uint64_t seed);

}  // namespace sparsering
