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
  uint64_t seed = 0;
  int64_t samples = 0;
  double median_relative_error = 0.0;   ///< median |held-out prediction - measured| / measured
  double max_relative_error = 0.0;
  std::vector<double> relative_errors;  ///< signed, one per sample, in the samples' order
};

/// Splits the distinct `case_ids` (one per sample) into `folds` folds: the ids, sorted, are
/// shuffled (Fisher-Yates: for k from their count down to 2, position k - 1 swaps with position
/// (next draw of a std::mt19937_64 seeded with `seed`) mod k) and dealt round-robin. For each fold
/// the model is fitted (fit_kernel_cost, coefficients rounded as GPU configs record them) on the
/// samples of the other folds and predicts the fold's samples. Throws InputError when the sizes
/// differ, folds < 2, there are fewer distinct cases than folds, or a fold's training samples
/// cannot be fitted (the message names the fold).
/// `fit_training`, when given, makes each fold's coefficients from the indices of its training
/// samples instead (a fit whose weights or choices depend on the samples it is given must make them
/// again from the training samples alone, or the held-out error leaks).
using TrainingFit = std::function<KernelCostCoefficients(const std::vector<size_t>& training)>;
HeldOutError heldout_error(std::span<const KernelSample> samples, std::span<const int64_t> case_ids, int64_t folds,
                           uint64_t seed, const KernelTerms& terms = KernelTerms::four_terms(),
                           const TrainingFit& fit_training = {});

}  // namespace sparsering
