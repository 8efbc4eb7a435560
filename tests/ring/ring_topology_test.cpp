// Tests of kernels/ring/ring_topology.hpp, rank_types.hpp and ring_input_values.hpp: every K/V
// chunk and every dK/dV contribution is followed hop by hop over random flat and nested rings
// with random ring orders (the oracle is the chunk ownership of RingSchedule and the set of
// (position, step) pairs that computed on each chunk).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "core/rank_types.hpp"
#include "kernels/ring/ring_input_values.hpp"
#include "kernels/ring/ring_topology.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

static_assert(!std::is_convertible_v<int32_t, GlobalRank>);
static_assert(!std::is_convertible_v<int32_t, RingRank>);
static_assert(!std::is_convertible_v<GlobalRank, RingRank>);
static_assert(!std::is_convertible_v<RingRank, GlobalRank>);
static_assert(!std::is_convertible_v<GlobalRank, int32_t>);

struct RingCase {
  std::vector<int64_t> levels;
  std::vector<int32_t> order;
  int32_t ranks = 1;
};

std::vector<RingCase> random_cases(uint64_t seed) {
  std::mt19937_64 rng(sparsering::testing_support::fixed_seed(seed));
  std::vector<RingCase> cases;
  const std::vector<std::vector<int64_t>> shapes = {{1}, {2}, {3}, {5}, {8}, {2, 2}, {2, 3}, {3, 2}, {4, 2},
                                                    {2, 4}, {2, 2, 2}, {3, 1, 2}, {1, 4}, {2, 3, 2}, {4, 4}};
  for (const auto& shape : shapes) {
    RingCase c;
    c.levels = shape;
    c.ranks = static_cast<int32_t>(std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>()));
    c.order.resize(static_cast<size_t>(c.ranks));
    std::iota(c.order.begin(), c.order.end(), 0);
    std::shuffle(c.order.begin(), c.order.end(), rng);
    cases.push_back(c);
  }
  return cases;
}

std::string describe(const RingCase& c) {
  std::ostringstream s;
  s << "levels";
  for (const auto l : c.levels) s << ' ' << l;
  s << " order";
  for (const auto g : c.order) s << ' ' << g;
  return s.str();
}

TEST(RingTopology, MapsPositionsAndGlobalRanks) {
  const RingTopology topo({2, 2}, {3, 1, 0, 2}, 4);
  EXPECT_EQ(topo.levels(), 2);
  EXPECT_EQ(topo.global_rank(RingRank(0)), GlobalRank(3));
  EXPECT_EQ(topo.ring_rank(GlobalRank(2)), RingRank(3));
  // position 1 = (inner 1, outer 0): inner successor is position 0, outer successor position 3.
  EXPECT_EQ(topo.successor(RingRank(1), 0), GlobalRank(3));
  EXPECT_EQ(topo.successor(RingRank(1), 1), GlobalRank(2));
  EXPECT_EQ(topo.predecessor(RingRank(2), 0), GlobalRank(2));
  EXPECT_EQ(topo.predecessor(RingRank(2), 1), GlobalRank(3));
  // A flat ring of 4 in identity order.
  const RingTopology flat({}, {}, 4);
  EXPECT_EQ(flat.levels(), 1);
  EXPECT_EQ(flat.successor(RingRank(3), 0), GlobalRank(0));
  EXPECT_EQ(flat.chunk_source(RingRank(1), 3), RingRank(2));
}

TEST(RingTopology, RejectsBadInput) {
  EXPECT_THROW(RingTopology({2, 3}, {}, 4), InputError);
  EXPECT_THROW(RingTopology({0, 4}, {}, 4), InputError);
  EXPECT_THROW(RingTopology({4}, {0, 1, 2}, 4), InputError);
  EXPECT_THROW(RingTopology({4}, {0, 1, 2, 2}, 4), InputError);
  EXPECT_THROW(RingTopology({4}, {0, 1, 2, 4}, 4), InputError);
  EXPECT_THROW(RingTopology({}, {}, 0), InputError);
  const RingTopology topo({4}, {}, 4);
  EXPECT_THROW((void)topo.global_rank(RingRank(4)), InputError);
  EXPECT_THROW((void)topo.ring_rank(GlobalRank(-1)), InputError);
}

TEST(RingTopology, SizeOneLevelsAreDropped) {
  const RingTopology topo({1, 3, 1, 2}, {}, 6);
  EXPECT_EQ(topo.levels(), 2);
  EXPECT_EQ(topo.schedule().level_size(0), 3);
  EXPECT_EQ(topo.schedule().level_size(1), 2);
}

TEST(RingTopology, KvHopsDeliverEveryChunkBeforeItsStep) {
  for (const RingCase& c : random_cases(11)) {
    SCOPED_TRACE(describe(c));
    const RingTopology topo(c.levels, c.order, c.ranks);
    const int32_t w = c.ranks;
    // held[p][t]: chunk received for step t (-1 = not yet); step 0 is the own chunk.
    std::vector<std::vector<int32_t>> held(static_cast<size_t>(w), std::vector<int32_t>(static_cast<size_t>(w), -1));
    for (int32_t p = 0; p < w; ++p) held[static_cast<size_t>(p)][0] = p;
    for (int32_t t = 0; t < w; ++t) {
      for (int32_t p = 0; p < w; ++p) {
        const int32_t chunk = held[static_cast<size_t>(p)][static_cast<size_t>(t)];
        ASSERT_EQ(chunk, topo.chunk_source(RingRank(p), t).value()) << "position " << p << " step " << t;
        int32_t previous_level = topo.levels();
        for (const KvHop& hop : topo.kv_hops(RingRank(p), t)) {
          EXPECT_LT(hop.level, previous_level) << "outer hops come first";
          previous_level = hop.level;
          ASSERT_GT(hop.recv_step, t);
          ASSERT_LT(hop.recv_step, w);
          const RingRank to = topo.ring_rank(hop.to);
          // The receiver posts the matching hop at the same step, from this position.
          const auto peer_hops = topo.kv_hops(to, t);
          const auto match = std::find_if(peer_hops.begin(), peer_hops.end(),
                                          [&](const KvHop& h) { return h.level == hop.level; });
          ASSERT_NE(match, peer_hops.end());
          EXPECT_EQ(match->from, topo.global_rank(RingRank(p)));
          EXPECT_EQ(match->recv_step, hop.recv_step);
          auto& slot = held[static_cast<size_t>(to.value())][static_cast<size_t>(hop.recv_step)];
          EXPECT_EQ(slot, -1) << "a chunk arrives twice";
          slot = chunk;
        }
      }
    }
  }
}

TEST(RingTopology, KvBufferPlanNeverOverwritesALiveChunk) {
  for (const RingCase& c : random_cases(12)) {
    SCOPED_TRACE(describe(c));
    const RingTopology topo(c.levels, c.order, c.ranks);
    const KvBufferPlan plan = topo.kv_buffer_plan();
    const int32_t w = c.ranks;
    ASSERT_EQ(plan.slot.size(), static_cast<size_t>(w));
    EXPECT_EQ(plan.slot[0], 0);
    for (int32_t t = 1; t < w; ++t) {
      // The receive of step t is posted when the hop that carries it is posted.
      const int32_t level = topo.schedule().arrival_level(t);
      EXPECT_EQ(plan.post_step[static_cast<size_t>(t)], t - topo.schedule().stride(level));
    }
    for (int32_t a = 0; a < w; ++a) {
      ASSERT_GE(plan.slot[static_cast<size_t>(a)], 0);
      ASSERT_LT(plan.slot[static_cast<size_t>(a)], plan.buffers);
      for (int32_t b = a + 1; b < w; ++b) {
        if (plan.slot[static_cast<size_t>(a)] != plan.slot[static_cast<size_t>(b)]) continue;
        // Live ranges [post, step] of two chunks in one buffer must not overlap.
        EXPECT_LT(a, plan.post_step[static_cast<size_t>(b)]) << "steps " << a << " and " << b;
      }
      const int32_t prev = plan.previous_holder[static_cast<size_t>(a)];
      if (prev >= 0) {
        EXPECT_EQ(plan.slot[static_cast<size_t>(prev)], plan.slot[static_cast<size_t>(a)]);
        EXPECT_LT(prev, plan.post_step[static_cast<size_t>(a)]);
      }
    }
    if (topo.levels() == 1 && w >= 2) {
      EXPECT_EQ(plan.buffers, 2) << "a flat ring is double buffered";
    }
  }
}

TEST(RingTopology, MirrorAccumulatorsSumEveryContributionOnTheOwner) {
  for (const RingCase& c : random_cases(13)) {
    SCOPED_TRACE(describe(c));
    const RingTopology topo(c.levels, c.order, c.ranks);
    const int32_t w = c.ranks;
    using Contribs = std::vector<std::pair<int32_t, int32_t>>;  // (position, step) that computed
    using Key = std::pair<int32_t, int32_t>;                    // (level, step)
    std::vector<std::map<Key, Contribs>> incoming(static_cast<size_t>(w));
    std::vector<std::map<Key, Contribs>> landing(static_cast<size_t>(w));
    std::vector<Contribs> final_sum(static_cast<size_t>(w));
    std::vector<int32_t> finals(static_cast<size_t>(w), 0);
    for (int32_t t = 0; t < w; ++t) {
      // Level by level: a level-k hop at step t uses what level k-1 delivered at step t.
      for (int32_t level = 0; level < topo.levels(); ++level) {
        std::vector<std::pair<int32_t, std::pair<AccumulatorHop, Contribs>>> sends;
        for (int32_t p = 0; p < w; ++p) {
          for (const AccumulatorHop& hop : topo.accumulator_hops(RingRank(p), t)) {
            if (hop.level != level) continue;
            Contribs value;
            if (level == 0) {
              ASSERT_EQ(hop.send_step, t);
              value.emplace_back(p, t);
            } else {
              auto it = landing[static_cast<size_t>(p)].find({level - 1, hop.send_step});
              ASSERT_NE(it, landing[static_cast<size_t>(p)].end()) << "no landing to forward";
              value = it->second;
              landing[static_cast<size_t>(p)].erase(it);
            }
            if (hop.add_incoming) {
              auto it = incoming[static_cast<size_t>(p)].find({level, hop.send_step});
              ASSERT_NE(it, incoming[static_cast<size_t>(p)].end()) << "incoming accumulator missing";
              value.insert(value.end(), it->second.begin(), it->second.end());
              incoming[static_cast<size_t>(p)].erase(it);
            }
            EXPECT_EQ(hop.to, topo.successor(RingRank(p), level));
            EXPECT_EQ(hop.from, topo.predecessor(RingRank(p), level));
            sends.push_back({p, {hop, value}});
          }
        }
        for (const auto& [p, sent] : sends) {
          const auto& [hop, value] = sent;
          const int32_t to = topo.ring_rank(hop.to).value();
          // The receiver's own hop at this step and level describes where the value goes.
          const auto peer_hops = topo.accumulator_hops(RingRank(to), t);
          const auto match = std::find_if(peer_hops.begin(), peer_hops.end(),
                                          [&](const AccumulatorHop& h) { return h.level == level; });
          ASSERT_NE(match, peer_hops.end());
          ASSERT_EQ(match->from, topo.global_rank(RingRank(p)));
          // Every contribution is on the chunk the receiver held at recv_step.
          for (const auto& [q, s] : value) {
            EXPECT_EQ(topo.chunk_source(RingRank(q), s), topo.chunk_source(RingRank(to), match->recv_step));
          }
          if (match->recv_final) {
            EXPECT_EQ(match->recv_step, 0);
            final_sum[static_cast<size_t>(to)] = value;
            ++finals[static_cast<size_t>(to)];
          } else if (match->recv_lands) {
            landing[static_cast<size_t>(to)][{level, match->recv_step}] = value;
          } else {
            incoming[static_cast<size_t>(to)][{level, match->recv_step}] = value;
          }
        }
      }
    }
    for (int32_t p = 0; p < w; ++p) {
      EXPECT_EQ(finals[static_cast<size_t>(p)], 1);
      Contribs expected;
      for (int32_t q = 0; q < w; ++q) {
        for (int32_t s = 0; s < w; ++s) {
          if (topo.chunk_source(RingRank(q), s).value() == p) expected.emplace_back(q, s);
        }
      }
      Contribs got = final_sum[static_cast<size_t>(p)];
      std::sort(got.begin(), got.end());
      EXPECT_EQ(got, expected) << "position " << p;
      EXPECT_TRUE(incoming[static_cast<size_t>(p)].empty());
      EXPECT_TRUE(landing[static_cast<size_t>(p)].empty());
    }
  }
}

TEST(RingInputValues, DeterministicBoundedAndSpread) {
  double sum = 0.0;
  int distinct_tensor = 0;
  for (int64_t token = 0; token < 4096; ++token) {
    const bf16_bits a = ring_input_bits(7, 1, 0, 3, token, 5);
    EXPECT_EQ(a, ring_input_bits(7, 1, 0, 3, token, 5));
    const float v = bf16_to_float(a);
    EXPECT_GE(v, -1.0f);
    EXPECT_LE(v, 1.0f);
    sum += static_cast<double>(v);
    distinct_tensor += a != ring_input_bits(7, 2, 0, 3, token, 5) ? 1 : 0;
  }
  EXPECT_LT(std::abs(sum / 4096.0), 0.05);
  EXPECT_GT(distinct_tensor, 4000);
  EXPECT_NE(ring_input_bits(7, 0, 0, 0, 0, 0), ring_input_bits(8, 0, 0, 0, 0, 0));
}

}  // namespace
}  // namespace sparsering
