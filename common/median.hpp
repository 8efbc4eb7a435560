// The median of a set of values: the middle one, or the mean of the two middle ones for an even
// count; 0 for none. Used wherever repeats or cells are summarized (kernel timings, their clocks,
// ring step times, error summaries). Tested in tests/common/median_test.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

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

}  // namespace sparsering
