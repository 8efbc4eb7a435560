#include "sim/network/link_model.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"

namespace sparsering {

BandwidthCurve::BandwidthCurve(std::vector<BandwidthPoint> points) : points_(std::move(points)) {
  for (size_t k = 0; k < points_.size(); ++k) {
    require(points_[k].bytes >= 1, "bandwidth curve point ", k, ": bytes must be >= 1, got ", points_[k].bytes);
    require(std::isfinite(points_[k].gbytes_per_s) && points_[k].gbytes_per_s > 0.0, "bandwidth curve point ", k,
            ": gbytes_per_s must be > 0, got ", points_[k].gbytes_per_s);
    require(k == 0 || points_[k].bytes > points_[k - 1].bytes, "bandwidth curve point ", k,
            ": bytes must ascend strictly, got ", points_[k].bytes, " after ", points_[k - 1].bytes);
  }
}

double BandwidthCurve::gbytes_per_s(int64_t bytes) const {
  if (bytes <= points_.front().bytes) return points_.front().gbytes_per_s;
  if (bytes >= points_.back().bytes) return points_.back().gbytes_per_s;
  const auto hi = std::upper_bound(points_.begin(), points_.end(), bytes,
                                   [](int64_t b, const BandwidthPoint& p) { return b < p.bytes; });
  const auto lo = hi - 1;
  const double x = std::log(static_cast<double>(bytes));
  const double x0 = std::log(static_cast<double>(lo->bytes));
  const double x1 = std::log(static_cast<double>(hi->bytes));
  const double f = (x - x0) / (x1 - x0);
  return lo->gbytes_per_s + f * (hi->gbytes_per_s - lo->gbytes_per_s);
}

LinkModel make_link_model(const FabricLevel& level) {
  require(level.bandwidth_gbytes_per_s > 0.0, level.name, ".bandwidth_gbytes_per_s must be > 0, got ",
          level.bandwidth_gbytes_per_s);
  require(level.latency_us >= 0.0, level.name, ".latency_us must be >= 0, got ", level.latency_us);
  LinkModel link;
  link.kind = level.kind;
  link.latency_us = level.latency_us;
  link.line_gbytes_per_s = level.bandwidth_gbytes_per_s;
  link.nics_per_node = level.nics_per_node;
  link.curve = BandwidthCurve(level.curve);
  return link;
}

double nic_share(int64_t flows, int64_t nics) {
  if (nics <= 0 || flows <= nics) return 1.0;
  return static_cast<double>(nics) / static_cast<double>(flows);
}

SimNs transfer_time_ns(const LinkModel& link, int64_t bytes, double share) {
  require(bytes >= 0, "message size must be >= 0 bytes, got ", bytes);
  require(share > 0.0 && share <= 1.0, "bandwidth share must be in (0, 1], got ", share);
  if (bytes == 0) return 0;
  const double gbytes_per_s = link.gbytes_per_s(bytes) * share;  // GB/s = bytes per ns
  return ns_from_us(link.latency_us + static_cast<double>(bytes) / gbytes_per_s * 1e-3);
}

}  // namespace sparsering
