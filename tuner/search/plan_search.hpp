// The plan search (docs/tuner.md section 3): branch and bound over the space of
// tuner/search/search_space.hpp, evaluating candidates with the simulator.
//
// 1. Memory: a candidate whose memory lower bound exceeds the cap (the GPU's memory, or less) is
//    dropped; it could never fit.
// 2. Every other candidate gets a step-time lower bound (tuner/search/step_lower_bound.hpp), coarse
//    at first, and waits in a queue ordered by (bound, enumeration index).
// 3. Rounds: the queue's head is taken while its bound can still beat the K-th best plan found so
//    far (K = --top; with --gap g it must beat it by more than a factor 1 + g). A coarse bound is
//    refined first (tiles, then the cheap per-cell work bound of its geometry) and re-queued; a
//    candidate whose geometry is not counted yet is refined once more (the strong cell bound and
//    the ring bound). Then its geometry's work is counted by the simulator's work counter, layer
//    by layer (busiest bound first): each counted layer replaces its bound by exact kernel times
//    (StepLowerBound::add_exact_layers), so a geometry stops being counted once its candidates'
//    bounds rise above the K-th best. While there is no K-th best a geometry is counted whole,
//    alone in its round on every thread, and the best bounded candidates of it are simulated at
//    once (their costs set the K-th best); after that each round counts the next twelfth of the
//    layers of at most `round_work_sets` geometries. Once every layer of a geometry is counted its
//    work set goes into the simulator's context, and its candidates are simulated (at most
//    `round_candidates` a round, in parallel; candidates that share ring passes after one of
//    them). The best K are updated after the round. A round never depends on the thread count,
//    so neither does the result. Counted work stays between rounds up to `work_set_cache_bytes`
//    (estimated as W^2 cells x layers x head groups); beyond that what the round does not use is
//    dropped (the bounds keep their exact layers) and counted again when needed.
// 4. The search ends when the queue is empty or its head is pruned: every candidate not simulated
//    then has a bound that cannot beat the K-th best, so the ranking is exact (with --gap g:
//    each ranked cost is within 1 + g of the exact one). With `max_work_sets`, candidates whose
//    geometry would exceed that many counted (or partly counted) work sets are skipped instead, and with
//    `max_simulated_ring` so are rings larger than that (counting their work costs O(W^2) per
//    head); the result then says how far the best bound of the skipped candidates is from the
//    winner.
// Objectives: step time, or tokens/s (cost = step time per token), both under the memory cap.
// Several trace samples (SearchOptions::trace_samples): every candidate gets a bound and, when
// simulated, a cost per sample; it is ranked, bounded and pruned by the statistic of those
// (mean, p50, p90 or max: each monotone in every sample's cost, so the statistic of the
// per-sample bounds bounds it and the search stays exact). Work is counted per sample.
// The best K by cost are then grouped into statistical ties (tuner/search/tie_groups.hpp): lower
// peak memory, then the simpler plan, first within a group. Tested in tests/tuner_search/plan_search_test.cpp
// (pruned parallel search == brute force, thread-count independence).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/config/cluster_config.hpp"
#include "sim/config/model_config.hpp"
#include "sim/config/plan_config.hpp"
#include "sim/output/sample_statistics.hpp"
#include "sim/step/simulation.hpp"
#include "traces/trace.hpp"
#include "tuner/search/plan_figures.hpp"
#include "tuner/search/search_space.hpp"

namespace sparsering {

enum class Objective : int32_t { step_time = 0, tokens_per_s = 1 };

/// Where a running search stands (for progress displays).
struct SearchProgress {
  int64_t candidates = 0;  ///< enumerated
  int64_t settled = 0;     ///< simulated or pruned so far
  int64_t simulated = 0;
  int64_t work_sets = 0;
  double best_cost = 0.0;  ///< objective cost of the best plan so far (0 = none yet)
};

struct SearchOptions {
  Objective objective = Objective::step_time;
  int64_t top = 5;                 ///< plans ranked (K >= 1)
  double memory_cap_gib = 0.0;     ///< per GPU; 0 = the GPU's memory
  int threads = 0;                 ///< simulation threads; 0 = hardware concurrency
  double gap = 0.0;                ///< relative optimality tolerance (0 = exact)
  bool prune = true;               ///< false: simulate every candidate (brute force, for tests)
  int64_t round_candidates = 32;   ///< candidates per round
  int64_t round_work_sets = 2;     ///< geometries counted per round (one while there is no K-th best)
  int64_t max_work_sets = 0;       ///< geometries whose work may be counted; 0 = no limit
  int64_t max_simulated_ring = 0;  ///< simulate rings of at most this many positions; 0 = no limit
  int64_t work_set_cache_bytes = int64_t{3} << 30;  ///< counted work kept between rounds (then dropped)
  int64_t trace_sample = 0;        ///< trace sample whose patterns are used (when trace_samples is empty)
  /// Several samples: every candidate is evaluated on each and ranked by `rank_by` of its costs.
  std::vector<int64_t> trace_samples;
  SampleStatistic rank_by = SampleStatistic::mean;
  /// Relative error of the model's predictions: plans closer than this are statistically tied
  /// (tuner/search/tie_groups.hpp); 0 ties only equal costs.
  double tie_band = 0.0;
  std::string tie_band_source;     ///< where tie_band comes from (for the output)
  SimulationOptions simulation;    ///< roofline assumptions, gradient-sync overlap
  std::function<void(const SearchProgress&)> progress;  ///< called after each round (may be empty)
};

/// One plan of the ranking.
struct RankedPlan {
  int64_t candidate = 0;   ///< index into SearchResult::space.candidates
  double cost = 0.0;       ///< objective cost: step ns, or step ns per token
  PlanConfig plan;         ///< with its prediction
  PlanFigures figures;
  std::vector<std::string> notes;  ///< the simulation's assumptions (uncalibrated GPU, ...)
  int32_t tie_group = 0;           ///< 0 = statistically tied with the fastest plan
  int64_t peak_bytes = 0;          ///< simulated peak memory per GPU (the largest over the samples)
  std::vector<double> sample_costs;    ///< per sample of the search (SearchResult::samples)
  std::vector<double> sample_step_ms;  ///< per sample
  int64_t representative_sample = 0;   ///< the trace sample whose figures, notes and prediction these are
  std::vector<int64_t> fastest_on;     ///< trace samples on which no ranked plan is faster
};

/// Every simulated candidate (for --format json).
struct SimulatedPlan {
  int64_t candidate = 0;
  double cost = 0.0;
  int64_t peak_bytes = 0;
  bool fits = false;  ///< within the memory cap
  std::vector<double> sample_costs;  ///< per sample of the search
};

struct SearchStats {
  int64_t candidates = 0;        ///< enumerated
  int64_t memory_pruned = 0;     ///< memory lower bound above the cap
  int64_t bound_pruned = 0;      ///< step-time bound could not beat the K-th best
  int64_t budget_skipped = 0;    ///< left out by max_work_sets or max_simulated_ring
  int64_t simulated = 0;
  int64_t over_cap = 0;          ///< simulated, but the simulated memory exceeds the cap
  int64_t work_sets = 0;         ///< geometries whose work was counted (wholly or in part)
  int64_t layers_counted = 0;    ///< layers counted over all geometries (a whole work set is the model's layers)
  int64_t geometries = 0;        ///< geometries in the space
  int64_t refined = 0;           ///< geometry work bounds computed (cheap or strong)
  int64_t ring_refined = 0;      ///< (geometry, order, hierarchy) ring bounds computed
  int64_t rounds = 0;
  /// Candidates pruned by a step-time bound, by the bound's strength: coarse, tiles, cells,
  /// strong cells and ring, and with counted layers (they add up to bound_pruned).
  std::vector<int64_t> pruned_by_bound = std::vector<int64_t>(5, 0);
  double skipped_best_bound = 0.0;  ///< lowest cost bound of a budget-skipped candidate (0 = none)
  double seconds = 0.0;          ///< wall time of the search
  double bound_seconds = 0.0;    ///< of which: enumeration, memory and coarse bounds
  double refine_seconds = 0.0;   ///< refining bounds
  double count_seconds = 0.0;    ///< counting the work of layers
  double simulate_seconds = 0.0; ///< simulating (rounds and the final ranking)
};

struct SearchResult {
  SearchSpace space;
  std::vector<int64_t> samples;    ///< the trace samples every candidate was evaluated on
  std::vector<RankedPlan> ranked;  ///< best first, at most `top`
  /// The best simulated plan whose cost is worse than the winner's (absent if all tie).
  bool has_runner_up = false;
  RankedPlan runner_up;
  int64_t ties = 0;                ///< other simulated plans with exactly the fastest plan's cost
  int64_t tied = 0;                ///< other ranked plans in the winner's tie group (within tie_band)
  std::string tie_note;            ///< how the tie group was broken (empty without one)
  std::vector<SimulatedPlan> simulated;  ///< every simulated candidate, ascending by (cost, index)
  SearchStats stats;
  std::string guarantee;           ///< what the search proved, in one sentence
  std::string explanation;         ///< why the winner beats the runner-up, in one line
};

/// Runs the search for `model` on all GPUs of `cluster` at `seq_len_tokens`, with the patterns of
/// `trace` (sample options.trace_sample) at the recall settings of tmpl.sparse. Throws InputError
/// when the trace does not match the model or the length, when options are out of range, and
/// when no plan fits the memory cap (naming the smallest memory any plan needs).
SearchResult search_plans(const ModelConfig& model, const ClusterConfig& cluster, const Trace& trace,
                          int64_t seq_len_tokens, const SearchSpaceOptions& space_options, const PlanTemplate& tmpl,
                          const SearchOptions& options);

/// The one-line comparison of the winner with the runner-up (file comment of plan_figures.hpp):
/// the dimensions in which they differ and the step component that differs most.
/// Only step components differing by more than `band` x the runner-up's step are named.
std::string explain_winner(const SearchSpace& space, const RankedPlan& winner, const RankedPlan& runner_up,
                           double band = 0.0);

/// "step-time" / "tokens-per-s".
std::string_view to_string(Objective objective);

}  // namespace sparsering
