#include "measure/calibration/heldout_error.hpp"

#include <algorithm>
#include <map>
#include <random>

#include "common/error.hpp"

namespace sparsering {

HeldOutError heldout_error(std::span<const KernelSample> samples, std::span<const int64_t> case_ids, int64_t folds,
                           uint64_t seed, const KernelTerms& terms, const TrainingFit& fit_training, int64_t dealings) {
  require(samples.size() == case_ids.size(), "held-out error: ", samples.size(), " samples but ", case_ids.size(),
          " case ids");
  require(folds >= 2, "held-out error needs at least 2 folds, got ", folds);
  require(dealings >= 1, "held-out error needs at least 1 dealing of the folds, got ", dealings);
  std::vector<int64_t> sorted_cases(case_ids.begin(), case_ids.end());
  std::sort(sorted_cases.begin(), sorted_cases.end());
  sorted_cases.erase(std::unique(sorted_cases.begin(), sorted_cases.end()), sorted_cases.end());
  require(static_cast<int64_t>(sorted_cases.size()) >= folds, "held-out error with ", folds, " folds needs at least ",
          folds, " benchmark cases, got ", sorted_cases.size());

  HeldOutError out;
  out.folds = folds;
  out.seed = seed;
  out.dealings = dealings;
  out.samples = static_cast<int64_t>(samples.size());
  std::vector<double> weights;
  for (int64_t dealing = 0; dealing < dealings; ++dealing) {
    const uint64_t dealing_seed = seed + static_cast<uint64_t>(dealing);
    // Fisher-Yates with the generator's raw output (std::shuffle's draws differ between standard
    // libraries), so a seed gives the same folds everywhere.
    std::vector<int64_t> cases = sorted_cases;
    std::mt19937_64 rng(dealing_seed);
    for (size_t k = cases.size(); k > 1; --k) std::swap(cases[k - 1], cases[rng() % k]);
    std::map<int64_t, int64_t> fold_of;
    for (size_t k = 0; k < cases.size(); ++k) fold_of[cases[k]] = static_cast<int64_t>(k) % folds;

    std::vector<double> errors(samples.size(), 0.0);
    for (int64_t fold = 0; fold < folds; ++fold) {
      std::vector<KernelSample> training;
      std::vector<size_t> training_indices;
      for (size_t k = 0; k < samples.size(); ++k) {
        if (fold_of.at(case_ids[k]) != fold) {
          training.push_back(samples[k]);
          training_indices.push_back(k);
        }
      }
      KernelCostCoefficients c;
      try {
        c = fit_training ? fit_training(training_indices)
                         : rounded_coefficients(fit_kernel_cost(training, terms).coefficients);
      } catch (const InputError& error) {
        throw InputError(str("held-out fold ", fold + 1, " of ", folds, " (seed ", dealing_seed, "): ", error.what()));
      }
      for (size_t k = 0; k < samples.size(); ++k) {
        if (fold_of.at(case_ids[k]) != fold) continue;
        const KernelSample& s = samples[k];
        errors[k] = (predict_kernel_us(c, s) - s.time_us) / s.time_us;
      }
    }
    out.relative_errors.insert(out.relative_errors.end(), errors.begin(), errors.end());
    for (const KernelSample& s : samples) weights.push_back(s.weight);
  }
  std::tie(out.median_relative_error, out.max_relative_error) = median_and_max_magnitude(out.relative_errors, weights);
  return out;
}

}  // namespace sparsering
