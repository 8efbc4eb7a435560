// What a plan search (tuner/search/plan_search.hpp) will need, estimated before it runs, so that
// `sparsering tune` refuses a request beyond its budgets (--max-memory-gib, --max-search-seconds,
// docs/robustness.md section 2) with exit 2 before any work, naming the figure, the budget and the
// flag that relaxes it. Two steps:
//   1. From the sets of degrees alone (cheap for any cluster the configs accept): each set builds
//      at least one ring order over all G GPUs (8 bytes per rank), derives its ring hierarchies
//      from at least one tier scan of the order per divisor of W, and the step bound prices the
//      collectives of every ring of the order (O(G x W)). These are lower bounds; at the schema
//      limits (2^26 GPUs) they reach hundreds of GiB and hours, and the request stops here.
//   2. Otherwise the space is enumerated (step 1 showed that is affordable; --max-candidates caps
//      it) and counted exactly. Memory: the candidates and their search state, the ring orders,
//      the trace read and its kept patterns, the bound's cell cache, and the simulations: the
//      largest the search may run (rings up to --max-ring-simulated), one per thread, each with
//      its own scratch (sim/step/resource_estimate.hpp) while their work sets are shared and kept
//      between rounds up to the search's cache size. Time: the enumeration as measured in step 2,
//      the bound's collectives and one step bound per candidate; a lower bound, since how many
//      simulations the bounds leave is known only while searching (the tune command's time
//      limit, common/time_limit.hpp, stops a search that runs past the budget anyway).
// Per-unit costs are about a quarter of the CPU time the development machine measured
// (tests/tuner_search/bench/search_budget_bench.cpp, docs/PERF.md), so the time figure stays a
// lower bound on faster machines.
// Tested in tests/tuner_search/search_budget_test.cpp (figures against the enumerated space and
// hand counts) and tests/cli/search_budget_cli_test.cpp (hostile clusters through the binary).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/memory_budget.hpp"
#include "sim/config/cluster_config.hpp"
#include "sim/config/model_config.hpp"
#include "sim/step/resource_estimate.hpp"
#include "tuner/search/plan_search.hpp"
#include "tuner/search/search_space.hpp"

namespace sparsering {

/// The budgets a search must fit.
struct SearchBudget {
  double memory_gib = 0.0;  ///< > 0: --max-memory-gib, or the machine's (common/memory_budget.hpp)
  double seconds = 0.0;     ///< > 0: --max-search-seconds
};

/// One part of the time estimate.
struct TimeItem {
  std::string name;
  double seconds = 0.0;
};

struct SearchEstimate {
  bool enumerated = false;            ///< step 2 ran: the counts below are exact
  int64_t degrees = 0;                ///< sets of degrees
  int64_t orders = 0;                 ///< ring orders (step 1: one per set of degrees)
  int64_t geometries = 0;             ///< 0 until step 2
  int64_t candidates = 0;             ///< 0 until step 2
  double order_ranks = 0.0;           ///< ranks over the ring orders (8 bytes each)
  double tier_scan_ranks = 0.0;       ///< step 1: ranks scanned for ring hierarchy tiers
  double collective_ranks = 0.0;      ///< ranks x ring positions the step bound's collectives visit
  std::vector<MemoryEstimatePart> memory;     ///< largest first
  double memory_bytes = 0.0;          ///< sum of `memory`
  std::vector<TimeItem> time;         ///< largest first
  double seconds = 0.0;               ///< sum of `time`: a lower bound of the search's wall time

  /// "name X GiB, name Y GiB" / "name X s, name Y s" for the `count` largest items.
  std::string largest_memory(size_t count = 2) const;
  std::string largest_time(size_t count = 2) const;
};

/// Step 1 (file comment): lower bounds from the degrees, without enumerating the space.
SearchEstimate estimate_search_before_enumeration(const ModelConfig& model, const ClusterConfig& cluster,
                                                  int64_t seq_len_tokens, double trace_bytes);

/// Step 2 (file comment) on an enumerated space; `enumeration_seconds` is what enumerating it took.
SearchEstimate estimate_search(const ModelConfig& model, const SearchSpace& space, const PlanTemplate& tmpl,
                               const SearchOptions& options, double trace_bytes,
                               double enumeration_seconds);

/// Both steps, each checked against `budget`: throws InputError naming the estimate, the budget,
/// its flag and what to change when a step exceeds it; else returns the step-2 estimate. Also
/// throws what enumerate_search_space throws (e.g. over space_options.max_candidates).
SearchEstimate check_search_budget(const ModelConfig& model, const ClusterConfig& cluster, int64_t seq_len_tokens,
                                   const SearchSpaceOptions& space_options, const PlanTemplate& tmpl,
                                   const SearchOptions& options, double trace_bytes, const SearchBudget& budget);

}  // namespace sparsering
