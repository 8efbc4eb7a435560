// Link model: time of one point-to-point message = latency + bytes / bandwidth(bytes), with a
// size-dependent bandwidth per link kind (log-size interpolation of measured points, such as the
// NCCL ring-step curve of docs/peers.md section 2; clamped to the first and last point), and NIC sharing: when
// several flows leave (or enter) a node at once through fewer NICs, each gets nics / flows of
// the bandwidth. Tested in tests/sim/link_model_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/config/cluster_config.hpp"
#include "sim/core/sim_time.hpp"

namespace sparsering {

/// A measured bandwidth curve: GB/s (1e9 bytes/s) per direction against message size.
class BandwidthCurve {
 public:
  BandwidthCurve() = default;
  /// Points with strictly ascending bytes >= 1 and bandwidth > 0. Throws InputError naming the
  /// offending point.
  explicit BandwidthCurve(std::vector<BandwidthPoint> points);

  bool empty() const { return points_.empty(); }
  const std::vector<BandwidthPoint>& points() const { return points_; }
  /// Bandwidth for a message of `bytes` (>= 1): linear in log(bytes) between neighbouring points,
  /// the first point's value below it and the last point's above it. Precondition: !empty().
  double gbytes_per_s(int64_t bytes) const;

 private:
  std::vector<BandwidthPoint> points_;
};

/// The transfer model of one fabric level.
struct LinkModel {
  LinkKind kind = LinkKind::nvlink;
  double latency_us = 0.0;
  double line_gbytes_per_s = 0.0;  ///< per GPU (intra-node) or per NIC (other levels)
  int64_t nics_per_node = 0;       ///< 0 for the intra-node level (every GPU has its own links)
  BandwidthCurve curve;            ///< empty: the line rate at every size

  /// Bandwidth of one message of `bytes` with the link to itself: the curve, else the line rate.
  double gbytes_per_s(int64_t bytes) const { return curve.empty() ? line_gbytes_per_s : curve.gbytes_per_s(bytes); }
};

/// The model of a cluster's fabric level. Throws InputError when its bandwidth is not positive.
LinkModel make_link_model(const FabricLevel& level);

/// Bandwidth share of one of `flows` concurrent flows through `nics` NICs: min(1, nics / flows);
/// 1 when nics == 0 (per-GPU links, no sharing) or flows <= 1.
double nic_share(int64_t flows, int64_t nics);

/// Time of one message: latency + bytes / (bandwidth(bytes) x share), rounded once; 0 for 0 bytes.
/// Throws InputError for negative bytes or a share outside (0, 1].
SimNs transfer_time_ns(const LinkModel& link, int64_t bytes, double share = 1.0);

}  // namespace sparsering
