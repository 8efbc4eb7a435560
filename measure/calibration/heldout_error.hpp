// Held-out error of the kernel cost fit: k-fold cross-validation with the folds split by
// benchmark case, so every launch is predicted by coefficients fitted without its case. The
// in-sample error of a four-coefficient fit flatters it; the held-out error is what a launch the
// fit has not seen should expect (docs/calibration.md). Tested in
// tests/measure/calibration/heldout_error_test.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "measure/calibration/kernel_fit.hpp"

namespace sparsering {

struct HeldOutError {
  int64_t folds = 0;
  uint64_t seed = 0;      ///< of the first dealing; dealing d uses seed + d
  int64_t dealings = 1;   ///< times the cases were dealt into folds
  int64_t samples = 0;
  /// Weighted median of |held-out prediction - measured| / measured over every dealing's
  /// predictions, each weighing its sample's `weight` (KernelSample): the fit's own weights.
  double median_relative_error = 0.0;
  double max_relative_error = 0.0;      ///< largest over every dealing
  std::vector<double> relative_errors;  ///< signed, one per sample per dealing: dealing after dealing, each in the samples' order
};

/// Splits the distinct `case_ids` (one per sample) into `folds` folds: the ids, sorted, are
/// shuffled (Fisher-Yates: for k from their count down to 2, position k - 1 swaps with position
/// (next draw of a std::mt19937_64 seeded with `seed`) mod k) and dealt round-robin. For each fold
/// the model is fitted (fit_kernel_cost, coefficients rounded as GPU configs record them) on the
/// samples of the other folds and predicts the fold's samples. With `dealings` > 1 the cases are
/// dealt again with seeds seed + 1, seed + 2, ...: one dealing's figure depends on which cases
/// happen to share a fold (a fold that holds out every case of a kind leaves a term unfitted), and
/// the median over several dealings is the expected held-out error rather than one draw of it.
/// Throws InputError when the sizes differ, folds < 2, dealings < 1, there are fewer distinct
/// cases than folds, or a fold's training samples cannot be fitted (the message names the fold).
/// `fit_training`, when given, makes each fold's coefficients from the indices of its training
/// samples instead (a fit whose weights or choices depend on the samples it is given must make them
/// again from the training samples alone, or the held-out error leaks).
using TrainingFit = std::function<KernelCostCoefficients(const std::vector<size_t>& training)>;
HeldOutError heldout_error(std::span<const KernelSample> samples, std::span<const int64_t> case_ids, int64_t folds,
                           uint64_t seed, const KernelTerms& terms = KernelTerms::four_terms(),
                           const TrainingFit& fit_training = {}, int64_t dealings = 1);

}  // namespace sparsering
