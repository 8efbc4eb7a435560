// Figures of one plan over several trace samples (training steps whose sparsity differs): the
// statistic a ranking uses, the sample that represents it, and the spread. Percentiles are
// nearest-rank: pX is the ceil(X/100 x S)-th smallest of S values, always one of them. Every
// statistic here is monotone in each value (raising one value never lowers it), so a per-sample
// lower bound gives a lower bound of the statistic. Tested in tests/sim/sample_statistics_test.cpp.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace sparsering {

enum class SampleStatistic : int {
  mean = 0,
  p50 = 1,
  p90 = 2,
  max = 3,
};

/// "mean", "p50", "p90", "max".
std::string_view to_string(SampleStatistic statistic);

/// Parses one of those names; throws InputError naming `what` (e.g. "--rank-by") and the text.
SampleStatistic parse_sample_statistic(std::string_view text, std::string_view what);

/// The statistic of `values` (at least one; InputError if empty).
double sample_statistic(const std::vector<double>& values, SampleStatistic statistic);

/// The index of the value that stands for the statistic: the nearest-rank one for percentiles
/// and max (the first such index on ties), the one closest to it for the mean (the first on ties).
size_t representative_sample(const std::vector<double>& values, SampleStatistic statistic);

struct SampleSpread {
  double min = 0.0;
  double max = 0.0;
  double mean = 0.0;
  double stdev = 0.0;  ///< population standard deviation (0 for one sample)
};

/// Spread of `values` (at least one; InputError if empty).
SampleSpread sample_spread(const std::vector<double>& values);

}  // namespace sparsering
