// Ring schedule and ring event simulation: chunk sources, hop structure, closed forms for uniform
// rings, hierarchical rings that degenerate to flat ones, relabelling, monotonicity, the same times
// without transfer records, and hand-derived backward and hierarchical timelines (sim/ring/).
#include "sim/ring/ring_simulation.hpp"

#include "sim/ring/all_gather_pass.hpp"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "common/error.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

RingInput uniform_input(const RingSchedule& s, SimNs compute, const std::vector<SimNs>& hop_per_level, SimNs dkv = 0) {
  const auto w = static_cast<size_t>(s.ranks());
  const auto levels = static_cast<size_t>(s.levels());
  RingInput in;
  in.compute_ns.assign(w * w, compute);
  in.kv_send_ns.resize(w * w * levels);
  for (size_t k = 0; k < w * w; ++k) {
    for (size_t l = 0; l < levels; ++l) in.kv_send_ns[k * levels + l] = hop_per_level[l];
  }
  in.dkv_send_ns.assign(w * w, dkv);
  in.dkv_level.assign(w * w, 0);
  in.dkv_hop_ns.assign(w * w * levels, dkv);
  return in;
}

/// One of a few flat and nested shapes.
RingSchedule random_schedule(std::mt19937_64& rng) {
  const std::vector<std::vector<int64_t>> shapes = {{5}, {4, 2}, {2, 2, 2}, {3, 3}};
  return RingSchedule(shapes[rng() % shapes.size()]);
}

/// Random compute and transfer times (0-999 ns), accumulator levels and route.
RingInput random_input(std::mt19937_64& rng, const RingSchedule& s) {
  RingInput in = uniform_input(s, 0, std::vector<SimNs>(static_cast<size_t>(s.levels()), 0), 0);
  for (auto& v : in.compute_ns) v = static_cast<SimNs>(rng() % 1000);
  for (auto& v : in.kv_send_ns) v = static_cast<SimNs>(rng() % 1000);
  for (auto& v : in.dkv_send_ns) v = static_cast<SimNs>(rng() % 1000);
  for (auto& v : in.dkv_level) v = static_cast<int32_t>(rng() % static_cast<uint64_t>(s.levels()));
  for (auto& v : in.dkv_hop_ns) v = static_cast<SimNs>(rng() % 1000);
  in.route = rng() % 2 == 1 ? AccumulatorRoute::mirror : AccumulatorRoute::direct_return;
  return in;
}

TEST(RingScheduleTest, EveryPositionSeesEveryChunkOnce) {
  for (const std::vector<int64_t>& sizes : std::vector<std::vector<int64_t>>{{1}, {5}, {4, 2}, {2, 3, 2}, {1, 4}, {3, 1}}) {
    const RingSchedule s(sizes);
    for (int32_t p = 0; p < s.ranks(); ++p) {
      std::set<int32_t> seen;
      for (int32_t t = 0; t < s.ranks(); ++t) seen.insert(s.source(p, t));
      EXPECT_EQ(static_cast<int32_t>(seen.size()), s.ranks());
      EXPECT_EQ(s.source(p, 0), p);
    }
    // Every step >= 1 is delivered by exactly one send: from the level-k predecessor, which held
    // that chunk stride_k steps earlier and sends at that step.
    for (int32_t t = 1; t < s.ranks(); ++t) {
      const int32_t k = s.arrival_level(t);
      ASSERT_GE(k, 0);
      EXPECT_TRUE(s.sends_at(t - s.stride(k), k));
      for (int32_t p = 0; p < s.ranks(); ++p) {
        EXPECT_EQ(s.source(s.prev(p, k), t - s.stride(k)), s.source(p, t));
        EXPECT_EQ(s.next(s.prev(p, k), k), p);
      }
    }
  }
}

TEST(RingScheduleTest, TwoLevelChunkOffsetIsOuterTimesInnerPlusInner) {
  const RingSchedule s({8, 4});
  for (int32_t p = 0; p < 32; ++p) {
    for (int32_t o = 0; o < 4; ++o) {
      for (int32_t i = 0; i < 8; ++i) {
        const int32_t expected = ((p % 8 - i + 8) % 8) + 8 * ((p / 8 - o + 4) % 4);
        EXPECT_EQ(s.source(p, o * 8 + i), expected);
      }
    }
  }
  EXPECT_THROW(RingSchedule({0}), InputError);
  EXPECT_THROW(RingSchedule(std::vector<int64_t>{}), InputError);
}

TEST(RingSimulationTest, UniformFlatRingClosedForm) {
  for (int32_t w : {1, 2, 3, 5, 8}) {
    for (const auto& [c, hop] : std::vector<std::pair<SimNs, SimNs>>{{100, 30}, {30, 100}, {50, 50}, {0, 7}, {7, 0}}) {
      const RingSchedule s = RingSchedule::flat(w);
      const RingRun run = simulate_ring(s, uniform_input(s, c, {hop}), false);
      const SimNs step = std::max(c, hop);
      for (int32_t p = 0; p < w; ++p) {
        for (int32_t t = 0; t < w; ++t) {
          EXPECT_EQ(run.at(p, t).compute_start_ns, t * step) << "w=" << w << " c=" << c << " hop=" << hop;
          EXPECT_EQ(run.at(p, t).comm_exposed, t >= 1 && hop > c);
        }
      }
      EXPECT_EQ(run.end_ns, (w - 1) * step + c);
    }
  }
}

TEST(RingSimulationTest, OuterLevelOfSizeOneEqualsFlatRing) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  for (int trial = 0; trial < 20; ++trial) {
    const int32_t w = 1 + static_cast<int32_t>(rng() % 7);
    const RingSchedule flat = RingSchedule::flat(w);
    const RingSchedule nested({w, 1});
    const RingSchedule inner_one({1, w});
    RingInput a;
    RingInput b;
    RingInput c;
    for (int32_t k = 0; k < w * w; ++k) {
      const auto compute = static_cast<SimNs>(rng() % 100);
      const auto hop = static_cast<SimNs>(rng() % 100);
      const auto dkv = static_cast<SimNs>(rng() % 100);
      a.compute_ns.push_back(compute);
      b.compute_ns.push_back(compute);
      c.compute_ns.push_back(compute);
      a.kv_send_ns.push_back(hop);
      b.kv_send_ns.insert(b.kv_send_ns.end(), {hop, 999});
      c.kv_send_ns.insert(c.kv_send_ns.end(), {999, hop});
      a.dkv_send_ns.push_back(dkv);
      b.dkv_send_ns.push_back(dkv);
      c.dkv_send_ns.push_back(dkv);
      a.dkv_level.push_back(0);
      b.dkv_level.push_back(0);
      c.dkv_level.push_back(1);
      a.dkv_hop_ns.push_back(dkv);
      b.dkv_hop_ns.insert(b.dkv_hop_ns.end(), {dkv, 999});
      c.dkv_hop_ns.insert(c.dkv_hop_ns.end(), {999, dkv});
    }
    const AccumulatorRoute route = trial % 2 == 0 ? AccumulatorRoute::mirror : AccumulatorRoute::direct_return;
    a.route = b.route = c.route = route;
    for (const bool backward : {false, true}) {
      const RingRun ra = simulate_ring(flat, a, backward);
      const RingRun rb = simulate_ring(nested, b, backward);
      const RingRun rc = simulate_ring(inner_one, c, backward);
      EXPECT_EQ(ra.end_ns, rb.end_ns);
      EXPECT_EQ(ra.finish_ns, rb.finish_ns);
      EXPECT_EQ(ra.finish_ns, rc.finish_ns);
      for (int32_t p = 0; p < w; ++p) {
        for (int32_t t = 0; t < w; ++t) {
          EXPECT_EQ(ra.at(p, t).compute_end_ns, rb.at(p, t).compute_end_ns);
          EXPECT_EQ(ra.at(p, t).compute_end_ns, rc.at(p, t).compute_end_ns);
        }
      }
    }
  }
}

TEST(RingSimulationTest, RotatingPositionsRotatesTheTimeline) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  const int32_t w = 6;
  const RingSchedule s = RingSchedule::flat(w);
  RingInput in = uniform_input(s, 0, {0}, 0);
  for (auto& v : in.compute_ns) v = static_cast<SimNs>(rng() % 1000);
  for (auto& v : in.kv_send_ns) v = static_cast<SimNs>(rng() % 1000);
  for (auto& v : in.dkv_send_ns) v = static_cast<SimNs>(rng() % 1000);
  for (size_t k = 0; k < in.dkv_hop_ns.size(); ++k) in.dkv_hop_ns[k] = in.dkv_send_ns[k];  // one level
  const int32_t shift = 2;
  RingInput rotated = in;
  for (int32_t p = 0; p < w; ++p) {
    for (int32_t t = 0; t < w; ++t) {
      const auto from = static_cast<size_t>(p * w + t);
      const auto to = static_cast<size_t>(((p + shift) % w) * w + t);
      rotated.compute_ns[to] = in.compute_ns[from];
      rotated.kv_send_ns[to] = in.kv_send_ns[from];
      rotated.dkv_send_ns[to] = in.dkv_send_ns[from];
      rotated.dkv_hop_ns[to] = in.dkv_hop_ns[from];
    }
  }
  for (const bool backward : {false, true}) {
    const RingRun a = simulate_ring(s, in, backward);
    const RingRun b = simulate_ring(s, rotated, backward);
    EXPECT_EQ(a.end_ns, b.end_ns);
    for (int32_t p = 0; p < w; ++p) {
      EXPECT_EQ(a.finish_ns[static_cast<size_t>(p)], b.finish_ns[static_cast<size_t>((p + shift) % w)]);
      for (int32_t t = 0; t < w; ++t) EXPECT_EQ(a.at(p, t).compute_end_ns, b.at((p + shift) % w, t).compute_end_ns);
    }
  }
}

TEST(RingSimulationTest, LessWorkOrFasterLinksNeverSlower) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  for (int trial = 0; trial < 200; ++trial) {
    const RingSchedule s = random_schedule(rng);
    RingInput in = random_input(rng, s);
    const bool backward = rng() % 2 == 1;
    const RingRun base = simulate_ring(s, in, backward);
    RingInput less = in;
    for (auto& v : less.compute_ns) v -= static_cast<SimNs>(rng() % static_cast<uint64_t>(v + 1));
    if (rng() % 2) {
      for (auto& v : less.kv_send_ns) v -= static_cast<SimNs>(rng() % static_cast<uint64_t>(v + 1));
    }
    if (rng() % 2) {
      for (auto& v : less.dkv_hop_ns) v -= static_cast<SimNs>(rng() % static_cast<uint64_t>(v + 1));
      for (auto& v : less.dkv_send_ns) v -= static_cast<SimNs>(rng() % static_cast<uint64_t>(v + 1));
    }
    const RingRun faster = simulate_ring(s, less, backward);
    EXPECT_LE(faster.end_ns, base.end_ns);
    for (size_t p = 0; p < base.finish_ns.size(); ++p) EXPECT_LE(faster.finish_ns[p], base.finish_ns[p]);
  }
}

TEST(RingSimulationTest, WithoutTransfersTheTimesAreTheSame) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  for (int trial = 0; trial < 50; ++trial) {
    const RingSchedule s = random_schedule(rng);
    RingInput in = random_input(rng, s);
    const bool backward = rng() % 2 == 1;
    const RingRun full = simulate_ring(s, in, backward);
    in.keep_transfers = false;
    const RingRun bare = simulate_ring(s, in, backward);
    EXPECT_FALSE(full.transfers.empty());
    EXPECT_TRUE(bare.transfers.empty());
    EXPECT_EQ(bare.finish_ns, full.finish_ns);
    EXPECT_EQ(bare.end_ns, full.end_ns);
    for (int32_t p = 0; p < s.ranks(); ++p) {
      for (int32_t t = 0; t < s.ranks(); ++t) {
        EXPECT_EQ(bare.at(p, t).compute_start_ns, full.at(p, t).compute_start_ns);
        EXPECT_EQ(bare.at(p, t).recv_end_ns, full.at(p, t).recv_end_ns);
      }
    }
  }
}

TEST(RingSimulationTest, BackwardTwoRanksByHand) {
  // W = 2, compute C, K/V hop T, accumulator hop D. Step 0: compute [0, C], K/V hop [0, T],
  // accumulator hop after compute and after the K/V hop on the same link:
  // [max(C, T), max(C, T) + D]. Step 1 starts at M = max(C, T), ends at M + C; the accumulator
  // returns to its owner once it arrived (M + D) and step 1 is done: end = M + max(C, D) + D.
  for (const auto& [c, t, d] : std::vector<std::tuple<SimNs, SimNs, SimNs>>{{100, 30, 60}, {50, 80, 60}, {10, 10, 10}}) {
    for (const AccumulatorRoute route : {AccumulatorRoute::mirror, AccumulatorRoute::direct_return}) {
      const RingSchedule s = RingSchedule::flat(2);
      RingInput in = uniform_input(s, c, {t}, d);
      in.route = route;
      const RingRun run = simulate_ring(s, in, true);
      const SimNs m = std::max(c, t);
      EXPECT_EQ(run.at(0, 1).compute_start_ns, m);
      EXPECT_EQ(run.end_ns, m + std::max(c, d) + d) << c << " " << t << " " << d;
    }
  }
}

TEST(RingSimulationTest, FlatRingRoutesAgree) {
  // On a flat ring the mirrored accumulators are the direct ones: inner hops, then home.
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  for (int trial = 0; trial < 50; ++trial) {
    const int32_t w = 1 + static_cast<int32_t>(rng() % 9);
    const RingSchedule s = RingSchedule::flat(w);
    RingInput in = uniform_input(s, 0, {0}, 0);
    for (auto& v : in.compute_ns) v = static_cast<SimNs>(rng() % 1000);
    for (auto& v : in.kv_send_ns) v = static_cast<SimNs>(rng() % 1000);
    for (auto& v : in.dkv_send_ns) v = static_cast<SimNs>(rng() % 1000);
    in.dkv_hop_ns = in.dkv_send_ns;
    RingInput direct = in;
    direct.route = AccumulatorRoute::direct_return;
    const RingRun a = simulate_ring(s, in, true);
    const RingRun b = simulate_ring(s, direct, true);
    EXPECT_EQ(a.finish_ns, b.finish_ns);
    ASSERT_EQ(a.transfers.size(), b.transfers.size());
    for (size_t k = 0; k < a.transfers.size(); ++k) {
      EXPECT_EQ(a.transfers[k].kind, b.transfers[k].kind);
      EXPECT_EQ(a.transfers[k].to, b.transfers[k].to);
      EXPECT_EQ(a.transfers[k].end_ns, b.transfers[k].end_ns);
    }
  }
}

TEST(RingSimulationTest, MirroredAccumulatorsByHand) {
  // Levels {2, 2}, compute C = 10, K/V hops free, accumulator hops D0 = 3 (inner), D1 = 7 (outer).
  // Computes run back to back: step t on [10t, 10t + 10]. Inner accumulator hops leave after each
  // compute: [10, 13], [20, 23], [30, 33], [40, 43]. The hops at steps 1 and 3 end an inner ring:
  // the node's sum lands on the inner successor at 23 (43), which sends it over the outer level:
  // [23, 30] (kept by the outer successor for its next outer step), then at step 3 adds the one
  // that came in at 30 and sends [43, 50] to the owner. Direct returns instead send the step-3
  // accumulator straight to the owner over the outer link: [40, 47].
  const RingSchedule s({2, 2});
  RingInput in = uniform_input(s, 10, {0, 0}, 0);
  for (size_t k = 0; k < in.dkv_hop_ns.size(); ++k) in.dkv_hop_ns[k] = k % 2 == 0 ? 3 : 7;
  const RingRun mirror = simulate_ring(s, in, true);
  EXPECT_EQ(mirror.end_ns, 50);
  for (const SimNs finish : mirror.finish_ns) EXPECT_EQ(finish, 50);
  int inner_hops = 0;
  int outer_hops = 0;
  std::set<int32_t> homes;
  for (const RingTransfer& tr : mirror.transfers) {
    if (tr.kind == TransferKind::kv) continue;
    if (tr.level == 0) {
      ++inner_hops;
      EXPECT_EQ(tr.start_ns, 10 * (tr.step + 1));
      EXPECT_EQ(tr.end_ns, 10 * (tr.step + 1) + 3);
    } else {
      ++outer_hops;
      EXPECT_EQ(tr.start_ns, tr.step == 1 ? 23 : 43);
      EXPECT_EQ(tr.end_ns, tr.step == 1 ? 30 : 50);
      EXPECT_EQ(tr.kind, tr.step == 3 ? TransferKind::dkv_return : TransferKind::dkv);
      if (tr.kind == TransferKind::dkv_return) homes.insert(tr.to);
    }
  }
  EXPECT_EQ(inner_hops, 16);  // W x W: every position, every step
  EXPECT_EQ(outer_hops, 8);   // W x outer size: one per position and outer step
  EXPECT_EQ(homes.size(), 4U);

  in.route = AccumulatorRoute::direct_return;
  for (int32_t p = 0; p < 4; ++p) {
    for (int32_t t = 0; t < 4; ++t) {
      const bool leaves_node = t == 3;
      in.dkv_send_ns[static_cast<size_t>(p * 4 + t)] = leaves_node ? 7 : 3;
      in.dkv_level[static_cast<size_t>(p * 4 + t)] = leaves_node ? 1 : 0;
    }
  }
  const RingRun direct = simulate_ring(s, in, true);
  EXPECT_EQ(direct.end_ns, 47);
}

TEST(RingSimulationTest, MirroredAccumulatorsComeHome) {
  // Any nesting: every position receives exactly one accumulator over the outermost level's last
  // hop, the one of its own chunk, after every compute of that chunk.
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  for (const std::vector<int64_t>& sizes : std::vector<std::vector<int64_t>>{{3}, {2, 3}, {2, 3, 2}, {1, 4, 1, 2}, {4, 1}}) {
    const RingSchedule s(sizes);
    RingInput in = uniform_input(s, 0, std::vector<SimNs>(sizes.size(), 0), 0);
    for (auto& v : in.compute_ns) v = static_cast<SimNs>(rng() % 1000);
    for (auto& v : in.kv_send_ns) v = static_cast<SimNs>(rng() % 1000);
    for (auto& v : in.dkv_hop_ns) v = static_cast<SimNs>(rng() % 1000);
    const RingRun run = simulate_ring(s, in, true);
    const int32_t w = s.ranks();
    std::vector<int> homes(static_cast<size_t>(w), 0);
    for (const RingTransfer& tr : run.transfers) {
      if (tr.kind != TransferKind::dkv_return) continue;
      ++homes[static_cast<size_t>(tr.to)];
      EXPECT_EQ(run.finish_ns[static_cast<size_t>(tr.to)], std::max(tr.end_ns, run.at(tr.to, w - 1).compute_end_ns));
      // Every compute of the chunk of `tr.to` is done before its accumulator lands.
      for (int32_t p = 0; p < w; ++p) {
        for (int32_t t = 0; t < w; ++t) {
          if (s.source(p, t) == tr.to) {
            EXPECT_LE(run.at(p, t).compute_end_ns, tr.end_ns);
          }
        }
      }
    }
    for (const int h : homes) EXPECT_EQ(h, w > 1 ? 1 : 0);
  }
}

TEST(RingSimulationTest, HierarchicalOuterHopOverlapsTheInnerRing) {
  // Levels {2, 2}: the outer hop of the next chunk is posted at step 0 and arrives for step 2.
  // C = 10, inner hop 4, outer hop 100: steps 0 and 1 run [0, 10], [10, 20]; step 2 waits for the
  // outer chunk until 100 and runs [100, 110]; its inner forward leaves at 100 and arrives at 104,
  // so step 3 runs [110, 120].
  const RingSchedule s({2, 2});
  const RingRun run = simulate_ring(s, uniform_input(s, 10, {4, 100}), false);
  for (int32_t p = 0; p < 4; ++p) {
    EXPECT_EQ(run.at(p, 1).compute_start_ns, 10);
    EXPECT_EQ(run.at(p, 2).compute_start_ns, 100);
    EXPECT_TRUE(run.at(p, 2).comm_exposed);
    EXPECT_EQ(run.at(p, 3).compute_start_ns, 110);
  }
  EXPECT_EQ(run.end_ns, 120);
  const RingMetrics m = ring_metrics(run, std::vector<SimNs>(16, 10));
  EXPECT_EQ(m.exposed_steps, 4);
  EXPECT_DOUBLE_EQ(m.worker_imbalance, 1.0);
}

TEST(RingSimulationTest, MetricsByHand) {
  const RingSchedule s = RingSchedule::flat(2);
  RingInput in = uniform_input(s, 0, {0});
  in.compute_ns = {30, 10, 10, 10};  // rank 0: 30 then 10; rank 1: 10 then 10
  const RingRun run = simulate_ring(s, in, false);
  const RingMetrics m = ring_metrics(run, in.compute_ns);
  EXPECT_DOUBLE_EQ(m.worker_imbalance, 40.0 / 30.0);
  EXPECT_DOUBLE_EQ(m.step_imbalance[0], 30.0 / 20.0);
  EXPECT_DOUBLE_EQ(m.step_imbalance[1], 1.0);
  EXPECT_EQ(run.end_ns, 40);
}

TEST(AllGatherPassTest, GatherThenComputeBackToBack) {
  // W = 3, compute C per chunk, gather G: the own chunk at once, the others after the gather:
  // end = max(C, G) + 2C; backward adds the reduce-scatter S after the slowest rank.
  for (const auto& [c, g] : std::vector<std::pair<SimNs, SimNs>>{{10, 4}, {10, 25}}) {
    const std::vector<SimNs> compute(9, c);
    const RingRun fwd = simulate_all_gather_pass(3, compute, g, 0);
    EXPECT_EQ(fwd.end_ns, std::max(c, g) + 2 * c);
    EXPECT_EQ(fwd.at(1, 1).comm_exposed, g > c);
    const RingRun bwd = simulate_all_gather_pass(3, compute, g, 7);
    EXPECT_EQ(bwd.end_ns, std::max(c, g) + 2 * c + 7);
  }
  EXPECT_THROW(simulate_all_gather_pass(3, std::vector<SimNs>(8, 1), 0, 0), InputError);
}

TEST(RingSimulationTest, RejectsMismatchedInputs) {
  const RingSchedule s = RingSchedule::flat(3);
  RingInput in = uniform_input(s, 1, {1});
  in.compute_ns.pop_back();
  EXPECT_THROW(simulate_ring(s, in, false), InputError);
  in = uniform_input(s, 1, {1});
  in.kv_send_ns[0] = -1;
  EXPECT_THROW(simulate_ring(s, in, false), InputError);
}

}  // namespace
}  // namespace sparsering
