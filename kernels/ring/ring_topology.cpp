#include "kernels/ring/ring_topology.hpp"

#include <algorithm>
#include <numeric>

#include "common/error.hpp"

namespace sparsering {
namespace {

std::vector<int64_t> kept_levels(const std::vector<int64_t>& level_sizes, int32_t ranks) {
  require(ranks >= 1, "ring size must be >= 1, got ", ranks);
  std::vector<int64_t> sizes;
  int64_t product = 1;
  for (size_t l = 0; l < level_sizes.size(); ++l) {
    require(level_sizes[l] >= 1 && level_sizes[l] <= ranks, "ring level ", l, " size ", level_sizes[l],
            " is not in [1, ", ranks, "]");
    product *= level_sizes[l];
    require(product <= ranks, "ring level sizes multiply past the ring size ", ranks);
    if (level_sizes[l] > 1) sizes.push_back(level_sizes[l]);
  }
  require(level_sizes.empty() || product == ranks, "ring level sizes multiply to ", product, ", not the ring size ",
          ranks);
  if (sizes.empty()) sizes.push_back(ranks);
  return sizes;
}

}  // namespace

RingTopology::RingTopology(const std::vector<int64_t>& level_sizes, const std::vector<int32_t>& ring_order,
                           int32_t ranks)
    : schedule_(kept_levels(level_sizes, ranks)) {
  const auto w = static_cast<size_t>(ranks);
  if (ring_order.empty()) {
    order_.resize(w);
    std::iota(order_.begin(), order_.end(), 0);
  } else {
    require(ring_order.size() == w, "ring_order has ", ring_order.size(), " entries, the ring has ", ranks);
    order_ = ring_order;
  }
  inverse_.assign(w, -1);
  for (size_t p = 0; p < w; ++p) {
    const int32_t g = order_[p];
    require(g >= 0 && g < ranks, "ring_order[", p, "] = ", g, " is not a rank in [0, ", ranks, ")");
    require(inverse_[static_cast<size_t>(g)] < 0, "ring_order[", p, "] = ", g, " repeats ring_order[",
            inverse_[static_cast<size_t>(g)], "]");
    inverse_[static_cast<size_t>(g)] = static_cast<int32_t>(p);
  }
}

void RingTopology::check_position(RingRank position) const {
  require(position.value() >= 0 && position.value() < ranks(), "ring position ", position.value(),
          " is not in [0, ", ranks(), ")");
}

GlobalRank RingTopology::global_rank(RingRank position) const {
  check_position(position);
  return GlobalRank(order_[static_cast<size_t>(position.value())]);
}

RingRank RingTopology::ring_rank(GlobalRank rank) const {
  require(rank.value() >= 0 && rank.value() < ranks(), "global rank ", rank.value(), " is not in the ring of ",
          ranks());
  return RingRank(inverse_[static_cast<size_t>(rank.value())]);
}

GlobalRank RingTopology::successor(RingRank position, int32_t level) const {
  check_position(position);
  return global_rank(RingRank(schedule_.next(position.value(), level)));
}

GlobalRank RingTopology::predecessor(RingRank position, int32_t level) const {
  check_position(position);
  return global_rank(RingRank(schedule_.prev(position.value(), level)));
}

RingRank RingTopology::chunk_source(RingRank position, int32_t step) const {
  check_position(position);
  return RingRank(schedule_.source(position.value(), step));
}

std::vector<KvHop> RingTopology::kv_hops(RingRank position, int32_t step) const {
  check_position(position);
  std::vector<KvHop> hops;
  for (int32_t level = levels() - 1; level >= 0; --level) {
    if (!schedule_.sends_at(step, level)) continue;
    hops.push_back(KvHop{level, successor(position, level), predecessor(position, level),
                         step + schedule_.stride(level)});
  }
  return hops;
}

std::vector<AccumulatorHop> RingTopology::accumulator_hops(RingRank position, int32_t step) const {
  check_position(position);
  std::vector<AccumulatorHop> hops;
  // Level k sends at step t iff every digit of t below k is at its maximum: the level-(k-1) ring
  // of the chunk held at the level-k cycle start c_k (t with those digits zeroed) just closed.
  int32_t cycle_start = step;
  for (int32_t level = 0; level < levels(); ++level) {
    if (level > 0) {
      const int32_t below = level - 1;
      if (schedule_.digit(step, below) != schedule_.level_size(below) - 1) break;
      cycle_start -= (schedule_.level_size(below) - 1) * schedule_.stride(below);
    }
    AccumulatorHop hop;
    hop.level = level;
    hop.to = successor(position, level);
    hop.from = predecessor(position, level);
    hop.send_step = cycle_start;
    const int32_t d = schedule_.digit(cycle_start, level);
    hop.add_incoming = d >= 1;
    if (d < schedule_.level_size(level) - 1) {
      hop.recv_step = cycle_start + schedule_.stride(level);
    } else {
      hop.recv_lands = true;
      hop.recv_step = cycle_start - d * schedule_.stride(level);
      hop.recv_final = level == levels() - 1;
    }
    hops.push_back(hop);
  }
  return hops;
}

KvBufferPlan RingTopology::kv_buffer_plan() const {
  const int32_t w = ranks();
  KvBufferPlan plan;
  plan.slot.assign(static_cast<size_t>(w), -1);
  plan.previous_holder.assign(static_cast<size_t>(w), -1);
  plan.post_step.assign(static_cast<size_t>(w), 0);
  std::vector<int32_t> order;
  for (int32_t t = 1; t < w; ++t) {
    plan.post_step[static_cast<size_t>(t)] = t - schedule_.stride(schedule_.arrival_level(t));
    order.push_back(t);
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return plan.post_step[static_cast<size_t>(a)] < plan.post_step[static_cast<size_t>(b)];
  });
  // Greedy interval colouring: the chunk of step t occupies its buffer from its post step to its
  // compute at step t; a buffer is reusable once its chunk's step is before the post step.
  std::vector<int32_t> holder{0};  // per buffer: the step of its latest chunk
  plan.slot[0] = 0;
  for (const int32_t t : order) {
    const int32_t post = plan.post_step[static_cast<size_t>(t)];
    int32_t chosen = -1;
    for (size_t b = 0; b < holder.size(); ++b) {
      if (holder[b] < post) {
        chosen = static_cast<int32_t>(b);
        break;
      }
    }
    if (chosen < 0) {
      chosen = static_cast<int32_t>(holder.size());
      holder.push_back(-1);
    }
    plan.previous_holder[static_cast<size_t>(t)] = holder[static_cast<size_t>(chosen)];
    plan.slot[static_cast<size_t>(t)] = chosen;
    holder[static_cast<size_t>(chosen)] = t;
  }
  plan.buffers = static_cast<int32_t>(holder.size());
  return plan;
}

}  // namespace sparsering
