#include "sim/ring/ring_simulation.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace sparsering {

namespace {

void check_sizes(const RingSchedule& schedule, const RingInput& input, bool backward) {
  const auto w = static_cast<size_t>(schedule.ranks());
  const auto levels = static_cast<size_t>(schedule.levels());
  require(input.compute_ns.size() == w * w, "ring input: compute_ns has ", input.compute_ns.size(),
          " entries, expected W x W = ", w * w);
  require(input.kv_send_ns.size() == w * w * levels, "ring input: kv_send_ns has ", input.kv_send_ns.size(),
          " entries, expected W x W x levels = ", w * w * levels);
  require(input.start_ns.empty() || input.start_ns.size() == w, "ring input: start_ns has ", input.start_ns.size(),
          " entries, expected W = ", w);
  if (backward && input.route == AccumulatorRoute::direct_return) {
    require(input.dkv_send_ns.size() == w * w && input.dkv_level.size() == w * w,
            "ring input: backward with direct returns needs dkv_send_ns and dkv_level of W x W entries");
    for (const int32_t level : input.dkv_level) {
      require(level >= 0 && level < schedule.levels(), "ring input: dkv level ", level, " outside the ring's levels");
    }
  }
  if (backward && input.route == AccumulatorRoute::mirror) {
    require(input.dkv_hop_ns.size() == w * w * levels, "ring input: backward needs dkv_hop_ns of W x W x levels = ",
            w * w * levels, " entries, got ", input.dkv_hop_ns.size());
  }
  for (const SimNs v : input.compute_ns) require(v >= 0, "ring input: negative compute time ", v);
  for (const SimNs v : input.kv_send_ns) require(v >= 0, "ring input: negative transfer time ", v);
  for (const SimNs v : input.dkv_send_ns) require(v >= 0, "ring input: negative transfer time ", v);
  for (const SimNs v : input.dkv_hop_ns) require(v >= 0, "ring input: negative transfer time ", v);
  for (const SimNs v : input.start_ns) require(v >= 0, "ring input: negative start time ", v);
}

}  // namespace

RingRun simulate_ring(const RingSchedule& schedule, const RingInput& input, bool backward) {
  check_sizes(schedule, input, backward);
  const int32_t w = schedule.ranks();
  const int32_t levels = schedule.levels();
  const auto cell = [w](int32_t p, int32_t t) { return static_cast<size_t>(p) * static_cast<size_t>(w) + static_cast<size_t>(t); };
  RingRun run;
  run.ranks = w;
  run.steps.assign(static_cast<size_t>(w) * static_cast<size_t>(w), RingStepRecord{});
  run.finish_ns.assign(static_cast<size_t>(w), 0);
  std::vector<SimNs> release(static_cast<size_t>(w) * static_cast<size_t>(w), 0);  // chunk buffer free again
  std::vector<SimNs> link_free(static_cast<size_t>(w) * static_cast<size_t>(levels), 0);
  std::vector<SimNs> dkv_arrival;  // direct returns: arrival of the incoming accumulator, [p x W + t]
  const auto start_of = [&](int32_t p) { return input.start_ns.empty() ? SimNs{0} : input.start_ns[static_cast<size_t>(p)]; };
  const auto enqueue = [&](int32_t p, int32_t level, SimNs ready, SimNs duration) {
    SimNs& free_at = link_free[static_cast<size_t>(p) * static_cast<size_t>(levels) + static_cast<size_t>(level)];
    const SimNs begin = std::max(ready, free_at);
    free_at = begin + duration;
    return begin;
  };

  // The schedule's hops as tables: the loops below ask for them W^2 x levels times.
  const auto ll = static_cast<size_t>(levels);
  std::vector<int32_t> next_at(static_cast<size_t>(w) * ll);  // [p x L + level]
  std::vector<char> sends(static_cast<size_t>(w) * ll);       // [t x L + level]
  for (int32_t x = 0; x < w; ++x) {
    for (int32_t level = 0; level < levels; ++level) {
      next_at[static_cast<size_t>(x) * ll + static_cast<size_t>(level)] = schedule.next(x, level);
      sends[static_cast<size_t>(x) * ll + static_cast<size_t>(level)] = schedule.sends_at(x, level) ? 1 : 0;
    }
  }
  const auto next = [&](int32_t p, int32_t level) { return next_at[static_cast<size_t>(p) * ll + static_cast<size_t>(level)]; };
  // The accumulators start on the innermost level with more than one position (steps are one
  // apart there, as every level below has size 1).
  int32_t inner = 0;
  while (inner + 1 < levels && schedule.level_size(inner) == 1) ++inner;
  const bool mirror = backward && input.route == AccumulatorRoute::mirror;
  if (backward && !mirror) dkv_arrival.assign(static_cast<size_t>(w) * static_cast<size_t>(w), 0);
  // Mirror route: the next level above each level with more than one position (-1: none), and
  // the arrival of every level's incoming accumulator, indexed by the receiver and the level
  // iteration that consumes it (t / stride_k, a step whose lower digits are all at their last value).
  std::vector<int32_t> upper(static_cast<size_t>(levels), -1);
  std::vector<std::vector<SimNs>> accumulator_arrival(static_cast<size_t>(levels));
  if (mirror) {
    for (int32_t k = 0; k < levels; ++k) {
      for (int32_t u = k + 1; u < levels && upper[static_cast<size_t>(k)] < 0; ++u) {
        if (schedule.level_size(u) > 1) upper[static_cast<size_t>(k)] = u;
      }
      if (schedule.level_size(k) > 1) {
        accumulator_arrival[static_cast<size_t>(k)].assign(static_cast<size_t>(w) * static_cast<size_t>(w / schedule.stride(k)), 0);
      }
    }
  }
  const auto incoming_at = [&](int32_t level, int32_t p, int32_t t) -> SimNs& {
    const int32_t per_position = w / schedule.stride(level);
    return accumulator_arrival[static_cast<size_t>(level)][static_cast<size_t>(p) * static_cast<size_t>(per_position) +
                                                static_cast<size_t>(t / schedule.stride(level))];
  };

  for (int32_t t = 0; t < w; ++t) {
    // 1. Compute: needs the previous compute done and this step's chunk here.
    for (int32_t p = 0; p < w; ++p) {
      RingStepRecord& rec = run.steps[cell(p, t)];
      const SimNs previous = t == 0 ? start_of(p) : run.steps[cell(p, t - 1)].compute_end_ns;
      const SimNs arrival = t == 0 ? start_of(p) : rec.recv_end_ns;
      rec.compute_start_ns = std::max(previous, arrival);
      rec.compute_end_ns = rec.compute_start_ns + input.compute_ns[cell(p, t)];
      rec.wait_ns = rec.compute_start_ns - previous;
      rec.comm_exposed = t >= 1 && arrival > previous;
    }
    // 2. Forward the held chunk over every level the schedule sends at this step.
    for (int32_t p = 0; p < w; ++p) {
      const SimNs have = t == 0 ? start_of(p) : run.steps[cell(p, t)].recv_end_ns;
      SimNs last_send_end = 0;
      for (int32_t level = 0; level < levels; ++level) {
        if (!sends[static_cast<size_t>(t) * ll + static_cast<size_t>(level)]) continue;
        const int32_t to = next(p, level);
        const int32_t arrive_step = t + schedule.stride(level);
        const int32_t recycled = arrive_step - schedule.stride(level) - 1;  // = t - 1
        const SimNs buffer_free = recycled >= 0 ? release[cell(to, recycled)] : 0;
        const SimNs duration = input.kv_send_ns[cell(p, t) * static_cast<size_t>(levels) + static_cast<size_t>(level)];
        const SimNs begin = enqueue(p, level, std::max(have, buffer_free), duration);
        RingStepRecord& target = run.steps[cell(to, arrive_step)];
        target.recv_start_ns = begin;
        target.recv_end_ns = begin + duration;
        last_send_end = std::max(last_send_end, begin + duration);
        if (input.keep_transfers) run.transfers.push_back(RingTransfer{TransferKind::kv, p, to, t, level, begin, begin + duration});
      }
      release[cell(p, t)] = std::max(run.steps[cell(p, t)].compute_end_ns, last_send_end);
    }
    // 3. Backward, mirror route: the accumulator of the chunk computed at this step moves on over
    // the innermost level; where an iteration of a level ends, the level's sum moves on over the
    // next level up, with the accumulator that came in over that level.
    if (mirror) {
      for (int32_t p = 0; p < w; ++p) {
        const SimNs computed = run.steps[cell(p, t)].compute_end_ns;
        if (schedule.level_size(inner) == 1) {  // one position: nothing to move
          run.finish_ns[static_cast<size_t>(p)] = std::max(run.finish_ns[static_cast<size_t>(p)], computed);
          continue;
        }
        int32_t level = inner;
        int32_t at = p;
        SimNs ready = std::max(computed, schedule.digit(t, inner) >= 1 ? incoming_at(inner, p, t) : SimNs{0});
        while (true) {
          const int32_t to = next(at, level);
          const SimNs duration = input.dkv_hop_ns[cell(at, t) * static_cast<size_t>(levels) + static_cast<size_t>(level)];
          const SimNs begin = enqueue(at, level, ready, duration);
          const SimNs end = begin + duration;
          const bool last = schedule.digit(t, level) == schedule.level_size(level) - 1;
          const int32_t up = upper[static_cast<size_t>(level)];
          const bool home = last && up < 0;
          if (input.keep_transfers) {
            run.transfers.push_back(
                RingTransfer{home ? TransferKind::dkv_return : TransferKind::dkv, at, to, t, level, begin, end});
          }
          if (!last) {
            incoming_at(level, to, t + schedule.stride(level)) = end;
            break;
          }
          if (home) {
            run.finish_ns[static_cast<size_t>(to)] = std::max(run.finish_ns[static_cast<size_t>(to)], end);
            break;
          }
          ready = std::max(end, schedule.digit(t, up) >= 1 ? incoming_at(up, to, t) : SimNs{0});
          at = to;
          level = up;
        }
      }
    }
    // 3'. Backward, direct returns: pass on the dK/dV accumulator of the chunk computed at this step.
    if (backward && !mirror) {
      for (int32_t p = 0; p < w; ++p) {
        const bool last_inner = schedule.digit(t, inner) == schedule.level_size(inner) - 1;
        const int32_t to = last_inner ? schedule.source(p, t) : next(p, inner);
        const SimNs incoming = schedule.digit(t, inner) >= 1 ? dkv_arrival[cell(p, t)] : 0;
        const SimNs ready = std::max(run.steps[cell(p, t)].compute_end_ns, incoming);
        if (to == p) {  // own chunk in a one-position inner ring: nothing to move
          run.finish_ns[static_cast<size_t>(p)] = std::max(run.finish_ns[static_cast<size_t>(p)], ready);
          continue;
        }
        const int32_t level = input.dkv_level[cell(p, t)];
        const SimNs duration = input.dkv_send_ns[cell(p, t)];
        const SimNs begin = enqueue(p, level, ready, duration);
        const SimNs end = begin + duration;
        if (last_inner) {
          run.finish_ns[static_cast<size_t>(to)] = std::max(run.finish_ns[static_cast<size_t>(to)], end);
        } else {
          dkv_arrival[cell(to, t + 1)] = end;
        }
        if (input.keep_transfers) {
          run.transfers.push_back(
              RingTransfer{last_inner ? TransferKind::dkv_return : TransferKind::dkv, p, to, t, level, begin, end});
        }
      }
    }
  }
  for (int32_t p = 0; p < w; ++p) {
    SimNs& finish = run.finish_ns[static_cast<size_t>(p)];
    finish = std::max(finish, run.steps[cell(p, w - 1)].compute_end_ns);
    run.end_ns = std::max(run.end_ns, finish);
  }
  return run;
}

RingMetrics ring_metrics(const RingRun& run, const std::vector<SimNs>& compute_ns) {
  RingMetrics m;
  const int32_t w = run.ranks;
  if (w == 0) return m;
  const auto cell = [w](int32_t p, int32_t t) { return static_cast<size_t>(p) * static_cast<size_t>(w) + static_cast<size_t>(t); };
  std::vector<double> per_rank(static_cast<size_t>(w), 0.0);
  m.step_imbalance.assign(static_cast<size_t>(w), 1.0);
  double imbalance_sum = 0.0;
  for (int32_t t = 0; t < w; ++t) {
    double sum = 0.0;
    double max = 0.0;
    for (int32_t p = 0; p < w; ++p) {
      const auto c = static_cast<double>(compute_ns[cell(p, t)]);
      per_rank[static_cast<size_t>(p)] += c;
      sum += c;
      max = std::max(max, c);
    }
    const double ratio = sum > 0.0 ? max / (sum / static_cast<double>(w)) : 1.0;
    m.step_imbalance[static_cast<size_t>(t)] = ratio;
    imbalance_sum += ratio;
  }
  m.mean_step_imbalance = imbalance_sum / static_cast<double>(w);
  double total = 0.0;
  double max_rank = 0.0;
  for (const double c : per_rank) {
    total += c;
    max_rank = std::max(max_rank, c);
  }
  m.worker_imbalance = total > 0.0 ? max_rank / (total / static_cast<double>(w)) : 1.0;
  for (int32_t p = 0; p < w; ++p) {
    for (int32_t t = 0; t < w; ++t) {
      const RingStepRecord& rec = run.at(p, t);
      m.exposed_steps += rec.comm_exposed ? 1 : 0;
      m.total_wait_ns += rec.wait_ns;
    }
  }
  m.exposed_share = w > 1 ? static_cast<double>(m.exposed_steps) / (static_cast<double>(w) * (w - 1)) : 0.0;
  return m;
}

}  // namespace sparsering
