// Lower bounds of the simulator (tuner/search/step_lower_bound.hpp): on random candidates of
// small clusters, every strength of the step-time bound and the memory bound stays at or below
// what the simulator returns, also with layers whose work is counted, and with a calibration that
// charges the backward in its kernel's units (key lists, column lists, items, columns, chunk key
// blocks).
#include <gtest/gtest.h>

#include <random>
#include <utility>
#include <vector>

#include "sim/step/simulation.hpp"
#include "sim/work/kept_pattern.hpp"
#include "sim/work/block_geometry.hpp"
#include "sim/work/pattern_set.hpp"
#include "sim/work/work_set.hpp"
#include "tests/tuner_search/tuner_test_inputs.hpp"
#include "tuner/search/step_lower_bound.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

struct Inputs {
  ModelConfig model;
  ClusterConfig cluster;
  int64_t seq_len = 0;
  Trace trace;
  PatternSet patterns;
};

Inputs make_setup(int64_t nodes, int64_t gpus, int64_t racks, bool roofline, uint64_t seed, int64_t vertical_scale,
                  bool backward_units = false, ModelConfig model = testing::tiny_model()) {
  Inputs s{std::move(model), testing::test_cluster(nodes, gpus, 80, racks, roofline, backward_units), 8192, {}, {}};
  s.trace = testing::tiny_trace(s.model, s.seq_len, seed, vertical_scale);
  s.patterns = select_patterns(s.trace, 0, RecallSettings{});
  for (KeptPattern& p : s.patterns.patterns) p = normalize_pattern(p, s.seq_len);
  return s;
}

/// The space of a setup, its plan template and the simulation options of the bounds and the
/// simulations they are checked against.
struct Search {
  SearchSpace space;
  PlanTemplate tmpl;
  SimulationOptions options;
};

Search search_for(const Inputs& s, int64_t micro_batch = 1) {
  Search out{enumerate_search_space(s.model, s.cluster, s.seq_len, SearchSpaceOptions{}), {}, {}};
  out.tmpl.micro_batch_sequences = micro_batch;
  out.tmpl.model = s.model.name;
  out.tmpl.cluster = s.cluster.name;
  out.options.trace_key = "bounds-test";
  out.options.keep_ring_records = false;
  return out;
}

void check_bounds(const Inputs& s, int samples, uint64_t seed, int64_t micro_batch = 1) {
  const auto [space, tmpl, options] = search_for(s, micro_batch);
  SimulationContext context;
  StepLowerBound bound(s.model, s.cluster, space, s.patterns, tmpl, options);
  std::mt19937_64 rng(sparsering::testing_support::fixed_seed(seed));
  std::uniform_int_distribution<size_t> pick(0, space.candidates.size() - 1);
  for (int k = 0; k < samples; ++k) {
    const Candidate& c = space.candidates[pick(rng)];
    const PlanConfig plan = make_candidate_plan(space, c, tmpl);
    const SimulationResult r = simulate(context, plan, s.model, s.cluster, &s.trace, options);
    const std::string what = describe_candidate(space, c);
    EXPECT_LE(bound.memory_bytes(c), r.memory.peak_bytes) << what;
    // Strengths in the order the search applies them; each must bound the simulation.
    std::vector<SimNs> bounds;
    if (bound.refined(c.geometry) == 0) bounds.push_back(bound.step_ns(c));
    for (const int strength : {StepLowerBound::kTiles, StepLowerBound::kCells, StepLowerBound::kStrong}) {
      bound.refine(c.geometry, 2, strength);
      bounds.push_back(bound.step_ns(c));
    }
    if (bound.ring_bound_applies(c)) {
      bound.refine_ring(c, 2);
      bounds.push_back(bound.step_ns(c));
    }
    for (const SimNs b : bounds) {
      EXPECT_LE(b, r.step.step_ns) << what;
      EXPECT_GT(b, 0) << what;
    }
    // The refined bounds are useful: within a factor 3 of the simulation here.
    EXPECT_GT(bounds.back() * 3, r.step.step_ns) << what;
  }
}

TEST(StepLowerBound, BoundsTheSimulationOnTwoNodesOfTwo) { check_bounds(make_setup(2, 2, 0, false, 11, 1), 120, 1); }

TEST(StepLowerBound, BoundsTheSimulationOnOneNodeOfFourWithManyColumns) {
  check_bounds(make_setup(1, 4, 0, false, 12, 20), 120, 2);
}

TEST(StepLowerBound, BoundsTheSimulationOnTwoNodesOfFourUncalibrated) {
  check_bounds(make_setup(2, 4, 0, true, 13, 5), 120, 3);
}

TEST(StepLowerBound, BoundsTheSimulationWithRacks) { check_bounds(make_setup(4, 2, 2, false, 14, 3), 120, 4); }

TEST(StepLowerBound, BoundsTheSimulationWhenTheBackwardIsChargedInItsUnits) {
  check_bounds(make_setup(2, 4, 0, false, 17, 5, true), 120, 5);
  check_bounds(make_setup(1, 4, 0, false, 18, 20, true), 120, 6);
  check_bounds(make_setup(4, 2, 2, false, 19, 3, true), 120, 7);
  check_bounds(make_setup(2, 4, 0, false, 20, 5, true), 60, 8, 2);  // two sequences per micro batch
}

TEST(StepLowerBound, BoundsTheSimulationWithManyHeadGroups) {
  // 16 query heads on 16 GPUs: up to 16 head groups, so the cell bounds after the first refine
  // only the busiest groups of each layer and keep the others' weaker terms.
  check_bounds(make_setup(2, 8, 0, false, 21, 5, true, testing::tiny_model(2, 16, 4)), 120, 9);
}

TEST(StepLowerBound, CountedLayersRaiseTheBoundAndStillBoundTheSimulation) {
  // Layers whose work is counted replace their bound by exact kernel times: the step bound only
  // rises, stays at or below the simulation, and every layer counted (in two parts, out of
  // order) leaves the ring bound with the simulator's own cells.
  const Inputs s = make_setup(2, 4, 0, false, 16, 5);
  const auto [space, tmpl, options] = search_for(s);
  SimulationContext context;
  StepLowerBound bound(s.model, s.cluster, space, s.patterns, tmpl, options);
  std::mt19937_64 rng(sparsering::testing_support::fixed_seed(8));
  int checked = 0;
  for (int trial = 0; trial < 40 && checked < 12; ++trial) {
    const Candidate& c = space.candidates[std::uniform_int_distribution<size_t>(0, space.candidates.size() - 1)(rng)];
    if (bound.exact_layers(c.geometry) > 0) continue;
    const Geometry& g = space.geometry_of(c);
    const SimulationResult r = simulate(context, make_candidate_plan(space, c, tmpl), s.model, s.cluster, &s.trace, options);
    bound.refine(c.geometry, 2, StepLowerBound::kStrong);
    if (bound.ring_bound_applies(c)) bound.refine_ring(c, 2);
    SimNs before = bound.step_ns(c);
    const std::vector<int64_t> order = {1, 0};  // layers counted one at a time, the last first
    for (const int64_t layer : order) {
      PatternSet one;
      one.layers = 1;
      one.heads = s.patterns.heads;
      one.seq_len_tokens = s.patterns.seq_len_tokens;
      for (int64_t h = 0; h < s.patterns.heads; ++h) one.patterns.push_back(s.patterns.at(layer, h));
      const WorkSet work = count_work_set(make_block_geometry(g.layout, g.block, g.block), one,
                                          space.degrees_of(c).head_parallel, 1, 2);
      bound.add_exact_layers(c.geometry, {layer}, work, 2);
      const SimNs after = bound.step_ns(c);
      EXPECT_GE(after, before) << describe_candidate(space, c);
      EXPECT_LE(after, r.step.step_ns) << describe_candidate(space, c);
      before = after;
    }
    EXPECT_EQ(bound.exact_layers(c.geometry), 2);
    // Refining again keeps the counted terms.
    bound.refine(c.geometry, 2, StepLowerBound::kStrong);
    EXPECT_EQ(bound.step_ns(c), before);
    ++checked;
  }
  EXPECT_GE(checked, 6);
}

TEST(StepLowerBound, RejectsPatternsOfAnotherModel) {
  const Inputs s = make_setup(1, 4, 0, false, 15, 1);
  const SearchSpace space = enumerate_search_space(s.model, s.cluster, s.seq_len, SearchSpaceOptions{});
  PatternSet other = s.patterns;
  other.heads = 8;
  EXPECT_THROW(StepLowerBound(s.model, s.cluster, space, other, PlanTemplate{}, SimulationOptions{}), InputError);
}

}  // namespace
}  // namespace sparsering
