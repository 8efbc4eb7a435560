// The plan search (tuner/search/plan_search.hpp): on small clusters the pruned parallel search
// ranks exactly what simulating every candidate ranks (same plans, same predicted costs), for
// both objectives, under a memory cap and over several trace samples by each statistic; a plan
// that wins on one sample and loses on another shows it; the result does not depend on the
// thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "tests/tuner_search/tuner_test_inputs.hpp"
#include "tuner/search/plan_search.hpp"

namespace sparsering {
namespace {

struct Case {
  int64_t nodes;
  int64_t gpus;
  int64_t racks;
  double memory_gib;
  int64_t seq_len;
  uint64_t seed;
  bool backward_units = false;  ///< the calibration charges the backward in its kernel's units
};

SearchSpaceOptions small_space() {
  SearchSpaceOptions o;
  o.zero_stages = {0, 1, 3};
  return o;
}

/// The tiny model on the case's cluster with the plan template a search of it uses.
struct Setup {
  ModelConfig model;
  ClusterConfig cluster;
  PlanTemplate tmpl;
};

Setup setup_for(const Case& c) {
  Setup s{testing::tiny_model(), testing::test_cluster(c.nodes, c.gpus, c.memory_gib, c.racks, false, c.backward_units), {}};
  s.tmpl.model = s.model.name;
  s.tmpl.cluster = s.cluster.name;
  return s;
}

SearchResult run(const Case& c, const Trace& trace, bool prune, int threads, Objective objective, double cap_gib,
                 int64_t top = 4) {
  const ModelConfig model = testing::tiny_model();
  const ClusterConfig cluster = testing::test_cluster(c.nodes, c.gpus, c.memory_gib, c.racks, false, c.backward_units);
  PlanTemplate tmpl;
  tmpl.model = model.name;
  tmpl.cluster = cluster.name;
  SearchOptions options;
  options.prune = prune;
  options.threads = threads;
  options.objective = objective;
  options.memory_cap_gib = cap_gib;
  options.top = top;
  options.round_candidates = 8;  // many small rounds: pruning decisions change between rounds
  return search_plans(model, cluster, trace, c.seq_len, small_space(), tmpl, options);
}

void expect_same_ranking(const SearchResult& pruned, const SearchResult& brute) {
  ASSERT_EQ(pruned.ranked.size(), brute.ranked.size());
  for (size_t k = 0; k < brute.ranked.size(); ++k) {
    EXPECT_EQ(pruned.ranked[k].candidate, brute.ranked[k].candidate)
        << "rank " << k + 1 << ": " << describe_candidate(pruned.space, pruned.space.candidates[static_cast<size_t>(pruned.ranked[k].candidate)])
        << " vs " << describe_candidate(brute.space, brute.space.candidates[static_cast<size_t>(brute.ranked[k].candidate)]);
    EXPECT_EQ(pruned.ranked[k].cost, brute.ranked[k].cost) << "rank " << k + 1;
    EXPECT_EQ(pruned.ranked[k].plan.prediction->step_ms, brute.ranked[k].plan.prediction->step_ms);
  }
  // The explanation compares the winner with the best simulated plan slower than it (docs/tuner.md,
  // `why:`). When the best K all tie, that plan lies beyond them and the pruned search may not
  // have simulated it: then it says so, and it never names another runner-up.
  if (pruned.has_runner_up == brute.has_runner_up) {
    EXPECT_EQ(pruned.explanation, brute.explanation);
    if (pruned.has_runner_up) {
      EXPECT_EQ(pruned.runner_up.candidate, brute.runner_up.candidate);
    }
    return;
  }
  // One search simulated a slower plan that the other pruned: the best K of both all tie.
  const SearchResult& without = pruned.has_runner_up ? brute : pruned;
  const SearchResult& with = pruned.has_runner_up ? pruned : brute;
  for (const RankedPlan& p : without.ranked) EXPECT_EQ(p.cost, without.ranked.front().cost) << "all ranked plans tie";
  EXPECT_EQ(without.explanation.rfind("every simulated plan", 0), 0U) << without.explanation;
  const bool simulated = std::any_of(without.simulated.begin(), without.simulated.end(),
                                     [&](const SimulatedPlan& p) { return p.candidate == with.runner_up.candidate; });
  EXPECT_FALSE(simulated) << "a simulated slower plan would have been named";
}

class PrunedEqualsBruteForce : public ::testing::TestWithParam<Case> {};

TEST_P(PrunedEqualsBruteForce, StepTimeAndTokensPerSecond) {
  const Case c = GetParam();
  const Trace trace = testing::tiny_trace(testing::tiny_model(), c.seq_len, c.seed, 4);
  for (const Objective objective : {Objective::step_time, Objective::tokens_per_s}) {
    const SearchResult brute = run(c, trace, false, 2, objective, 0.0);
    const SearchResult pruned = run(c, trace, true, 2, objective, 0.0);
    EXPECT_EQ(brute.stats.simulated, brute.stats.candidates);
    expect_same_ranking(pruned, brute);
    EXPECT_LT(pruned.stats.simulated, brute.stats.simulated);
    EXPECT_EQ(pruned.guarantee.rfind("exact", 0), 0U) << pruned.guarantee;
  }
}

TEST_P(PrunedEqualsBruteForce, UnderAMemoryCap) {
  const Case c = GetParam();
  const Trace trace = testing::tiny_trace(testing::tiny_model(), c.seq_len, c.seed + 1, 4);
  // A cap between the smallest and the largest simulated memory, so that it bites.
  const SearchResult all = run(c, trace, false, 2, Objective::step_time, 0.0, 1000000);
  double least = 1e30;
  double most = 0.0;
  for (const RankedPlan& p : all.ranked) {
    least = std::min(least, p.figures.peak_memory_gib);
    most = std::max(most, p.figures.peak_memory_gib);
  }
  const double cap = 0.5 * (least + most);
  const SearchResult brute = run(c, trace, false, 2, Objective::tokens_per_s, cap);
  const SearchResult pruned = run(c, trace, true, 2, Objective::tokens_per_s, cap);
  expect_same_ranking(pruned, brute);
  EXPECT_GT(pruned.stats.memory_pruned + pruned.stats.over_cap, 0);
  for (const RankedPlan& p : pruned.ranked) EXPECT_LE(p.figures.peak_memory_gib, cap);
}

TEST_P(PrunedEqualsBruteForce, WithATieBandAndTheShuffleDimension) {
  // The default space searches per-layer and loader layouts; a tie band re-orders the same top K.
  const Case c = GetParam();
  const Trace trace = testing::tiny_trace(testing::tiny_model(), c.seq_len, c.seed + 2, 4);
  const ModelConfig model = testing::tiny_model();
  const ClusterConfig cluster = testing::test_cluster(c.nodes, c.gpus, c.memory_gib, c.racks, false, c.backward_units);
  PlanTemplate tmpl;
  tmpl.model = model.name;
  tmpl.cluster = cluster.name;
  SearchOptions options;
  options.threads = 2;
  options.top = 6;
  options.round_candidates = 8;
  options.tie_band = 0.03;
  options.prune = false;
  const SearchResult brute = search_plans(model, cluster, trace, c.seq_len, small_space(), tmpl, options);
  options.prune = true;
  const SearchResult pruned = search_plans(model, cluster, trace, c.seq_len, small_space(), tmpl, options);
  expect_same_ranking(pruned, brute);
  EXPECT_EQ(pruned.tie_note, brute.tie_note);
  for (size_t k = 1; k < pruned.ranked.size(); ++k) {
    const RankedPlan& a = pruned.ranked[k - 1];
    const RankedPlan& b = pruned.ranked[k];
    EXPECT_LE(a.tie_group, b.tie_group);
    if (a.tie_group == b.tie_group) {
      EXPECT_LE(a.peak_bytes, b.peak_bytes);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SmallClusters, PrunedEqualsBruteForce,
                         ::testing::Values(Case{2, 2, 0, 80, 8192, 21}, Case{1, 4, 0, 80, 8192, 22},
                                           Case{2, 4, 0, 80, 8192, 23}, Case{4, 2, 2, 80, 4096, 24},
                                           Case{2, 4, 0, 80, 8192, 25, true}, Case{4, 2, 2, 80, 4096, 26, true}),
                         [](const ::testing::TestParamInfo<Case>& param) {
                           return str(param.param.nodes, "x", param.param.gpus, param.param.racks > 0 ? "_racks" : "",
                                      param.param.backward_units ? "_backward_units" : "");
                         });

TEST(PlanSearch, DroppingCountedWorkChangesNothing) {
  // With no room to keep counted work between rounds, geometries are counted again when needed:
  // the ranking is the same, only more layers are counted.
  const Case c{2, 4, 0, 80, 8192, 33};
  const Trace trace = testing::tiny_trace(testing::tiny_model(), c.seq_len, c.seed, 4);
  const auto [model, cluster, tmpl] = setup_for(c);
  SearchOptions options;
  options.threads = 2;
  options.top = 4;
  options.round_candidates = 8;
  const SearchResult kept = search_plans(model, cluster, trace, c.seq_len, small_space(), tmpl, options);
  options.work_set_cache_bytes = 1;
  const SearchResult dropped = search_plans(model, cluster, trace, c.seq_len, small_space(), tmpl, options);
  expect_same_ranking(dropped, kept);
  EXPECT_GE(dropped.stats.layers_counted, kept.stats.layers_counted);
  options.prune = false;
  const SearchResult brute = search_plans(model, cluster, trace, c.seq_len, small_space(), tmpl, options);
  expect_same_ranking(dropped, brute);
}

TEST(PlanSearch, SeveralSamplesRankedByEachStatisticEqualBruteForce) {
  // Three samples that differ as training steps do: for every statistic the pruned search ranks
  // what simulating every candidate on every sample ranks.
  const Case c{2, 2, 0, 80, 8192, 61};
  const auto [model, cluster, tmpl] = setup_for(c);
  const Trace trace = testing::tiny_trace(model, c.seq_len, c.seed, 4, 3);
  for (const SampleStatistic statistic :
       {SampleStatistic::mean, SampleStatistic::p50, SampleStatistic::p90, SampleStatistic::max}) {
    SearchOptions options;
    options.threads = 2;
    options.top = 4;
    options.round_candidates = 8;
    options.trace_samples = {0, 1, 2};
    options.rank_by = statistic;
    options.prune = false;
    const SearchResult brute = search_plans(model, cluster, trace, c.seq_len, small_space(), tmpl, options);
    options.prune = true;
    const SearchResult pruned = search_plans(model, cluster, trace, c.seq_len, small_space(), tmpl, options);
    expect_same_ranking(pruned, brute);
    EXPECT_LT(pruned.stats.simulated, brute.stats.simulated) << to_string(statistic);
    EXPECT_EQ(pruned.samples, (std::vector<int64_t>{0, 1, 2}));
    for (const RankedPlan& p : pruned.ranked) {
      ASSERT_EQ(p.sample_costs.size(), 3U);
      EXPECT_DOUBLE_EQ(p.cost, sample_statistic(p.sample_costs, statistic));
    }
  }
}

TEST(PlanSearch, APlanThatWinsOnOneSampleAndLosesOnAnotherShowsIt) {
  // crossing_trace: splitting heads wins sample 0, a context-parallel ring wins sample 1.
  const ModelConfig model = testing::tiny_model();
  const int64_t n = 8192;
  const Trace trace = testing::crossing_trace(model, n);
  const ClusterConfig cluster = testing::test_cluster(1, 2, 80);
  PlanTemplate tmpl;
  tmpl.model = model.name;
  tmpl.cluster = cluster.name;
  tmpl.sparse.recall = 1.0;
  SearchSpaceOptions space;
  space.layouts = {LayoutKind::contiguous};
  space.block_sizes = {64};
  space.comms = {CommPrimitive::p2p};
  space.recomputes = {RecomputeMode::none};
  space.zero_stages = {0};
  SearchOptions options;
  options.threads = 2;
  options.top = 3;
  options.trace_samples = {0, 1};
  const auto find = [&](const SearchResult& r, int64_t head_parallel, int64_t context_parallel) {
    for (const RankedPlan& p : r.ranked) {
      const ParallelDegrees& d = r.space.degrees_of(r.space.candidates[static_cast<size_t>(p.candidate)]);
      if (d.head_parallel == head_parallel && d.context_parallel == context_parallel) return p;
    }
    ADD_FAILURE() << "no plan H" << head_parallel << " W" << context_parallel << " ranked";
    return RankedPlan{};
  };
  std::vector<int64_t> winners;  // head-parallel degree of the first plan, by statistic
  for (const SampleStatistic statistic : {SampleStatistic::max, SampleStatistic::p50}) {
    options.rank_by = statistic;
    const SearchResult r = search_plans(model, cluster, trace, n, space, tmpl, options);
    const RankedPlan heads = find(r, 2, 1);
    const RankedPlan ring = find(r, 1, 2);
    ASSERT_EQ(heads.sample_costs.size(), 2U);
    EXPECT_LT(heads.sample_costs[0], ring.sample_costs[0]);
    EXPECT_GT(heads.sample_costs[1], ring.sample_costs[1]);
    EXPECT_EQ(heads.fastest_on, (std::vector<int64_t>{0}));
    EXPECT_EQ(ring.fastest_on, (std::vector<int64_t>{1}));
    winners.push_back(r.space.degrees_of(r.space.candidates[static_cast<size_t>(r.ranked.front().candidate)]).head_parallel);
  }
  // The worst sample favours splitting heads; the better of the two (p50 of two) the ring.
  EXPECT_EQ(winners, (std::vector<int64_t>{2, 1}));
}

TEST(PlanSearch, ResultDoesNotDependOnTheThreadCount) {
  const Case c{2, 4, 0, 80, 8192, 31};
  const Trace trace = testing::tiny_trace(testing::tiny_model(), c.seq_len, c.seed, 4);
  const SearchResult one = run(c, trace, true, 1, Objective::step_time, 0.0);
  const SearchResult three = run(c, trace, true, 3, Objective::step_time, 0.0);
  expect_same_ranking(one, three);
  EXPECT_EQ(one.stats.simulated, three.stats.simulated);
  EXPECT_EQ(one.stats.work_sets, three.stats.work_sets);
  EXPECT_EQ(one.stats.rounds, three.stats.rounds);
  EXPECT_EQ(one.stats.bound_pruned, three.stats.bound_pruned);
  EXPECT_EQ(one.stats.layers_counted, three.stats.layers_counted);
  EXPECT_EQ(one.stats.pruned_by_bound, three.stats.pruned_by_bound);
  EXPECT_EQ(one.guarantee, three.guarantee);
}

TEST(PlanSearch, AGapOrAWorkSetBudgetKeepsCostsWithinWhatTheyClaim) {
  const Case c{2, 4, 0, 80, 8192, 41};
  const Trace trace = testing::tiny_trace(testing::tiny_model(), c.seq_len, c.seed, 4);
  const SearchResult exact = run(c, trace, true, 2, Objective::step_time, 0.0, 1);
  const auto [model, cluster, tmpl] = setup_for(c);
  SearchOptions options;
  options.top = 1;
  options.gap = 0.05;
  const SearchResult gapped = search_plans(model, cluster, trace, c.seq_len, small_space(), tmpl, options);
  EXPECT_LE(gapped.ranked.front().cost, exact.ranked.front().cost * 1.05);
  EXPECT_LE(gapped.stats.simulated, exact.stats.simulated);
  EXPECT_EQ(gapped.guarantee.rfind("within 5.0%", 0), 0U) << gapped.guarantee;
  options.gap = 0.0;
  options.max_work_sets = 1;
  const SearchResult budget = search_plans(model, cluster, trace, c.seq_len, small_space(), tmpl, options);
  EXPECT_EQ(budget.stats.work_sets, 1);
  EXPECT_GE(budget.ranked.front().cost, exact.ranked.front().cost);
  if (budget.stats.budget_skipped > 0) {
    EXPECT_EQ(budget.guarantee.rfind("partial", 0), 0U) << budget.guarantee;
    // The certificate: the optimum is either found or among the skipped, at or above their bound.
    EXPECT_LE(std::min(budget.ranked.front().cost, budget.stats.skipped_best_bound), exact.ranked.front().cost);
  }
}

TEST(PlanSearch, RejectsMismatchedTracesAndImpossibleCaps) {
  const ModelConfig model = testing::tiny_model();
  const ClusterConfig cluster = testing::test_cluster(1, 4, 80);
  const Trace trace = testing::tiny_trace(model, 4096, 5);
  PlanTemplate tmpl;
  tmpl.model = model.name;
  tmpl.cluster = cluster.name;
  SearchOptions options;
  try {
    search_plans(model, cluster, trace, 8192, SearchSpaceOptions{}, tmpl, options);
    FAIL() << "a trace of another length must be rejected";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("4096 tokens"), std::string::npos) << e.what();
  }
  EXPECT_THROW(search_plans(testing::tiny_model(3), cluster, trace, 4096, SearchSpaceOptions{}, tmpl, options),
               InputError);
  options.memory_cap_gib = 1e-6;
  try {
    search_plans(model, cluster, trace, 4096, SearchSpaceOptions{}, tmpl, options);
    FAIL() << "a cap below every plan must be rejected";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no plan fits"), std::string::npos) << e.what();
  }
  options.memory_cap_gib = 0.0;
  options.top = 0;
  EXPECT_THROW(search_plans(model, cluster, trace, 4096, SearchSpaceOptions{}, tmpl, options), InputError);
}

TEST(PlanSearch, ExplainsTheWinnerAgainstTheRunnerUp) {
  const Case c{2, 2, 0, 80, 8192, 51};
  const Trace trace = testing::tiny_trace(testing::tiny_model(), c.seq_len, c.seed, 4);
  const SearchResult r = run(c, trace, true, 2, Objective::step_time, 0.0);
  ASSERT_TRUE(r.has_runner_up);
  EXPECT_GT(r.runner_up.cost, r.ranked.front().cost);
  EXPECT_NE(r.explanation.find("(vs "), std::string::npos) << r.explanation;
  EXPECT_NE(r.explanation.find(" ms -> "), std::string::npos) << r.explanation;
  for (const RankedPlan& p : r.ranked) {
    ASSERT_TRUE(p.plan.prediction.has_value());
    EXPECT_EQ(p.plan.prediction->attention_fwd_ms.size(), 2U);
    EXPECT_NEAR(p.figures.step_ms, p.plan.prediction->step_ms, 1e-9);
  }
}

}  // namespace
}  // namespace sparsering
