// The median of a set of values: the middle one, or the mean of the two middle ones for an even
// count; 0 for none. Used wherever repeats or cells are summarized (kernel timings, their clocks,
// ring step times, error summaries). The weighted median summarizes errors of samples that a fit
// weighs unequally. Tested in tests/common/median_test.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <utility>
#include <vector>

#include "common/error.hpp"

namespace sparsering {

inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  const size_t mid = values.size() / 2;
  const auto at = values.begin() + static_cast<std::ptrdiff_t>(mid);
  std::nth_element(values.begin(), at, values.end());
  const double upper = *at;
  if (values.size() % 2 == 1) return upper;
  return 0.5 * (*std::max_element(values.begin(), at) + upper);
}

/// The value at which the running weight of the values, in ascending order, first reaches half the
/// total weight; the mean of it and the next value when it reaches exactly half, so that equal
/// integer weights give median(). Values of weight 0 do not count; 0 when no weight is positive.
/// `weights` has one entry (>= 0) per value (InputError otherwise).
inline double weighted_median(const std::vector<double>& values, const std::vector<double>& weights) {
  require(values.size() == weights.size(), "weighted median: ", values.size(), " values but ", weights.size(),
          " weights");
  std::vector<std::pair<double, double>> weighted;
  for (size_t k = 0; k < values.size(); ++k) {
    if (weights[k] > 0.0) weighted.emplace_back(values[k], weights[k]);
  }
  if (weighted.empty()) return 0.0;
  std::sort(weighted.begin(), weighted.end());
  const double total = std::accumulate(weighted.begin(), weighted.end(), 0.0,
                                       [](double sum, const std::pair<double, double>& v) { return sum + v.second; });
  double running = 0.0;
  for (size_t k = 0; k < weighted.size(); ++k) {
    running += weighted[k].second;
    if (2.0 * running == total && k + 1 < weighted.size()) return 0.5 * (weighted[k].first + weighted[k + 1].first);
    if (2.0 * running >= total) return weighted[k].first;
  }
  return weighted.back().first;
}

}  // namespace sparsering
