// Statistics over trace samples (sim/output/sample_statistics.hpp).
#include "sim/output/sample_statistics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "common/error.hpp"

namespace sparsering {

namespace {

/// Nearest-rank position (0-based) of percentile `percent` among `count` sorted values.
size_t nearest_rank(size_t count, int percent) {
  const size_t rank = (count * static_cast<size_t>(percent) + 99) / 100;  // ceil(percent / 100 x count)
  return std::max<size_t>(rank, 1) - 1;
}

int percent_of(SampleStatistic statistic) {
  switch (statistic) {
    case SampleStatistic::p50: return 50;
    case SampleStatistic::p90: return 90;
    case SampleStatistic::max: return 100;
    case SampleStatistic::mean: break;
  }
  return 0;
}

}  // namespace

std::string_view to_string(SampleStatistic statistic) {
  switch (statistic) {
    case SampleStatistic::mean: return "mean";
    case SampleStatistic::p50: return "p50";
    case SampleStatistic::p90: return "p90";
    case SampleStatistic::max: return "max";
  }
  return "mean";
}

SampleStatistic parse_sample_statistic(std::string_view text, std::string_view what) {
  for (const SampleStatistic s : {SampleStatistic::mean, SampleStatistic::p50, SampleStatistic::p90, SampleStatistic::max}) {
    if (text == to_string(s)) return s;
  }
  throw InputError(str(what, " '", std::string(text), "' is not one of mean, p50, p90, max"));
}

double sample_statistic(const std::vector<double>& values, SampleStatistic statistic) {
  require(!values.empty(), "a statistic over samples needs at least one sample");
  if (statistic == SampleStatistic::mean) {
    return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  }
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  return sorted[nearest_rank(sorted.size(), percent_of(statistic))];
}

size_t representative_sample(const std::vector<double>& values, SampleStatistic statistic) {
  const double target = sample_statistic(values, statistic);
  size_t best = 0;
  for (size_t k = 1; k < values.size(); ++k) {
    if (std::abs(values[k] - target) < std::abs(values[best] - target)) best = k;
  }
  return best;
}

SampleSpread sample_spread(const std::vector<double>& values) {
  require(!values.empty(), "a spread over samples needs at least one sample");
  SampleSpread s;
  s.min = *std::min_element(values.begin(), values.end());
  s.max = *std::max_element(values.begin(), values.end());
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  double squares = 0.0;
  for (const double v : values) squares += (v - s.mean) * (v - s.mean);
  s.stdev = std::sqrt(squares / static_cast<double>(values.size()));
  return s;
}

}  // namespace sparsering
