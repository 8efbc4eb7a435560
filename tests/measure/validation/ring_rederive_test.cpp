// Tests of measure/validation/ring_rederive.hpp: on random flat and hierarchical rings, forward and
// backward, both accumulator routes, the link inputs recovered from a simulated pass reproduce the
// pass exactly, and a changed compute matrix changes the pass as the event model says.
#include <gtest/gtest.h>

#include <random>

#include "common/error.hpp"
#include "measure/validation/ring_rederive.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

RingInput random_input(const RingSchedule& schedule, bool backward, AccumulatorRoute route, std::mt19937_64& rng) {
  std::uniform_int_distribution<SimNs> time(1, 5000);
  const auto w = static_cast<size_t>(schedule.ranks());
  const auto l = static_cast<size_t>(schedule.levels());
  RingInput input;
  input.route = route;
  input.compute_ns.resize(w * w);
  for (auto& c : input.compute_ns) c = time(rng);
  input.kv_send_ns.resize(w * w * l);
  for (auto& c : input.kv_send_ns) c = time(rng);
  if (backward) {
    input.dkv_hop_ns.resize(w * w * l);
    for (auto& c : input.dkv_hop_ns) c = time(rng);
    input.dkv_send_ns.resize(w * w);
    for (auto& c : input.dkv_send_ns) c = time(rng);
    input.dkv_level.assign(w * w, 0);
  }
  return input;
}

void expect_same_run(const RingRun& a, const RingRun& b) {
  ASSERT_EQ(a.ranks, b.ranks);
  EXPECT_EQ(a.end_ns, b.end_ns);
  EXPECT_EQ(a.finish_ns, b.finish_ns);
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (size_t k = 0; k < a.steps.size(); ++k) {
    EXPECT_EQ(a.steps[k].compute_start_ns, b.steps[k].compute_start_ns) << k;
    EXPECT_EQ(a.steps[k].recv_end_ns, b.steps[k].recv_end_ns) << k;
  }
  EXPECT_EQ(a.transfers.size(), b.transfers.size());
}

TEST(RingRederive, RecoveredInputsReproduceRandomPasses) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  const std::vector<std::vector<int64_t>> shapes = {{2}, {8}, {4, 2}, {2, 2, 2}, {1, 4}, {3, 5}};
  for (const auto& levels : shapes) {
    const RingSchedule schedule(levels);
    for (bool backward : {false, true}) {
      for (AccumulatorRoute route : {AccumulatorRoute::mirror, AccumulatorRoute::direct_return}) {
        const RingInput input = random_input(schedule, backward, route, rng);
        const RingRun run = simulate_ring(schedule, input, backward);
        const RingRun again = resimulate_ring(schedule, run, backward, route, input.compute_ns);
        SCOPED_TRACE(testing::Message() << "levels " << levels.size() << " W " << schedule.ranks() << " bwd "
                                        << backward << " route " << static_cast<int>(route));
        expect_same_run(run, again);
      }
    }
  }
}

TEST(RingRederive, ComputeBoundFlatRingFollowsTheClosedForm) {
  // Uniform compute C and hop T on a flat ring: the forward pass takes (W-1) x max(C, T) + C.
  const int32_t w = 6;
  const RingSchedule schedule = RingSchedule::flat(w);
  RingInput input;
  input.compute_ns.assign(static_cast<size_t>(w * w), 100);
  input.kv_send_ns.assign(static_cast<size_t>(w * w), 300);
  const RingRun run = simulate_ring(schedule, input, false);
  EXPECT_EQ(run.end_ns, (w - 1) * 300 + 100);
  // Measured compute of 700 per step: compute bound now.
  const RingRun slower = resimulate_ring(schedule, run, false, AccumulatorRoute::mirror,
                                         std::vector<SimNs>(static_cast<size_t>(w * w), 700));
  EXPECT_EQ(slower.end_ns, w * 700);
}

TEST(RingRederive, RejectsMismatchedSizes) {
  const RingSchedule schedule = RingSchedule::flat(4);
  RingInput input;
  input.compute_ns.assign(16, 10);
  input.kv_send_ns.assign(16, 10);
  const RingRun run = simulate_ring(schedule, input, false);
  EXPECT_THROW(resimulate_ring(schedule, run, false, AccumulatorRoute::mirror, std::vector<SimNs>(15, 1)), InputError);
  EXPECT_THROW(recover_ring_input(RingSchedule::flat(3), run, false, AccumulatorRoute::mirror), InputError);
}

}  // namespace
}  // namespace sparsering
