// The plan search (tuner/search/plan_search.hpp): bound, prune, simulate and rank the candidates.
// Tested in tests/tuner_search/plan_search_test.cpp.
#include "tuner/search/plan_search.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <queue>
#include <thread>
#include <tuple>

#include "common/error.hpp"
#include "common/table.hpp"
#include "sim/work/kept_pattern.hpp"
#include "sim/output/sample_statistics.hpp"
#include "sim/work/block_geometry.hpp"
#include "sim/work/pattern_set.hpp"
#include "sim/work/work_set.hpp"
#include "sparsering/version.hpp"
#include "tuner/search/parallel_for.hpp"
#include "tuner/search/step_lower_bound.hpp"
#include "tuner/search/tie_groups.hpp"

namespace sparsering {

namespace {

constexpr double kGiB = static_cast<double>(int64_t{1} << 30);
/// Once a K-th best exists, a geometry's layers are counted in this many steps (file comment of
/// plan_search.hpp).
constexpr int64_t kCountSteps = 12;

struct QueueEntry {
  double bound = 0.0;
  int64_t index = 0;
  int32_t level = 0;   // 0 coarse, then the StepLowerBound strength of its bound
  int64_t exact = 0;   // counted layers of its geometry when the bound was computed
};

struct LaterEntry {
  bool operator()(const QueueEntry& a, const QueueEntry& b) const {
    return std::tie(a.bound, a.index) > std::tie(b.bound, b.index);
  }
};

struct Outcome {
  double cost = 0.0;                  // the ranking statistic over the samples' costs
  std::vector<double> sample_costs;   // per sample of the search
  int64_t peak_bytes = 0;             // the largest over the samples
  bool fits = false;
};

/// Layers of one geometry to count in a round.
struct CountTask {
  int32_t geometry = 0;
  size_t sample = 0;  // index into the search's samples
  std::vector<int64_t> layers;
};

/// The counted work of one geometry: layers in the order they are counted, their matrices, and
/// the whole work set once every layer is in (it is then also in the simulator's context).
struct CountState {
  std::vector<int64_t> order;                  // layers, busiest bound first (set at the first count)
  size_t next = 0;                             // layers of `order` counted so far
  std::vector<WorkMatrix> matrices;            // [layer x groups + group] (empty until counted)
  std::shared_ptr<const WorkSet> complete;     // every layer counted
  bool started = false;                        // counting ever began (for the work-set budget)
};

/// Drops a geometry's counted work; that its counting began stays (the work-set budget counts it).
void forget_counted(CountState& state) {
  const bool was_started = state.started;
  state = CountState{};
  state.started = was_started;
}

/// The simulator context's key of a geometry's complete work set in one sample.
std::string work_key_of(const std::string& pattern_key, const Geometry& geometry, const WorkSet& work) {
  return SimulationContext::work_key(pattern_key, geometry.layout, geometry.block, geometry.block, work.head_groups,
                                     work.micro_batch);
}

/// One trace sample the search evaluates every candidate on: its patterns (normalized; also the
/// simulator's, found under their cache key), the bounds on them, the simulation options and the
/// counted work of every geometry.
struct SampleSearch {
  int64_t sample = 0;
  std::shared_ptr<const PatternSet> patterns;
  std::string pattern_key;
  SimulationOptions sim;
  std::unique_ptr<StepLowerBound> bound;
  std::vector<CountState> counting;  // per geometry
};

/// Recall selection of the trace sample, normalized (sorted, offset 0 included) for the bounds.
PatternSet normalized_patterns(const Trace& trace, const ModelConfig& model, int64_t seq_len, int64_t sample,
                               const RecallSettings& settings) {
  require(trace.layers == model.layers, "the trace has ", trace.layers, " layers but model ", model.name, " has ",
          model.layers);
  require(trace.heads == model.q_heads, "the trace has ", trace.heads, " heads per layer but model ", model.name,
          " has ", model.q_heads, " query heads");
  require(sample >= 0 && sample < trace.samples, "trace sample ", sample, " does not exist (the trace has ",
          trace.samples, " samples)");
  const int64_t n = trace.sample_seq_len[static_cast<size_t>(sample)];
  require(n == seq_len, "trace sample ", sample, " has ", n, " tokens but the sequence length to tune is ", seq_len,
          "; synthesize or capture a trace of that length");
  PatternSet set = select_patterns(trace, sample, settings);
  set.kv_group = model.q_heads / model.kv_heads;
  for (KeptPattern& pattern : set.patterns) pattern = normalize_pattern(pattern, n);
  return set;
}

std::string percent(double share) { return fixed(100.0 * share, 1) + "%"; }

/// Milliseconds with three significant digits after the point for small values.
std::string ms(double value) {
  const double a = std::abs(value);
  return fixed(value, a >= 100.0 ? 1 : a >= 10.0 ? 2 : 3);
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string gib(int64_t bytes) { return fixed(static_cast<double>(bytes) / kGiB, 2); }

/// One search_plans() call, phase by phase (the steps of tuner/search/plan_search.hpp): run()
/// calls the phases in the order they are declared, each reading what the earlier ones left.
class PlanSearch {
 public:
  PlanSearch(const ModelConfig& model, const ClusterConfig& cluster, const Trace& trace, int64_t seq_len_tokens,
             const SearchSpaceOptions& space_options, const PlanTemplate& tmpl, const SearchOptions& options)
      : started_(std::chrono::steady_clock::now()),
        model_(model),
        cluster_(cluster),
        trace_(trace),
        seq_len_tokens_(seq_len_tokens),
        space_options_(space_options),
        template_(tmpl),
        options_(options) {}

  /// Every phase in order; the result of search_plans().
  SearchResult run() {
    check_options();
    enumerate_candidates();
    bound_and_prune();
    simulate_survivors();
    rank_and_explain();
    state_guarantee();
    result_.stats.seconds = seconds_since(started_);
    return std::move(result_);
  }

 private:
  /// Checks the options, and sets the memory cap (bytes) and the thread count.
  void check_options();
  /// The recall-selected patterns for the bounds, and the space of candidates.
  void enumerate_candidates();
  /// Memory bound of every candidate (dropped above the cap), then the coarse step bound of the
  /// rest into the queue. Throws InputError when no candidate fits.
  void bound_and_prune();
  /// Rounds of simulations until the queue is empty or its head cannot beat the K-th best.
  void simulate_survivors();
  /// Takes the next round's work off the queue, refining bounds on the way: candidates whose
  /// work set is counted go to `batch`, geometries that need more counted layers to `counts`.
  /// False when the queue holds nothing more to simulate or count.
  bool next_round(std::vector<int64_t>& batch, std::vector<CountTask>& counts);
  /// Counts the round's layers (their exact terms go into the bounds), then simulates its batch
  /// (while there is no K-th best, with the best bounded candidates of each geometry just
  /// completed) and updates the best K.
  void run_round(std::vector<int64_t> batch, const std::vector<CountTask>& counts);
  /// Counts the layers of each task on the threads, adds them to the bounds, and hands every
  /// work set now complete to the simulator's context.
  void count_layers(const std::vector<CountTask>& counts);
  /// The next layers of geometry `g` to count in sample `sample` (file comment of plan_search.hpp).
  std::vector<int64_t> next_layers(size_t sample, int32_t g) const;
  /// Keeps the counted work within work_set_cache_bytes: drops what this round does not need.
  void limit_counted_work(const std::vector<int64_t>& batch, const std::vector<CountTask>& counts);
  /// Drops the counted work of every geometry that can no longer place a plan in the best K: none
  /// of its candidates is among them, and each is simulated or has a bound that is beaten (the
  /// K-th best only falls and bounds only rise, so it stays so). The ranking re-simulates only
  /// the best K (and a runner-up that a recount serves if its work was dropped).
  void release_settled_work();
  /// Simulates candidate `index` with the search's options into its outcome. Thread-safe for
  /// distinct indices.
  void evaluate(int64_t index);
  /// Re-assembles the best K (and the runner-up) from the cached ring passes; ranks and explains them.
  void rank_and_explain();
  /// What the search proved, in one sentence.
  void state_guarantee();

  /// Objective cost of a step of `step_ns` for candidate `c`: step ns, or step ns per token.
  double cost_of(SimNs step_ns, const Candidate& c) const;
  /// Cost of the K-th best plan so far (0 while fewer than K).
  double kth_cost() const;
  /// Whether a candidate with cost bound `bound` can no longer enter the best K.
  bool beaten(double bound) const;
  /// Estimated bytes of the counted work of geometry `g` (W^2 cells x layers x head groups).
  int64_t work_set_bytes(int32_t g) const;
  /// The ranking statistic of the samples' step-time bounds of `c` (a bound of the statistic of
  /// its costs: every statistic ranked by is monotone in each sample's cost).
  double bound_cost(const Candidate& c) const;
  /// The statistic of per-sample costs (SearchOptions::rank_by).
  double statistic(const std::vector<double>& sample_costs) const;
  /// Counted layers of geometry `g`, summed over the samples.
  int64_t exact_layers(int32_t g) const;
  /// Every sample's work set of geometry `g` is counted.
  bool complete(int32_t g) const;
  /// Counting of geometry `g` began in some sample (for the work-set budget).
  bool started(int32_t g) const;

  const std::chrono::steady_clock::time_point started_;
  const ModelConfig& model_;
  const ClusterConfig& cluster_;
  const Trace& trace_;
  const int64_t seq_len_tokens_;
  const SearchSpaceOptions& space_options_;
  const PlanTemplate& template_;
  const SearchOptions& options_;

  SearchResult result_;
  int64_t cap_bytes_ = 0;
  int threads_ = 1;
  std::vector<SampleSearch> samples_;
  std::priority_queue<QueueEntry, std::vector<QueueEntry>, LaterEntry> queue_;

  SimulationContext context_;
  std::vector<Outcome> outcomes_;                 // per candidate
  std::vector<char> simulated_;                   // per candidate
  std::vector<std::vector<int64_t>> open_of_geometry_;  // per geometry: its candidates in the queue at the start
  std::vector<std::pair<double, int64_t>> best_;  // the best K feasible (cost, index), ascending
  int64_t cached_bytes_ = 0;                      // estimated bytes of the counted work sets
  double lowest_open_ = 0.0;                      // lowest bound left in the queue (0 = none)
};

double PlanSearch::cost_of(SimNs step_ns, const Candidate& c) const {
  if (options_.objective == Objective::step_time) return static_cast<double>(step_ns);
  const ParallelDegrees& g = result_.space.degrees_of(c);
  return static_cast<double>(step_ns) /
         static_cast<double>(g.data_parallel * template_.micro_batch_sequences * seq_len_tokens_);
}

double PlanSearch::statistic(const std::vector<double>& sample_costs) const {
  return sample_statistic(sample_costs, options_.rank_by);
}

double PlanSearch::bound_cost(const Candidate& c) const {
  std::vector<double> costs;
  for (const SampleSearch& s : samples_) costs.push_back(cost_of(s.bound->step_ns(c), c));
  return statistic(costs);
}

int64_t PlanSearch::exact_layers(int32_t g) const {
  int64_t total = 0;
  for (const SampleSearch& s : samples_) total += s.bound->exact_layers(g);
  return total;
}

bool PlanSearch::complete(int32_t g) const {
  return std::all_of(samples_.begin(), samples_.end(),
                     [&](const SampleSearch& s) { return s.counting[static_cast<size_t>(g)].complete != nullptr; });
}

bool PlanSearch::started(int32_t g) const {
  return std::any_of(samples_.begin(), samples_.end(),
                     [&](const SampleSearch& s) { return s.counting[static_cast<size_t>(g)].started; });
}

double PlanSearch::kth_cost() const {
  return best_.size() < static_cast<size_t>(options_.top) ? 0.0 : best_.back().first;
}

bool PlanSearch::beaten(double b) const {
  if (best_.size() < static_cast<size_t>(options_.top)) return false;
  return options_.gap == 0.0 ? b > kth_cost() : b * (1.0 + options_.gap) > kth_cost();
}

int64_t PlanSearch::work_set_bytes(int32_t g) const {
  const SearchSpace& space = result_.space;
  const ParallelDegrees& d = space.degrees[static_cast<size_t>(space.geometries[static_cast<size_t>(g)].degrees)];
  return d.context_parallel * d.context_parallel * static_cast<int64_t>(sizeof(WorkCounts)) * model_.layers *
         d.head_parallel;
}

void PlanSearch::check_options() {
  const SearchOptions& options = options_;
  require(options.top >= 1, "--top must be >= 1, got ", options.top);
  require(options.memory_cap_gib >= 0.0 && std::isfinite(options.memory_cap_gib),
          "--memory-cap-gib must be a positive number of GiB, got ", options.memory_cap_gib);
  require(options.gap >= 0.0 && options.gap < 1.0, "--gap must be in [0, 1), got ", options.gap);
  require(options.round_candidates >= 1 && options.round_work_sets >= 1, "search rounds need >= 1 candidate and work set");
  require(options.max_work_sets >= 0, "the work-set budget must be >= 0, got ", options.max_work_sets);
  require(options.max_simulated_ring >= 0, "the largest simulated ring must be >= 0, got ", options.max_simulated_ring);
  require(template_.micro_batch_sequences >= 1, "micro batch must be >= 1 sequence");
  const GpuConfig& gpu = cluster_.gpu_config;
  require(!gpu.name.empty(), "cluster '", cluster_.name, "' has no loaded GPU config (gpu: ", cluster_.gpu, ")");
  const int64_t gpu_bytes = gpu.memory_bytes();
  cap_bytes_ = gpu_bytes;
  if (options.memory_cap_gib > 0.0) {
    cap_bytes_ = std::min<int64_t>(gpu_bytes, static_cast<int64_t>(options.memory_cap_gib * kGiB));
  }
  threads_ = options.threads > 0 ? options.threads
                                 : static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
}

void PlanSearch::enumerate_candidates() {
  RecallSettings recall;
  recall.recall = template_.sparse.recall;
  recall.max_verticals = template_.sparse.max_verticals;
  recall.max_slashes = template_.sparse.max_slashes;
  const std::vector<int64_t> chosen =
      options_.trace_samples.empty() ? std::vector<int64_t>{options_.trace_sample} : options_.trace_samples;
  for (const int64_t sample : chosen) {
    SampleSearch s;
    s.sample = sample;
    s.sim = options_.simulation;
    s.sim.trace_sample = sample;
    s.sim.trace_key = "tuner-search";
    s.sim.keep_ring_records = false;
    // The simulator would select the same patterns again: it finds these under its key instead
    // (normalizing changes nothing it counts).
    s.pattern_key = pattern_cache_key(s.sim.trace_key, sample, recall, model_.q_heads / model_.kv_heads);
    s.patterns = context_.patterns(s.pattern_key, [&] {
      return normalized_patterns(trace_, model_, seq_len_tokens_, sample, recall);
    });
    samples_.push_back(std::move(s));
  }
  for (const SampleSearch& s : samples_) result_.samples.push_back(s.sample);
  result_.space = enumerate_search_space(model_, cluster_, seq_len_tokens_, space_options_);
  result_.stats.candidates = static_cast<int64_t>(result_.space.candidates.size());
  result_.stats.geometries = static_cast<int64_t>(result_.space.geometries.size());
}

void PlanSearch::bound_and_prune() {
  const SearchSpace& space = result_.space;
  SearchStats& stats = result_.stats;
  const int64_t count = stats.candidates;
  for (SampleSearch& s : samples_) {
    s.bound = std::make_unique<StepLowerBound>(model_, cluster_, space, *s.patterns, template_, options_.simulation);
  }
  const StepLowerBound& memory_bound = *samples_.front().bound;  // memory does not depend on the patterns
  open_of_geometry_.assign(space.geometries.size(), {});
  int64_t least_memory = std::numeric_limits<int64_t>::max();
  int64_t least_memory_candidate = 0;
  for (int64_t i = 0; i < count; ++i) {
    const Candidate& c = space.candidates[static_cast<size_t>(i)];
    if (!options_.prune) {
      queue_.push(QueueEntry{0.0, i, 2});
      continue;
    }
    const int64_t memory = memory_bound.memory_bytes(c);
    if (memory < least_memory) {
      least_memory = memory;
      least_memory_candidate = i;
    }
    if (memory > cap_bytes_) {
      ++stats.memory_pruned;
      continue;
    }
    queue_.push(QueueEntry{bound_cost(c), i, 0});
    open_of_geometry_[static_cast<size_t>(c.geometry)].push_back(i);
  }
  require(!queue_.empty(), "no plan fits in ", gib(cap_bytes_), " GiB per GPU",
          options_.memory_cap_gib > 0.0 ? " (--memory-cap-gib)" : str(" (", cluster_.gpu_config.name, ")"),
          ": the smallest plan (",
          describe_candidate(space, space.candidates[static_cast<size_t>(least_memory_candidate)]), ") needs at least ",
          gib(least_memory), " GiB");
  stats.bound_seconds = seconds_since(started_);
}

void PlanSearch::evaluate(int64_t index) {
  const SearchSpace& space = result_.space;
  const Candidate& c = space.candidates[static_cast<size_t>(index)];
  const PlanConfig plan = make_candidate_plan(space, c, template_);
  Outcome& o = outcomes_[static_cast<size_t>(index)];
  o.sample_costs.clear();
  o.peak_bytes = 0;
  for (const SampleSearch& s : samples_) {
    const SimulationResult r = simulate(context_, plan, model_, cluster_, &trace_, s.sim);
    o.sample_costs.push_back(cost_of(r.step.step_ns, c));
    o.peak_bytes = std::max(o.peak_bytes, r.memory.peak_bytes);
  }
  o.cost = statistic(o.sample_costs);
  o.fits = o.peak_bytes <= cap_bytes_;
}

void PlanSearch::simulate_survivors() {
  const auto count = static_cast<size_t>(result_.stats.candidates);
  SearchStats& stats = result_.stats;
  outcomes_.assign(count, Outcome{});
  simulated_.assign(count, 0);
  for (SampleSearch& s : samples_) s.counting.assign(result_.space.geometries.size(), CountState{});
  while (true) {
    std::vector<int64_t> batch;
    std::vector<CountTask> counts;
    if (!next_round(batch, counts)) break;
    run_round(batch, counts);
    if (options_.progress) {
      SearchProgress p;
      p.candidates = stats.candidates;
      p.simulated = stats.simulated;
      p.settled = stats.simulated + stats.memory_pruned + stats.budget_skipped;
      p.work_sets = stats.work_sets;
      p.best_cost = best_.empty() ? 0.0 : best_.front().first;
      options_.progress(p);
    }
  }
  for (; !queue_.empty(); queue_.pop()) {
    const QueueEntry& entry = queue_.top();
    if (simulated_[static_cast<size_t>(entry.index)]) continue;
    if (stats.bound_pruned++ == 0) lowest_open_ = entry.bound;
    const auto level = static_cast<size_t>(entry.exact > 0 ? 4 : std::clamp(entry.level, 0, 3));
    ++stats.pruned_by_bound[level];
  }
}

std::vector<int64_t> PlanSearch::next_layers(size_t sample, int32_t g) const {
  const SampleSearch& s = samples_[sample];
  const CountState& state = s.counting[static_cast<size_t>(g)];
  const std::vector<int64_t>& order = state.order;
  const auto layers = static_cast<int64_t>(order.size());
  // Everything at once while there is nothing to prune against (or nothing left to learn);
  // otherwise a share, so that a geometry whose bound rises above the K-th best stops early.
  const bool all = !options_.prune || best_.size() < static_cast<size_t>(options_.top) ||
                   s.bound->exact_layers(g) == layers;
  const int64_t step = all ? layers : (layers + kCountSteps - 1) / kCountSteps;
  const auto from = static_cast<int64_t>(state.next);
  return {order.begin() + from, order.begin() + std::min(layers, from + step)};
}

bool PlanSearch::next_round(std::vector<int64_t>& batch, std::vector<CountTask>& counts) {
  const SearchSpace& space = result_.space;
  SearchStats& stats = result_.stats;
  std::vector<QueueEntry> waiting;  // entries of geometries counted in this round
  int64_t starts = 0;               // geometries whose counting begins in this round
  while (!queue_.empty() && static_cast<int64_t>(batch.size()) < options_.round_candidates) {
    QueueEntry entry = queue_.top();
    if (simulated_[static_cast<size_t>(entry.index)]) {  // simulated early, as a geometry completed
      queue_.pop();
      continue;
    }
    if (options_.prune && beaten(entry.bound)) break;
    const Candidate& c = space.candidates[static_cast<size_t>(entry.index)];
    const int32_t g = c.geometry;
    const bool too_large =
        options_.max_simulated_ring > 0 && space.degrees_of(c).context_parallel > options_.max_simulated_ring;
    // Layers counted since the bound was computed raise it: re-queue with the new bound.
    if (entry.exact < exact_layers(g)) {
      queue_.pop();
      entry.exact = exact_layers(g);
      entry.bound = bound_cost(c);
      queue_.push(entry);
      continue;
    }
    // Refine a bound before simulating: the cheap work-cell bound of the geometry, then, before
    // its work would be counted, the strong cell bound and the ring bound.
    // Levels: 0 coarse, 1 tiles, 2 cells, 3 strong cells and ring (StepLowerBound strengths).
    const bool strong_level = options_.prune && entry.level == StepLowerBound::kCells && !complete(g) && !too_large;
    if (entry.level < StepLowerBound::kCells || strong_level) {
      queue_.pop();
      const auto t0 = std::chrono::steady_clock::now();
      const int strength = strong_level ? StepLowerBound::kStrong : entry.level + 1;
      for (SampleSearch& s : samples_) {
        StepLowerBound& bound = *s.bound;
        if (bound.refined(g) < strength) {
          bound.refine(g, threads_, strength);
          ++stats.refined;
        }
        if (strong_level && bound.ring_bound_applies(c) && !bound.ring_refined(c)) {
          bound.refine_ring(c, threads_);
          ++stats.ring_refined;
        }
      }
      stats.refine_seconds += seconds_since(t0);
      entry.bound = bound_cost(c);
      entry.level = strength;
      queue_.push(entry);
      continue;
    }
    // A ring bound refined for another candidate of the geometry may have raised this one's: a
    // stale bound must not make the search count (or simulate) what is already beaten.
    if (options_.prune) {
      const double fresh = bound_cost(c);
      if (fresh > entry.bound) {
        queue_.pop();
        entry.bound = fresh;
        queue_.push(entry);
        continue;
      }
    }
    if (complete(g)) {
      queue_.pop();
      batch.push_back(entry.index);
      continue;
    }
    const bool counting = std::any_of(counts.begin(), counts.end(), [&](const CountTask& t) { return t.geometry == g; });
    const bool over_budget = !started(g) && options_.max_work_sets > 0 &&
                             stats.work_sets + starts >= options_.max_work_sets;
    if (!counting && (too_large || over_budget)) {
      queue_.pop();
      if (stats.budget_skipped == 0 || entry.bound < stats.skipped_best_bound) stats.skipped_best_bound = entry.bound;
      ++stats.budget_skipped;
      continue;
    }
    if (!counting) {
      // Without a K-th best a geometry is counted whole, on every thread, and alone: its best
      // candidates then set the K-th best that decides how far others are worth counting.
      const bool no_kth = options_.prune && best_.size() < static_cast<size_t>(options_.top);
      if (static_cast<int64_t>(counts.size()) >= (no_kth ? 1 : options_.round_work_sets)) break;
      starts += started(g) ? 0 : 1;
      for (size_t k = 0; k < samples_.size(); ++k) {
        CountState& state = samples_[k].counting[static_cast<size_t>(g)];
        if (state.complete) continue;
        if (state.order.empty()) state.order = samples_[k].bound->layers_by_bound(g);
        counts.push_back(CountTask{g, k, next_layers(k, g)});
      }
    }
    queue_.pop();
    waiting.push_back(entry);
  }
  for (const QueueEntry& entry : waiting) queue_.push(entry);
  return !batch.empty() || !counts.empty();
}

void PlanSearch::run_round(std::vector<int64_t> batch, const std::vector<CountTask>& counts) {
  SearchStats& stats = result_.stats;
  ++stats.rounds;
  limit_counted_work(batch, counts);
  count_layers(counts);
  if (best_.size() < static_cast<size_t>(options_.top)) {
    // No K-th best yet: simulate the most promising candidates of the geometries just completed
    // now, so that the next rounds count other geometries only as far as they can still compete.
    std::vector<int32_t> completed;
    for (const CountTask& task : counts) {
      if (complete(task.geometry) && std::find(completed.begin(), completed.end(), task.geometry) == completed.end()) {
        completed.push_back(task.geometry);
      }
    }
    for (const int32_t g : completed) {
      std::vector<std::pair<double, int64_t>> open;
      for (const int64_t index : open_of_geometry_[static_cast<size_t>(g)]) {
        if (simulated_[static_cast<size_t>(index)] ||
            std::find(batch.begin(), batch.end(), index) != batch.end()) {
          continue;
        }
        const Candidate& c = result_.space.candidates[static_cast<size_t>(index)];
        open.emplace_back(bound_cost(c), index);
      }
      std::sort(open.begin(), open.end());
      for (size_t k = 0; k < open.size() && k < static_cast<size_t>(options_.top); ++k) batch.push_back(open[k].second);
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  // Candidates that differ only in what follows the ring passes (recomputation, ZeRO, layout
  // shuffle) share them: one of each first, so that the others find them in the context.
  std::vector<int64_t> first;
  std::vector<int64_t> rest;
  const auto same_rings = [&](int64_t a, int64_t b) {
    const Candidate& x = result_.space.candidates[static_cast<size_t>(a)];
    const Candidate& y = result_.space.candidates[static_cast<size_t>(b)];
    return std::tie(x.geometry, x.order, x.hierarchy, x.comm) == std::tie(y.geometry, y.order, y.hierarchy, y.comm);
  };
  for (const int64_t index : batch) {
    const bool seen = std::any_of(first.begin(), first.end(), [&](int64_t other) { return same_rings(index, other); });
    (seen ? rest : first).push_back(index);
  }
  for (const std::vector<int64_t>* part : {&first, &rest}) {
    parallel_for(static_cast<int64_t>(part->size()), threads_, [&](int64_t k) { evaluate((*part)[static_cast<size_t>(k)]); });
  }
  stats.simulate_seconds += seconds_since(t0);
  for (const int64_t index : batch) {
    simulated_[static_cast<size_t>(index)] = 1;
    ++stats.simulated;
    const Outcome& o = outcomes_[static_cast<size_t>(index)];
    if (!o.fits) {
      ++stats.over_cap;
      continue;
    }
    best_.emplace_back(o.cost, index);
    std::sort(best_.begin(), best_.end());
    if (best_.size() > static_cast<size_t>(options_.top)) best_.pop_back();
  }
  release_settled_work();
}

void PlanSearch::release_settled_work() {
  // Without pruning (brute force) open_of_geometry_ is not filled: nothing is dropped.
  if (!options_.prune || best_.size() < static_cast<size_t>(options_.top)) return;
  const SearchSpace& space = result_.space;
  for (size_t g = 0; g < space.geometries.size(); ++g) {
    const bool holds = std::any_of(samples_.begin(), samples_.end(),
                                   [&](const SampleSearch& s) { return s.counting[g].next > 0 || s.counting[g].complete; });
    if (!holds) continue;
    const bool in_best = std::any_of(best_.begin(), best_.end(), [&](const std::pair<double, int64_t>& b) {
      return space.candidates[static_cast<size_t>(b.second)].geometry == static_cast<int32_t>(g);
    });
    if (in_best) continue;
    const bool settled = std::all_of(open_of_geometry_[g].begin(), open_of_geometry_[g].end(), [&](int64_t index) {
      return simulated_[static_cast<size_t>(index)] || beaten(bound_cost(space.candidates[static_cast<size_t>(index)]));
    });
    if (!settled) continue;
    const Geometry& geometry = space.geometries[g];
    for (SampleSearch& sample : samples_) {
      CountState& state = sample.counting[g];
      cached_bytes_ -= work_set_bytes(static_cast<int32_t>(g)) * static_cast<int64_t>(state.next) / model_.layers;
      if (state.complete) {
        context_.forget_work(work_key_of(sample.pattern_key, geometry, *state.complete));
      }
      forget_counted(state);
    }
  }
}

void PlanSearch::count_layers(const std::vector<CountTask>& counts) {
  if (counts.empty()) return;
  const SearchSpace& space = result_.space;
  SearchStats& stats = result_.stats;
  const auto t0 = std::chrono::steady_clock::now();
  // Every (task, layer) is one item of one parallel loop, so that the threads share the round's
  // work whatever the tasks' sizes (the counts never depend on the thread count); a round of fewer
  // layers than two per thread is split further by head group. Each worker keeps its work counter
  // while its items stay on one geometry (items come task by task), since building one costs
  // its tables; a task's matrices are then put together in order.
  struct Item {
    size_t task;
    size_t layer;    // index into the task's layers
    int64_t group;   // head group, or -1: every group of the layer
  };
  const auto head_groups_of = [&](const CountTask& task) {
    return space.degrees[static_cast<size_t>(space.geometries[static_cast<size_t>(task.geometry)].degrees)].head_parallel;
  };
  size_t round_layers = 0;
  for (const CountTask& task : counts) round_layers += task.layers.size();
  const bool by_group = round_layers < 2 * static_cast<size_t>(threads_);
  std::vector<Item> items;
  for (size_t k = 0; k < counts.size(); ++k) {
    for (size_t i = 0; i < counts[k].layers.size(); ++i) {
      if (!by_group) {
        items.push_back(Item{k, i, -1});
        continue;
      }
      for (int64_t group = 0; group < head_groups_of(counts[k]); ++group) items.push_back(Item{k, i, group});
    }
  }
  std::vector<std::vector<WorkMatrix>> item_work(items.size());
  std::vector<char> geometry_started(space.geometries.size(), 0);
  for (const CountTask& task : counts) geometry_started[static_cast<size_t>(task.geometry)] = started(task.geometry) ? 1 : 0;
  struct CounterCache {
    std::unique_ptr<BlockGeometry> geometry;  // the counter refers to it
    std::unique_ptr<WorkCounter> counter;
    int32_t geometry_index = -1;
  };
  parallel_for_with_state(
      static_cast<int64_t>(items.size()), threads_, [] { return CounterCache{}; },
      [&](CounterCache& cache, int64_t index) {
        const Item& item = items[static_cast<size_t>(index)];
        const CountTask& task = counts[item.task];
        const Geometry& g = space.geometries[static_cast<size_t>(task.geometry)];
        if (cache.geometry_index != task.geometry) {
          cache.counter.reset();  // one counter's tables at a time
          cache.geometry = std::make_unique<BlockGeometry>(make_block_geometry(g.layout, g.block, g.block));
          cache.counter = std::make_unique<WorkCounter>(*cache.geometry);
          cache.geometry_index = task.geometry;
        }
        const PatternSet& patterns = *samples_[task.sample].patterns;
        const int64_t groups = head_groups_of(task);
        require(patterns.heads % groups == 0, "head groups (", groups, ") must divide the query heads (",
                patterns.heads, ")");
        const int64_t heads = patterns.heads / groups;
        const int64_t first = item.group < 0 ? 0 : item.group;
        const int64_t last = item.group < 0 ? groups : item.group + 1;
        std::vector<WorkMatrix>& out = item_work[static_cast<size_t>(index)];
        out.assign(static_cast<size_t>(last - first), WorkMatrix(g.layout.ranks()));
        for (int64_t group = first; group < last; ++group) {
          count_head_group(*cache.counter, patterns, task.layers[item.layer], group * heads, heads, patterns.kv_group,
                           template_.micro_batch_sequences, out[static_cast<size_t>(group - first)]);
        }
      });
  std::vector<WorkSet> counted(counts.size());
  for (size_t k = 0; k < counts.size(); ++k) {
    WorkSet& work = counted[k];
    work.layers = static_cast<int64_t>(counts[k].layers.size());
    work.head_groups = head_groups_of(counts[k]);
    work.heads_per_group = samples_[counts[k].sample].patterns->heads / work.head_groups;
    work.micro_batch = template_.micro_batch_sequences;
    work.matrices.reserve(static_cast<size_t>(work.layers * work.head_groups));
  }
  for (size_t index = 0; index < items.size(); ++index) {
    for (WorkMatrix& m : item_work[index]) counted[items[index].task].matrices.push_back(std::move(m));
    item_work[index] = {};
  }
  for (size_t k = 0; k < counts.size(); ++k) {
    const CountTask& task = counts[k];
    const Geometry& g = space.geometries[static_cast<size_t>(task.geometry)];
    WorkSet& work = counted[k];
    SampleSearch& sample = samples_[task.sample];
    CountState& state = sample.counting[static_cast<size_t>(task.geometry)];
    sample.bound->add_exact_layers(task.geometry, task.layers, work, threads_);
    if (!geometry_started[static_cast<size_t>(task.geometry)]) ++stats.work_sets;
    geometry_started[static_cast<size_t>(task.geometry)] = 1;
    state.started = true;
    if (state.matrices.empty()) state.matrices.resize(static_cast<size_t>(model_.layers * work.head_groups));
    for (size_t i = 0; i < task.layers.size(); ++i) {
      for (int64_t group = 0; group < work.head_groups; ++group) {
        state.matrices[static_cast<size_t>(task.layers[i] * work.head_groups + group)] =
            std::move(work.at(static_cast<int64_t>(i), group));
      }
    }
    state.next += task.layers.size();
    stats.layers_counted += static_cast<int64_t>(task.layers.size());
    cached_bytes_ += work_set_bytes(task.geometry) * static_cast<int64_t>(task.layers.size()) / model_.layers;
    if (state.next < state.order.size()) continue;
    // Every layer counted: the simulator's work set, handed to its context.
    auto set = std::make_shared<WorkSet>();
    set->layers = model_.layers;
    set->head_groups = work.head_groups;
    set->heads_per_group = work.heads_per_group;
    set->micro_batch = work.micro_batch;
    set->matrices = std::move(state.matrices);
    state.matrices.clear();
    state.complete = std::move(set);
    context_.remember_work(work_key_of(sample.pattern_key, g, *state.complete), state.complete);
    sample.bound->release_exact_cells(task.geometry);
  }
  stats.count_seconds += seconds_since(t0);
}

void PlanSearch::limit_counted_work(const std::vector<int64_t>& batch, const std::vector<CountTask>& counts) {
  const SearchSpace& space = result_.space;
  int64_t adding = 0;
  for (const CountTask& task : counts) {
    adding += work_set_bytes(task.geometry) * static_cast<int64_t>(task.layers.size()) / model_.layers;
  }
  if (cached_bytes_ == 0 || cached_bytes_ + adding <= options_.work_set_cache_bytes) return;
  // Keep memory bounded: drop the counted work this round does not use (the bounds keep their
  // exact terms); a geometry needed again later is counted again.
  std::vector<char> keep(space.geometries.size(), 0);
  for (const int64_t index : batch) keep[static_cast<size_t>(space.candidates[static_cast<size_t>(index)].geometry)] = 1;
  for (const CountTask& task : counts) keep[static_cast<size_t>(task.geometry)] = 1;
  context_.clear();
  cached_bytes_ = 0;
  for (SampleSearch& sample : samples_) {
    context_.patterns(sample.pattern_key, [&] { return *sample.patterns; });
    for (size_t g = 0; g < space.geometries.size(); ++g) {
      CountState& state = sample.counting[g];
      if (!keep[g]) {
        forget_counted(state);
        continue;
      }
      cached_bytes_ += work_set_bytes(static_cast<int32_t>(g)) * static_cast<int64_t>(state.next) / model_.layers;
      if (!state.complete) continue;
      const Geometry& geometry = space.geometries[g];
      context_.remember_work(work_key_of(sample.pattern_key, geometry, *state.complete), state.complete);
    }
  }
}

void PlanSearch::rank_and_explain() {
  const SearchSpace& space = result_.space;
  SearchResult& result = result_;
  const int64_t count = result.stats.candidates;
  std::vector<std::pair<double, int64_t>> feasible;
  int64_t least_simulated = std::numeric_limits<int64_t>::max();
  for (int64_t i = 0; i < count; ++i) {
    if (!simulated_[static_cast<size_t>(i)]) continue;
    const Outcome& o = outcomes_[static_cast<size_t>(i)];
    least_simulated = std::min(least_simulated, o.peak_bytes);
    if (o.fits) feasible.emplace_back(o.cost, i);
  }
  require(!feasible.empty(), "no simulated plan fits in ", gib(cap_bytes_),
          " GiB per GPU: the smallest needs ", gib(least_simulated), " GiB");
  std::sort(feasible.begin(), feasible.end());
  for (int64_t i = 0; i < count; ++i) {
    if (!simulated_[static_cast<size_t>(i)]) continue;
    const Outcome& o = outcomes_[static_cast<size_t>(i)];
    result.simulated.push_back(SimulatedPlan{i, o.cost, o.peak_bytes, o.fits, o.sample_costs});
  }
  std::sort(result.simulated.begin(), result.simulated.end(), [](const SimulatedPlan& a, const SimulatedPlan& b) {
    return std::tie(a.cost, a.candidate) < std::tie(b.cost, b.candidate);
  });
  const double band = options_.tie_band;
  std::vector<int64_t> chosen;
  for (size_t k = 0; k < feasible.size() && k < static_cast<size_t>(options_.top); ++k) chosen.push_back(feasible[k].second);
  int64_t runner = -1;  // the best plan slower than the fastest (simulated by either search)
  for (const auto& [c, index] : feasible) {
    if (c == feasible.front().first && index != feasible.front().second) ++result.ties;
    if (c > feasible.front().first) {
      runner = index;
      break;
    }
  }
  std::vector<int64_t> detail = chosen;
  if (runner >= 0 && std::find(chosen.begin(), chosen.end(), runner) == chosen.end()) detail.push_back(runner);
  std::vector<RankedPlan> plans(detail.size());
  const auto ranking_started = std::chrono::steady_clock::now();
  // Their ring passes are in the context's cache: re-assembling the step costs no ring simulation.
  parallel_for(static_cast<int64_t>(detail.size()), threads_, [&](int64_t k) {
    RankedPlan& r = plans[static_cast<size_t>(k)];
    r.candidate = detail[static_cast<size_t>(k)];
    const Candidate& c = space.candidates[static_cast<size_t>(r.candidate)];
    r.plan = make_candidate_plan(space, c, template_);
    std::vector<SimulationResult> runs;
    std::vector<double> costs;
    for (const SampleSearch& s : samples_) {
      runs.push_back(simulate(context_, r.plan, model_, cluster_, &trace_, s.sim));
      costs.push_back(cost_of(runs.back().step.step_ns, c));
      r.sample_step_ms.push_back(ns_to_ms(runs.back().step.step_ns));
      r.peak_bytes = std::max(r.peak_bytes, runs.back().memory.peak_bytes);
    }
    r.cost = statistic(costs);
    r.sample_costs = costs;
    // The figures, prediction and notes are the representative sample's (sim/output/sample_statistics.hpp).
    const size_t shown = representative_sample(costs, options_.rank_by);
    const SimulationResult& sr = runs[shown];
    r.representative_sample = samples_[shown].sample;
    r.figures = plan_figures(sr, c.recompute);
    r.plan.prediction = sr.prediction(kVersion);
    r.notes = sr.notes;
  });
  // Which ranked plans are the fastest on each sample (all of them on an exact tie): a plan that
  // wins on some samples and loses on others shows it.
  for (size_t k = 0; k < samples_.size(); ++k) {
    double fastest = std::numeric_limits<double>::infinity();
    for (size_t p = 0; p < chosen.size(); ++p) fastest = std::min(fastest, plans[p].sample_costs[k]);
    for (size_t p = 0; p < chosen.size(); ++p) {
      if (plans[p].sample_costs[k] == fastest) plans[p].fastest_on.push_back(samples_[k].sample);
    }
  }
  result.stats.simulate_seconds += seconds_since(ranking_started);
  // Statistical ties among the ranked plans: lower memory, then the simpler plan, first.
  std::vector<TieEntry> entries;
  for (size_t k = 0; k < chosen.size(); ++k) {
    const RankedPlan& p = plans[k];
    const Candidate& c = space.candidates[static_cast<size_t>(p.candidate)];
    const ParallelDegrees& g = space.degrees_of(c);
    const bool per_layer = space.geometry_of(c).layout.kind() == LayoutKind::striped && c.shuffle == LayoutShuffleMode::per_layer;
    TieEntry e;
    e.cost = p.cost;
    e.peak_bytes = p.peak_bytes;
    e.ring_levels = static_cast<int32_t>(space.hierarchy_of(c).levels.size());
    e.collectives = (g.head_parallel > 1 ? 2 : 0) + (c.comm == CommPrimitive::all_gather ? 2 : 0) + (per_layer ? 2 : 0) +
                    (c.zero_stage >= 3 ? 1 : 0);
    e.per_layer_shuffle = per_layer;
    e.index = p.candidate;
    entries.push_back(e);
  }
  const std::vector<TiePlace> places = order_with_ties(entries, band);
  for (const TiePlace& place : places) {
    result.ranked.push_back(plans[place.entry]);
    result.ranked.back().tie_group = place.group;
    if (place.group == 0 && result.ranked.size() > 1) ++result.tied;
  }
  if (result.tied > 0) {
    // The decisive factor: against the first group member the winner differs from in more than
    // the enumeration order (node-major and snake orders often predict the same).
    const TieEntry& first = entries[places[0].entry];
    size_t against = 1;
    while (against + 1 < places.size() && places[against + 1].group == 0 &&
           tie_reason(first, entries[places[against].entry]) == "enumeration order") {
      ++against;
    }
    const TieEntry& second = entries[places[against].entry];
    const std::string within = band > 0.0 ? str("within ", fixed(100.0 * band, 1), "% (the model's error",
                                                options_.tie_band_source.empty() ? "" : str(", ", options_.tie_band_source), ")")
                                          : std::string("at exactly the same cost");
    result.tie_note = str(result.tied + 1, " ranked plans are ", within, " of the fastest and statistically tied; the first "
                          "comes first by ", tie_reason(first, second));
  }
  if (runner >= 0) {
    result.has_runner_up = true;
    for (const RankedPlan& p : plans) {
      if (p.candidate == runner) result.runner_up = p;
    }
    result.explanation = explain_winner(space, result.ranked.front(), result.runner_up, band);
  } else {
    result.explanation = band > 0.0 ? str("every simulated plan is within ", fixed(100.0 * band, 1),
                                          "% of the fastest (the model's error); the plans beyond it were pruned "
                                          "by their bounds without simulation")
                                    : "every simulated plan ties with the winner; it comes first by enumeration order";
  }
}

void PlanSearch::state_guarantee() {
  const SearchOptions& options = options_;
  const SearchStats& stats = result_.stats;
  const int64_t count = stats.candidates;
  const double lowest_open = lowest_open_;
  SearchResult& result = result_;
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
}

}  // namespace

std::string_view to_string(Objective objective) {
  return objective == Objective::step_time ? "step-time" : "tokens-per-s";
}

SearchResult search_plans(const ModelConfig& model, const ClusterConfig& cluster, const Trace& trace,
                          int64_t seq_len_tokens, const SearchSpaceOptions& space_options, const PlanTemplate& tmpl,
                          const SearchOptions& options) {
  return PlanSearch(model, cluster, trace, seq_len_tokens, space_options, tmpl, options).run();
}

std::string explain_winner(const SearchSpace& space, const RankedPlan& winner, const RankedPlan& runner_up,
                           double band) {
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
  differ(w.shuffle == LayoutShuffleMode::per_layer ? "layout all-to-alls per layer" : "layout from the loader",
         r.shuffle == LayoutShuffleMode::per_layer ? "layout all-to-alls per layer" : "layout from the loader");
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
  const double floor_ms = band * b.step_ms;  // differences below the model's error are not named
  if (band > 0.0 && top->runner_ms - top->winner_ms <= floor_ms) {
    return str(mine.empty() ? std::string("the winner") : join(mine), " (vs ", theirs.empty() ? std::string("the runner-up") : join(theirs),
               "): no step component differs by more than the model's error (", fixed(100.0 * band, 1), "% of ",
               ms(b.step_ms), " ms); step ", ms(b.step_ms), " ms -> ", ms(a.step_ms), " ms");
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
