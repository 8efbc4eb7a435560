// Fit of one fabric level's link model (sim/network/link_model.hpp: time = latency + bytes /
// bandwidth(bytes)) from measured ring-step hops: the latency is the intercept of a straight
// line through the small messages, and each measured size becomes one curve point whose
// bandwidth makes the model reproduce that measurement exactly (bytes / (time - latency)).
// Tested in tests/measure/calibration/link_fit_test.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/config/cluster_config.hpp"

namespace sparsering {

/// One measured message size: median time of one hop (every sender of the step at once).
struct HopSample {
  int64_t bytes = 0;     ///< message size, >= 1
  double time_us = 0.0;  ///< > 0
};

struct LinkFit {
  double latency_us = 0.0;
  std::vector<BandwidthPoint> curve;  ///< ascending bytes, GB/s (1e9 bytes/s) per direction
  double max_relative_error = 0.0;    ///< of the link model (latency + curve) on the samples
  std::vector<int64_t> skipped_bytes; ///< sizes whose time did not exceed the latency (no point)
};

/// Fits latency and curve. Samples of one size are reduced to their median. The latency is the
/// least-squares intercept over sizes <= `latency_max_bytes` (at least two sizes; else the two
/// smallest), clamped to [0, smallest time]. Bandwidths are rounded to 4 significant digits, the
/// latency to 0.01 us. Throws InputError for fewer than two distinct sizes, bytes < 1, or a
/// non-positive or non-finite time.
LinkFit fit_link(std::span<const HopSample> samples, int64_t latency_max_bytes = int64_t{1} << 20);

/// Caps every curve point at `line_gbytes_per_s` (the level's line rate, which a config's curve
/// may not exceed); returns how many points were capped.
int64_t cap_curve(std::vector<BandwidthPoint>& curve, double line_gbytes_per_s);

/// Rounds `value` to `digits` significant decimal digits (0 stays 0).
double round_significant(double value, int digits);

}  // namespace sparsering
