// The curve points are chosen so the simulator's link model (latency + bytes / bandwidth, log-size
// interpolation between points) passes through every measurement; only sizes between points are
// interpolated. The reported error re-evaluates the model with sim's own link code.
#include "measure/calibration/link_fit.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/error.hpp"
#include "common/median.hpp"
#include "sim/network/link_model.hpp"

namespace sparsering {

double round_significant(double value, int digits) {
  if (value == 0.0 || !std::isfinite(value)) return value;
  const double magnitude = std::floor(std::log10(std::abs(value)));
  const double scale = std::pow(10.0, static_cast<double>(digits) - 1.0 - magnitude);
  return std::round(value * scale) / scale;
}

int64_t cap_curve(std::vector<BandwidthPoint>& curve, double line_gbytes_per_s) {
  int64_t capped = 0;
  for (BandwidthPoint& p : curve) {
    if (p.gbytes_per_s > line_gbytes_per_s) {
      p.gbytes_per_s = line_gbytes_per_s;
      ++capped;
    }
  }
  return capped;
}

LinkFit fit_link(std::span<const HopSample> samples, int64_t latency_max_bytes) {
  std::map<int64_t, std::vector<double>> by_size;
  for (size_t k = 0; k < samples.size(); ++k) {
    const HopSample& s = samples[k];
    require(s.bytes >= 1, "hop sample ", k, ": bytes must be >= 1, got ", s.bytes);
    require(std::isfinite(s.time_us) && s.time_us > 0.0, "hop sample ", k, ": time_us must be finite and > 0, got ", s.time_us);
    by_size[s.bytes].push_back(s.time_us);
  }
  require(by_size.size() >= 2, "the link fit needs at least two message sizes, got ", by_size.size());
  std::vector<HopSample> medians;
  for (auto& [bytes, times] : by_size) medians.push_back({bytes, median(std::move(times))});
  // Latency: intercept of time = a + bytes * b over the small sizes.
  size_t small = 0;
  while (small < medians.size() && medians[small].bytes <= latency_max_bytes) ++small;
  small = std::max<size_t>(small, 2);
  double sx = 0.0, sy = 0.0, sxx = 0.0, sxy = 0.0;
  for (size_t k = 0; k < small; ++k) {
    const double x = static_cast<double>(medians[k].bytes);
    sx += x;
    sy += medians[k].time_us;
    sxx += x * x;
    sxy += x * medians[k].time_us;
  }
  const double n = static_cast<double>(small);
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  double latency = (sy - slope * sx) / n;
  latency = std::clamp(latency, 0.0, medians.front().time_us);
  LinkFit fit;
  fit.latency_us = std::round(latency * 100.0) / 100.0;
  for (const HopSample& m : medians) {
    const double transfer_us = m.time_us - fit.latency_us;
    if (transfer_us <= 0.0) {
      fit.skipped_bytes.push_back(m.bytes);
      continue;
    }
    // bytes per microsecond = 1e6 bytes/s = 1e-3 GB/s.
    fit.curve.push_back({m.bytes, round_significant(static_cast<double>(m.bytes) / transfer_us * 1e-3, 4)});
  }
  require(!fit.curve.empty(), "the link fit found no size whose time exceeds the latency");
  LinkModel model;
  model.latency_us = fit.latency_us;
  model.line_gbytes_per_s = fit.curve.back().gbytes_per_s;
  model.curve = BandwidthCurve(fit.curve);
  for (const HopSample& m : medians) {
    const double predicted_us = static_cast<double>(transfer_time_ns(model, m.bytes)) * 1e-3;
    fit.max_relative_error = std::max(fit.max_relative_error, std::abs(predicted_us - m.time_us) / m.time_us);
  }
  return fit;
}

}  // namespace sparsering
