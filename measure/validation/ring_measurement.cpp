// Validation <-> ring runtime conversions (see ring_measurement.hpp).
#include "measure/validation/ring_measurement.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace sparsering {
namespace {

MeasuredPass pass_by_position(const RingPassTimes& times, const std::vector<int32_t>& order, int32_t w) {
  const auto ww = static_cast<size_t>(w);
  require(times.compute_ms.size() == ww * ww && times.step_ms.size() == ww * ww && times.recv_wait_ms.size() == ww * ww,
          "the ring measurement has ", times.compute_ms.size(), " compute, ", times.step_ms.size(), " step and ",
          times.recv_wait_ms.size(), " wait cells, a ring of ", w, " needs ", ww * ww);
  MeasuredPass out;
  out.compute_us.assign(ww * ww, 0.0);
  out.step_us.assign(ww * ww, 0.0);
  out.comm_us.assign(ww * ww, 0.0);
  out.compute_start_us.assign(ww * ww, 0.0);
  out.comm_start_us.assign(ww * ww, 0.0);
  for (size_t p = 0; p < ww; ++p) {
    const auto g = static_cast<size_t>(order[p]);
    double end = 0.0;
    for (size_t t = 0; t < ww; ++t) {
      const size_t from = g * ww + t;
      const size_t to = p * ww + t;
      out.compute_us[to] = times.compute_ms[from] * 1e3;
      out.step_us[to] = times.step_ms[from] * 1e3;
      const double previous_end = end;
      end += out.step_us[to];
      out.compute_start_us[to] = std::max(previous_end, end - out.compute_us[to]);
      const double wait_us = times.recv_wait_ms[from] * 1e3;
      if (t >= 1 && wait_us > 0.0) {
        out.comm_us[to] = out.compute_us[to - 1] + wait_us;
        out.comm_start_us[to] = out.compute_start_us[to - 1];
      }
    }
  }
  out.wall_ms = times.wall_ms;
  out.exposed_comm_ms = times.exposed_comm_ms;
  return out;
}

}  // namespace

RingLayerProblem make_ring_layer_problem(const ValidationProblem& problem, const std::vector<int32_t>& ring_order,
                                         int32_t iterations, uint64_t seed) {
  require(iterations >= 1, "--iterations must be >= 1, got ", iterations);
  RingLayerProblem out;
  out.layout = problem.layout;
  out.level_sizes = problem.level_sizes;
  out.ring_order = ring_order;
  out.shape = problem.shape;
  out.block_q = problem.block_q;
  out.block_k = problem.block_k;
  out.softmax_scale = problem.softmax_scale;
  out.backward = true;
  out.seed = seed;
  out.warmup = 1;
  out.iterations = iterations;
  if (problem.dense) {
    out.pattern = PatternSource::dense;
    return out;
  }
  out.pattern = PatternSource::kept_sets;
  out.kept = problem.kept;
  return out;
}

std::vector<int32_t> validation_ring_order(const PlanConfig& plan) {
  const std::vector<int64_t> members = plan.ring_members(0);
  std::vector<int64_t> sorted = members;
  std::sort(sorted.begin(), sorted.end());
  bool identity_set = true;
  for (size_t k = 0; k < sorted.size(); ++k) identity_set = identity_set && sorted[k] == static_cast<int64_t>(k);
  std::vector<int32_t> order(members.size());
  for (size_t k = 0; k < members.size(); ++k) {
    order[k] = identity_set ? static_cast<int32_t>(members[k]) : static_cast<int32_t>(k);
  }
  return order;
}

MeasuredLayer measured_from_ring(const RingLayerMeasurement& measurement, const std::vector<int32_t>& ring_order,
                                 int32_t iterations) {
  const int32_t w = measurement.ranks;
  require(w >= 1 && ring_order.size() == static_cast<size_t>(w), "the ring measurement has ", w,
          " ranks, the ring order ", ring_order.size());
  for (int32_t g : ring_order) require(g >= 0 && g < w, "ring order entry ", g, " is not a rank of ", w);
  MeasuredLayer out;
  out.mode = "ring";
  out.ranks = w;
  out.iterations = iterations;
  for (int64_t tiles : measurement.index_tiles) out.tiles += tiles;
  out.forward = pass_by_position(measurement.forward, ring_order, w);
  out.backward = pass_by_position(measurement.backward, ring_order, w);
  return out;
}

}  // namespace sparsering
