#include "tuner/search/plan_search.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <queue>
#include <thread>
#include <tuple>

#include "common/error.hpp"
#include "common/table.hpp"
#include "sim/work/kept_pattern.hpp"
#include "sim/work/pattern_set.hpp"
#include "sparsering/version.hpp"
#include "tuner/search/parallel_for.hpp"
#include "tuner/search/step_lower_bound.hpp"

namespace sparsering {

namespace {

constexpr double kGiB = static_cast<double>(int64_t{1} << 30);

struct QueueEntry {
  double bound = 0.0;
  int64_t index = 0;
  int32_t level = 0;  // 0 coarse, 1 cells, 2 ring (or final)
};

struct LaterEntry {
  bool operator()(const QueueEntry& a, const QueueEntry& b) const {
    return std::tie(a.bound, a.index) > std::tie(b.bound, b.index);
  }
};

struct Outcome {
  double cost = 0.0;
  int64_t peak_bytes = 0;
  bool fits = false;
};

/// Recall selection of the trace sample, normalized (sorted, offset 0 included) for the bounds.
PatternSet normalized_patterns(const Trace& trace, const ModelConfig& model, int64_t seq_len, int64_t sample,
                               const SparseSettings& sparse) {
  require(trace.layers == model.layers, "the trace has ", trace.layers, " layers but model ", model.name, " has ",
          model.layers);
  require(trace.heads == model.q_heads, "the trace has ", trace.heads, " heads per layer but model ", model.name,
          " has ", model.q_heads, " query heads");
  require(sample >= 0 && sample < trace.samples, "trace sample ", sample, " does not exist (the trace has ",
          trace.samples, " samples)");
  const int64_t n = trace.sample_seq_len[static_cast<size_t>(sample)];
  require(n == seq_len, "trace sample ", sample, " has ", n, " tokens but the sequence length to tune is ", seq_len,
          "; synthesize or capture a trace of that length");
  RecallSettings settings;
  settings.recall = sparse.recall;
  settings.max_verticals = sparse.max_verticals;
  settings.max_slashes = sparse.max_slashes;
  PatternSet set = select_patterns(trace, sample, settings);
  for (KeptPattern& pattern : set.patterns) pattern = normalize_pattern(pattern, n);
  return set;
}

std::string percent(double share) { return fixed(100.0 * share, 1) + "%"; }

/// Milliseconds with three significant digits after the point for small values.
std::string ms(double value) {
  const double a = std::abs(value);
  return fixed(value, a >= 100.0 ? 1 : a >= 10.0 ? 2 : 3);
}

}  // namespace

std::string_view to_string(Objective objective) {
  return objective == Objective::step_time ? "step-time" : "tokens-per-s";
}

SearchResult search_plans(const ModelConfig& model, const ClusterConfig& cluster, const Trace& trace,
                          int64_t seq_len_tokens, const SearchSpaceOptions& space_options, const PlanTemplate& tmpl,
                          const SearchOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  require(options.top >= 1, "--top must be >= 1, got ", options.top);
  require(options.memory_cap_gib >= 0.0 && std::isfinite(options.memory_cap_gib),
          "--memory-cap-gib must be a positive number of GiB, got ", options.memory_cap_gib);
  require(options.gap >= 0.0 && options.gap < 1.0, "--gap must be in [0, 1), got ", options.gap);
  require(options.round_candidates >= 1 && options.round_work_sets >= 1, "search rounds need >= 1 candidate and work set");
  require(options.max_work_sets >= 0, "the work-set budget must be >= 0, got ", options.max_work_sets);
  require(options.max_simulated_ring >= 0, "the largest simulated ring must be >= 0, got ", options.max_simulated_ring);
  require(tmpl.micro_batch_sequences >= 1, "micro batch must be >= 1 sequence");
  const GpuConfig& gpu = cluster.gpu_config;
  require(!gpu.name.empty(), "cluster '", cluster.name, "' has no loaded GPU config (gpu: ", cluster.gpu, ")");
  const int64_t gpu_bytes = gpu.memory_bytes();
  int64_t cap_bytes = gpu_bytes;
  if (options.memory_cap_gib > 0.0) {
    cap_bytes = std::min<int64_t>(gpu_bytes, static_cast<int64_t>(options.memory_cap_gib * kGiB));
  }
  const int threads = options.threads > 0 ? options.threads
                                          : static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));

  const PatternSet patterns = normalized_patterns(trace, model, seq_len_tokens, options.trace_sample, tmpl.sparse);
  SearchResult result;
  result.space = enumerate_search_space(model, cluster, seq_len_tokens, space_options);
  const SearchSpace& space = result.space;
  SearchStats& stats = result.stats;
  const auto count = static_cast<int64_t>(space.candidates.size());
  stats.candidates = count;
  stats.geometries = static_cast<int64_t>(space.geometries.size());

  const auto cost_of = [&](SimNs step_ns, const Candidate& c) {
    if (options.objective == Objective::step_time) return static_cast<double>(step_ns);
    const ParallelDegrees& g = space.degrees_of(c);
    return static_cast<double>(step_ns) /
           static_cast<double>(g.data_parallel * tmpl.micro_batch_sequences * seq_len_tokens);
  };

  // 1. Memory bounds, then the coarse step bounds.
  StepLowerBound bound(model, cluster, space, patterns, tmpl, options.simulation);
  std::priority_queue<QueueEntry, std::vector<QueueEntry>, LaterEntry> queue;
  int64_t least_memory = std::numeric_limits<int64_t>::max();
  int64_t least_memory_candidate = 0;
  for (int64_t i = 0; i < count; ++i) {
    const Candidate& c = space.candidates[static_cast<size_t>(i)];
    if (!options.prune) {
      queue.push(QueueEntry{0.0, i, 2});
      continue;
    }
    const int64_t memory = bound.memory_bytes(c);
    if (memory < least_memory) {
      least_memory = memory;
      least_memory_candidate = i;
    }
    if (memory > cap_bytes) {
      ++stats.memory_pruned;
      continue;
    }
    queue.push(QueueEntry{cost_of(bound.step_ns(c), c), i, 0});
  }
  const auto gib = [](int64_t bytes) { return fixed(static_cast<double>(bytes) / kGiB, 2); };
  require(!queue.empty(), "no plan fits in ", gib(cap_bytes), " GiB per GPU",
          options.memory_cap_gib > 0.0 ? " (--memory-cap-gib)" : str(" (", gpu.name, ")"), ": the smallest plan (",
          describe_candidate(space, space.candidates[static_cast<size_t>(least_memory_candidate)]), ") needs at least ",
          gib(least_memory), " GiB");

  const auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  stats.bound_seconds = seconds_since(started);

  // 2. Rounds of simulations.
  SimulationContext context;
  SimulationOptions sim = options.simulation;
  sim.trace_sample = options.trace_sample;
  sim.trace_key = "tuner-search";
  sim.keep_ring_records = false;
  std::vector<Outcome> outcomes(static_cast<size_t>(count));
  std::vector<char> simulated(static_cast<size_t>(count), 0);
  std::vector<char> counted(space.geometries.size(), 0);
  std::vector<std::pair<double, int64_t>> best;  // the best K feasible (cost, index), ascending
  const auto kth_cost = [&] { return best.size() < static_cast<size_t>(options.top) ? 0.0 : best.back().first; };
  const auto beaten = [&](double b) {
    if (best.size() < static_cast<size_t>(options.top)) return false;
    return options.gap == 0.0 ? b > kth_cost() : b * (1.0 + options.gap) > kth_cost();
  };
  const auto evaluate = [&](int64_t index) {
    const Candidate& c = space.candidates[static_cast<size_t>(index)];
    const PlanConfig plan = make_candidate_plan(space, c, tmpl);
    const SimulationResult r = simulate(context, plan, model, cluster, &trace, sim);
    Outcome& o = outcomes[static_cast<size_t>(index)];
    o.cost = cost_of(r.step.step_ns, c);
    o.peak_bytes = r.memory.peak_bytes;
    o.fits = r.memory.peak_bytes <= cap_bytes;
  };

  const auto work_set_bytes = [&](int32_t g) {
    const ParallelDegrees& d = space.degrees[static_cast<size_t>(space.geometries[static_cast<size_t>(g)].degrees)];
    return d.context_parallel * d.context_parallel * static_cast<int64_t>(sizeof(WorkCounts)) * model.layers *
           d.head_parallel;
  };
  int64_t cached_bytes = 0;

  while (true) {
    std::vector<int64_t> batch;
    std::vector<int32_t> fresh;  // geometries first simulated in this round
    while (!queue.empty() && static_cast<int64_t>(batch.size()) < options.round_candidates) {
      QueueEntry entry = queue.top();
      if (options.prune && beaten(entry.bound)) break;
      const Candidate& c = space.candidates[static_cast<size_t>(entry.index)];
      const int32_t g = c.geometry;
      // Refine a bound before simulating: the cheap work-cell bound of the geometry, then, before
      // a new work set would be counted, the strong cell bound and the ring bound.
      const bool too_large = options.max_simulated_ring > 0 && space.degrees_of(c).context_parallel > options.max_simulated_ring;
      const bool strong_level = entry.level == 1 && !counted[static_cast<size_t>(g)] && !too_large;
      if (entry.level == 0 || strong_level) {
        queue.pop();
        const auto t0 = std::chrono::steady_clock::now();
        const int strength = strong_level ? 2 : 1;
        if (bound.refined(g) < strength) {
          bound.refine(g, threads, strength);
          ++stats.refined;
        }
        if (strong_level && bound.ring_bound_applies(c) && !bound.ring_refined(c)) {
          bound.refine_ring(c, threads);
          ++stats.ring_refined;
        }
        stats.refine_seconds += seconds_since(t0);
        entry.bound = cost_of(bound.step_ns(c), c);
        entry.level = strength;
        queue.push(entry);
        continue;
      }
      if (too_large || (!counted[static_cast<size_t>(g)] && std::find(fresh.begin(), fresh.end(), g) == fresh.end())) {
        if (too_large ||
            (options.max_work_sets > 0 && stats.work_sets + static_cast<int64_t>(fresh.size()) >= options.max_work_sets)) {
          queue.pop();
          if (stats.budget_skipped == 0 || entry.bound < stats.skipped_best_bound) stats.skipped_best_bound = entry.bound;
          ++stats.budget_skipped;
          continue;
        }
        if (static_cast<int64_t>(fresh.size()) >= options.round_work_sets) break;
        fresh.push_back(g);
      }
      queue.pop();
      batch.push_back(entry.index);
    }
    if (batch.empty()) break;
    ++stats.rounds;
    int64_t fresh_bytes = 0;
    for (const int32_t g : fresh) fresh_bytes += work_set_bytes(g);
    if (cached_bytes > 0 && cached_bytes + fresh_bytes > options.work_set_cache_bytes) {
      // Keep memory bounded: drop every counted work set; later rounds count again what they need.
      context.clear();
      std::fill(counted.begin(), counted.end(), 0);
      cached_bytes = 0;
      for (const int64_t index : batch) {
        const int32_t g = space.candidates[static_cast<size_t>(index)].geometry;
        if (std::find(fresh.begin(), fresh.end(), g) == fresh.end()) {
          fresh.push_back(g);
          fresh_bytes += work_set_bytes(g);
        }
      }
    }
    cached_bytes += fresh_bytes;
    // One candidate per new geometry first, so the simulator counts each work set once.
    std::vector<int64_t> first;
    std::vector<int64_t> rest;
    for (const int64_t index : batch) {
      const int32_t g = space.candidates[static_cast<size_t>(index)].geometry;
      const bool is_fresh = std::find(fresh.begin(), fresh.end(), g) != fresh.end();
      const bool seen = std::any_of(first.begin(), first.end(), [&](int64_t other) {
        return space.candidates[static_cast<size_t>(other)].geometry == g;
      });
      (is_fresh && !seen ? first : rest).push_back(index);
    }
    const auto t0 = std::chrono::steady_clock::now();
    parallel_for(static_cast<int64_t>(first.size()), threads, [&](int64_t k) { evaluate(first[static_cast<size_t>(k)]); });
    parallel_for(static_cast<int64_t>(rest.size()), threads, [&](int64_t k) { evaluate(rest[static_cast<size_t>(k)]); });
    stats.simulate_seconds += seconds_since(t0);
    for (const int32_t g : fresh) counted[static_cast<size_t>(g)] = 1;
    stats.work_sets += static_cast<int64_t>(fresh.size());
    for (const int64_t index : batch) {
      simulated[static_cast<size_t>(index)] = 1;
      ++stats.simulated;
      const Outcome& o = outcomes[static_cast<size_t>(index)];
      if (!o.fits) {
        ++stats.over_cap;
        continue;
      }
      best.emplace_back(o.cost, index);
      std::sort(best.begin(), best.end());
      if (best.size() > static_cast<size_t>(options.top)) best.pop_back();
    }
    if (options.progress) {
      SearchProgress p;
      p.candidates = count;
      p.simulated = stats.simulated;
      p.settled = stats.simulated + stats.memory_pruned + stats.budget_skipped;
      p.work_sets = stats.work_sets;
      p.best_cost = best.empty() ? 0.0 : best.front().first;
      options.progress(p);
    }
  }
  const double lowest_open = queue.empty() ? 0.0 : queue.top().bound;
  stats.bound_pruned = static_cast<int64_t>(queue.size());

  // 3. Ranking: re-simulate the best K (and the runner-up) with ring records for the figures.
  std::vector<std::pair<double, int64_t>> feasible;
  int64_t least_simulated = std::numeric_limits<int64_t>::max();
  for (int64_t i = 0; i < count; ++i) {
    if (!simulated[static_cast<size_t>(i)]) continue;
    const Outcome& o = outcomes[static_cast<size_t>(i)];
    least_simulated = std::min(least_simulated, o.peak_bytes);
    if (o.fits) feasible.emplace_back(o.cost, i);
  }
  require(!feasible.empty(), "no simulated plan fits in ", gib(cap_bytes),
          " GiB per GPU: the smallest needs ", gib(least_simulated), " GiB");
  std::sort(feasible.begin(), feasible.end());
  std::vector<int64_t> chosen;
  for (size_t k = 0; k < feasible.size() && k < static_cast<size_t>(options.top); ++k) chosen.push_back(feasible[k].second);
  int64_t runner = -1;
  for (const auto& [c, index] : feasible) {
    if (c > feasible.front().first) {
      runner = index;
      break;
    }
    if (index != feasible.front().second) ++result.ties;
  }
  std::vector<int64_t> detail = chosen;
  if (runner >= 0 && std::find(chosen.begin(), chosen.end(), runner) == chosen.end()) detail.push_back(runner);
  std::vector<RankedPlan> plans(detail.size());
  const auto ranking_started = std::chrono::steady_clock::now();
  SimulationOptions records = sim;
  records.keep_ring_records = true;
  parallel_for(static_cast<int64_t>(detail.size()), threads, [&](int64_t k) {
    RankedPlan& r = plans[static_cast<size_t>(k)];
    r.candidate = detail[static_cast<size_t>(k)];
    const Candidate& c = space.candidates[static_cast<size_t>(r.candidate)];
    r.plan = make_candidate_plan(space, c, tmpl);
    const SimulationResult sr = simulate(context, r.plan, model, cluster, &trace, records);
    r.cost = cost_of(sr.step.step_ns, c);
    r.figures = plan_figures(sr, c.recompute);
    r.plan.prediction = sr.prediction(kVersion);
    r.notes = sr.notes;
  });
  stats.simulate_seconds += seconds_since(ranking_started);
  for (size_t k = 0; k < chosen.size(); ++k) result.ranked.push_back(plans[k]);
  if (runner >= 0) {
    result.has_runner_up = true;
    for (const RankedPlan& p : plans) {
      if (p.candidate == runner) result.runner_up = p;
    }
    result.explanation = explain_winner(space, result.ranked.front(), result.runner_up);
  } else {
    result.explanation = "every simulated plan ties with the winner; it comes first by enumeration order";
  }

  // 4. What the search proved.
  const double winner = result.ranked.front().cost;
  const auto against = [&](double b) { return winner > 0.0 ? b / winner : 1.0; };
  if (!options.prune) {
    result.guarantee = str("brute force: every one of the ", count, " candidates was simulated");
  } else if (stats.budget_skipped > 0) {
    std::string why;
    if (options.max_work_sets > 0) why = str("the work-set budget (", options.max_work_sets, ")");
    if (options.max_simulated_ring > 0) {
      why += str(why.empty() ? "" : " and ", "the ring-size limit (", options.max_simulated_ring, ")");
    }
    result.guarantee =
        str("partial: ", why, " left ", stats.budget_skipped,
            " candidates unsimulated; their best lower bound is ", fixed(100.0 * against(stats.skipped_best_bound), 1),
            "% of the winner's ", to_string(options.objective), " cost, so the winner is within ",
            fixed(std::max(0.0, 100.0 * (1.0 / against(stats.skipped_best_bound) - 1.0)), 1), "% of the optimum");
  } else if (options.gap > 0.0) {
    result.guarantee = str("within ", fixed(100.0 * options.gap, 1), "%: every candidate not simulated has a lower bound "
                           "within ", fixed(100.0 * options.gap, 1), "% of the K-th best or above it; each ranked plan "
                           "costs at most ", fixed(100.0 * options.gap, 1), "% more than the exact one");
  } else {
    result.guarantee = str("exact: every candidate not simulated has a lower bound above the ", options.top == 1 ? "" : "K-th ",
                           "best simulated plan", lowest_open > 0.0 ? str(" (the lowest is ", percent(against(lowest_open)),
                                                                             " of the winner's cost)") : "",
                           ", so the ranking is optimal over the whole space");
  }
  stats.seconds = seconds_since(started);
  return result;
}

std::string explain_winner(const SearchSpace& space, const RankedPlan& winner, const RankedPlan& runner_up) {
  const Candidate& w = space.candidates[static_cast<size_t>(winner.candidate)];
  const Candidate& r = space.candidates[static_cast<size_t>(runner_up.candidate)];
  std::vector<std::string> mine;
  std::vector<std::string> theirs;
  const auto differ = [&](const std::string& a, const std::string& b) {
    if (a == b) return;
    mine.push_back(a);
    theirs.push_back(b);
  };
  differ(describe_degrees(space.degrees_of(w)), describe_degrees(space.degrees_of(r)));
  differ(describe_order(space.order_of(w)), describe_order(space.order_of(r)));
  differ(str("ring ", describe_hierarchy(space.hierarchy_of(w))), str("ring ", describe_hierarchy(space.hierarchy_of(r))));
  differ(describe_layout(space.geometry_of(w).layout), describe_layout(space.geometry_of(r).layout));
  differ(str("b", space.geometry_of(w).block), str("b", space.geometry_of(r).block));
  differ(std::string(to_string(w.comm)), std::string(to_string(r.comm)));
  differ(str("recompute ", to_string(w.recompute)), str("recompute ", to_string(r.recompute)));
  differ(str("zero", w.zero_stage), str("zero", r.zero_stage));
  const auto join = [](const std::vector<std::string>& parts) {
    std::string out;
    for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
    return out;
  };

  const PlanFigures& a = winner.figures;
  const PlanFigures& b = runner_up.figures;
  struct Part {
    const char* name;
    double winner_ms;
    double runner_ms;
  };
  const Part parts[] = {{"attention", a.attention_ms, b.attention_ms},
                        {"dense compute", a.dense_ms, b.dense_ms},
                        {"collectives", a.collectives_ms, b.collectives_ms},
                        {"exposed gradient sync", a.grad_sync_ms, b.grad_sync_ms},
                        {"optimizer", a.optimizer_ms, b.optimizer_ms}};
  const Part* top = &parts[0];
  for (const Part& p : parts) {
    if (p.runner_ms - p.winner_ms > top->runner_ms - top->winner_ms) top = &p;
  }
  std::string verb;
  if (std::string(top->name) == "attention") {
    if (b.step_imbalance - a.step_imbalance >= 0.02) {
      verb = str("cuts step imbalance from ", fixed(b.step_imbalance, 2), " to ", fixed(a.step_imbalance, 2));
    } else if (b.exposed_share - a.exposed_share >= 0.02) {
      verb = str("cuts late K/V arrivals from ", percent(b.exposed_share), " to ", percent(a.exposed_share),
                 " of ring steps");
    } else if (b.worker_imbalance - a.worker_imbalance >= 0.02) {
      verb = str("cuts worker imbalance from ", fixed(b.worker_imbalance, 2), " to ", fixed(a.worker_imbalance, 2));
    }
  } else if (std::string(top->name) == "collectives" && b.exposed_comm_ms > a.exposed_comm_ms) {
    verb = str("cuts exposed communication from ", ms(b.exposed_comm_ms), " ms to ", ms(a.exposed_comm_ms), " ms");
  }
  if (verb.empty()) verb = str("saves ", ms(top->runner_ms - top->winner_ms), " ms of ", top->name);
  const std::string what = mine.empty() ? std::string("the winner") : join(mine);
  const std::string other = theirs.empty() ? std::string("the runner-up") : join(theirs);
  return str(what, " (vs ", other, ") ", verb, ": ", top->name, " ", ms(top->runner_ms), " ms -> ", ms(top->winner_ms),
             " ms; step ", ms(b.step_ms), " ms -> ", ms(a.step_ms), " ms");
}

}  // namespace sparsering
