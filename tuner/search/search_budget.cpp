// The search estimate and its check (tuner/search/search_budget.hpp). Tested in
// tests/tuner_search/search_budget_test.cpp and tests/cli/search_budget_cli_test.cpp.
#include "tuner/search/search_budget.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/error.hpp"
#include "common/table.hpp"

namespace sparsering {

namespace {

// Bytes of one rank in a ring order.
constexpr double kOrderRankBytes = sizeof(int64_t);
// Per candidate: the candidate (twice: the vector grows by doubling), its outcome (cost, peak,
// fits: 24 bytes), its simulated flag and its queue entry (bound, index, level: 24 bytes, twice).
constexpr double kCandidateStateBytes = 2.0 * sizeof(Candidate) + 24 + 1 + 2 * 24;
// The trace as read and the kept patterns of every head, as simulate counts them.
constexpr double kTraceCopies = 3.0;
// Per-unit costs, about a quarter of the CPU time the development machine measured
// (tests/tuner_search/bench/search_budget_bench.cpp, docs/PERF.md):
// one rank of one tier scan of a ring order (building it, then one scan per divisor of W);
constexpr double kTierScanSecondsPerRank = 100e-9;
// the step bound's collectives over the rings of one order, per (rank, ring position);
constexpr double kCollectiveSecondsPerRankPosition = 8e-9;
// the memory bound and the coarse step bound of one candidate.
constexpr double kBoundSecondsPerCandidate = 70e-9;

double as_double(int64_t value) { return static_cast<double>(value); }

/// Divisors of w that are >= 2: the first level of ring_hierarchies scans the order once for each.
int64_t divisors_from_two(int64_t w) {
  int64_t count = 0;
  for (int64_t d = 1; d * d <= w; ++d) {
    if (w % d != 0) continue;
    count += (d >= 2 ? 1 : 0) + (d != w / d ? 1 : 0);  // d and w / d (>= 2 whenever d < w / d)
  }
  return count;
}

/// Sorts both lists largest first and sums them.
void finish(SearchEstimate& e) {
  e.memory_bytes = sort_and_sum(e.memory);
  std::sort(e.time.begin(), e.time.end(), [](const TimeItem& a, const TimeItem& b) { return a.seconds > b.seconds; });
  e.seconds = 0.0;
  for (const TimeItem& item : e.time) e.seconds += item.seconds;
}

int search_threads(const SearchOptions& options) {
  return options.threads > 0 ? options.threads : static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
}

std::string seconds_text(double seconds) { return fixed(seconds, seconds >= 10.0 ? 0 : seconds >= 0.1 ? 1 : 3); }

/// Throws InputError unless the estimate's time fits `budget_seconds`.
void require_time_budget(const std::string& what, const SearchEstimate& e, double budget_seconds,
                         const std::string& advice) {
  if (e.seconds <= budget_seconds) return;
  throw InputError(str(what, " needs at least ", seconds_text(e.seconds), " s (largest: ", e.largest_time(),
                       "), over the time budget of ", seconds_text(budget_seconds), " s (--max-search-seconds); ",
                       advice));
}

}  // namespace

std::string SearchEstimate::largest_memory(size_t count) const { return largest_items(memory, count); }

std::string SearchEstimate::largest_time(size_t count) const {
  std::string out;
  for (size_t i = 0; i < time.size() && i < count; ++i) {
    out += str(i > 0 ? ", " : "", time[i].name, " ", seconds_text(time[i].seconds), " s");
  }
  return out;
}

SearchEstimate estimate_search_before_enumeration(const ModelConfig& model, const ClusterConfig& cluster,
                                                  int64_t seq_len_tokens, double trace_bytes) {
  const std::vector<ParallelDegrees> degrees = enumerate_parallel_degrees(model, cluster, seq_len_tokens);
  const double world = as_double(cluster.world_size());
  SearchEstimate e;
  e.degrees = static_cast<int64_t>(degrees.size());
  e.orders = e.degrees;
  for (const ParallelDegrees& g : degrees) {
    // At least one ring order per set of degrees: built, then scanned once for the flat ring's
    // tier and once per divisor >= 2 of W for the first hierarchy level.
    e.order_ranks += world;
    if (g.context_parallel > 1) e.tier_scan_ranks += world * as_double(1 + divisors_from_two(g.context_parallel));
    e.collective_ranks += world * as_double(g.context_parallel);
  }
  e.memory.push_back({"process", kProcessBaseBytes});
  e.memory.push_back({"ring orders (one per set of degrees, 8 bytes per GPU)", e.order_ranks * kOrderRankBytes});
  if (trace_bytes > 0.0) e.memory.push_back({"trace and patterns", kTraceCopies * trace_bytes});
  e.time.push_back({"ring orders and their tier scans", (e.order_ranks + e.tier_scan_ranks) * kTierScanSecondsPerRank});
  e.time.push_back({"step-bound collectives over every ring", e.collective_ranks * kCollectiveSecondsPerRankPosition});
  finish(e);
  return e;
}

SearchEstimate estimate_search(const ModelConfig& model, const SearchSpace& space,
                               const PlanTemplate& tmpl, const SearchOptions& options, double trace_bytes,
                               double enumeration_seconds) {
  SearchEstimate e;
  e.enumerated = true;
  e.degrees = static_cast<int64_t>(space.degrees.size());
  e.orders = static_cast<int64_t>(space.orders.size());
  e.geometries = static_cast<int64_t>(space.geometries.size());
  e.candidates = static_cast<int64_t>(space.candidates.size());

  for (const OrderChoice& order : space.orders) {
    const double ranks = as_double(static_cast<int64_t>(order.ring_order.size()));
    e.order_ranks += ranks;
    e.collective_ranks += ranks * as_double(space.degrees[static_cast<size_t>(order.degrees)].context_parallel);
  }

  // The simulation of each geometry the search may simulate, at its deepest hierarchy (the most
  // link-table levels); rings above --max-ring-simulated are skipped by the search.
  std::vector<int64_t> deepest(space.geometries.size(), -1);
  for (size_t i = 0; i < space.candidates.size(); ++i) {
    const Candidate& c = space.candidates[i];
    int64_t& best = deepest[static_cast<size_t>(c.geometry)];
    if (best < 0 || space.hierarchy_of(c).levels.size() >
                        space.hierarchy_of(space.candidates[static_cast<size_t>(best)]).levels.size()) {
      best = static_cast<int64_t>(i);
    }
  }
  SimulationOptions simulation = options.simulation;
  simulation.keep_ring_records = false;
  double largest_scratch = 0.0;
  double largest_work_set = 0.0;
  double all_work_sets = 0.0;
  for (const int64_t index : deepest) {
    if (index < 0) continue;
    const Candidate& c = space.candidates[static_cast<size_t>(index)];
    const int64_t w = space.degrees_of(c).context_parallel;
    if (options.max_simulated_ring > 0 && w > options.max_simulated_ring) continue;
    const SimulationResourceEstimate sim =
        estimate_simulation_resources(make_candidate_plan(space, c, tmpl), model, simulation, 0.0);
    largest_scratch = std::max(largest_scratch, sim.memory_bytes - kProcessBaseBytes - sim.work_set_bytes);
    largest_work_set = std::max(largest_work_set, sim.work_set_bytes);
    all_work_sets += sim.work_set_bytes;
  }
  const double concurrent = as_double(std::min<int64_t>({search_threads(options), options.round_candidates, e.candidates}));
  const double kept_work_sets =
      std::min(all_work_sets, as_double(options.work_set_cache_bytes) + as_double(options.round_work_sets) * largest_work_set);

  e.memory.push_back({"process", kProcessBaseBytes});
  e.memory.push_back({str("candidates and their search state (", e.candidates, ")"), as_double(e.candidates) * kCandidateStateBytes});
  e.memory.push_back({str("ring orders (", e.orders, ")"), e.order_ranks * kOrderRankBytes});
  if (trace_bytes > 0.0) e.memory.push_back({"trace and patterns", kTraceCopies * trace_bytes});
  e.memory.push_back({str("simulations in flight (", fixed(concurrent, 0), " threads x the largest ring's scratch)"),
                      concurrent * largest_scratch});
  e.memory.push_back({"work sets kept between rounds", kept_work_sets});
  e.time.push_back({"enumerating the space", enumeration_seconds});
  e.time.push_back({"step-bound collectives over every ring", e.collective_ranks * kCollectiveSecondsPerRankPosition});
  e.time.push_back({str("bounds of every candidate (", e.candidates, ")"), as_double(e.candidates) * kBoundSecondsPerCandidate});
  finish(e);
  return e;
}

SearchEstimate check_search_budget(const ModelConfig& model, const ClusterConfig& cluster, int64_t seq_len_tokens,
                                   const SearchSpaceOptions& space_options, const PlanTemplate& tmpl,
                                   const SearchOptions& options, double trace_bytes, const SearchBudget& budget) {
  require(budget.memory_gib > 0.0 && budget.seconds > 0.0, "search budgets must be > 0");
  const std::string space_what =
      str("tune on cluster ", cluster.name, " (", cluster.world_size(), " GPUs) at ", seq_len_tokens, " tokens");
  {
    const SearchEstimate before = estimate_search_before_enumeration(model, cluster, seq_len_tokens, trace_bytes);
    const std::string advice = str("the ", before.degrees,
                                   " sets of degrees each build ring orders over every GPU before any plan is "
                                   "bounded; use a smaller cluster or raise the budget");
    require_memory_budget(str(space_what, " (enumerating the plan space)"), before.memory_bytes, budget.memory_gib,
                          str("largest: ", before.largest_memory(), "; ", advice));
    require_time_budget(str(space_what, " (enumerating the plan space)"), before, budget.seconds, advice);
  }
  const auto start = std::chrono::steady_clock::now();
  const SearchSpace space = enumerate_search_space(model, cluster, seq_len_tokens, space_options);
  const double enumeration_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const SearchEstimate e = estimate_search(model, space, tmpl, options, trace_bytes, enumeration_seconds);
  const std::string narrow =
      "narrow the space (--blocks, --granularities, --layouts, --layout-shuffles, --comms, --recompute, --zero)";
  require_memory_budget(space_what, e.memory_bytes, budget.memory_gib,
                        str("largest: ", e.largest_memory(), "; ", narrow,
                            ", skip large rings (--max-ring-simulated), use fewer --threads or raise the budget"));
  require_time_budget(space_what, e, budget.seconds, str(narrow, " or raise the budget"));
  return e;
}

}  // namespace sparsering
