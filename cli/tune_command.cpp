// `sparsering tune --model M --cluster C --trace T --seq-len N [--top K] [--objective step-time|tokens-per-s]
//                  [--memory-cap-gib X] [--threads T] [--max-search-seconds S] [--out plan.yaml]`
// searches parallel layouts with the simulator (tuner/search/plan_search.hpp), prints the ranked
// table, what the search proved and why the winner beats the runner-up, and with --out writes the
// best plan there (and, with --top K > 1, plan-1.yaml .. plan-K.yaml beside it), each with its
// prediction and input hashes, as one bundle (common/output_bundle.hpp: all replaced together or
// none), refusing to replace files unless --force, checked before the search. Before reading the
// trace it estimates the search (tuner/search/search_budget.hpp) and refuses one beyond
// --max-memory-gib or --max-search-seconds; a search that runs past --max-search-seconds anyway
// is ended by a time limit (common/time_limit.hpp) before any output is written. A progress
// bar is drawn on stderr only when stderr is a terminal. The callback only turns flags into
// library calls; tested by tests/tuner_search/cli_tune_test.cpp, which runs the built binary, and
// tests/cli/hostile_output_cli_test.cpp and tests/cli/search_budget_cli_test.cpp.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <atomic>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "common/error.hpp"
#include "common/input_file.hpp"
#include "common/json_text.hpp"
#include "common/memory_budget.hpp"
#include "common/output_bundle.hpp"
#include "common/table.hpp"
#include "common/text_safety.hpp"
#include "common/time_limit.hpp"
#include "core/kernel_build.hpp"
#include "sim/config/cluster_config.hpp"
#include "sim/config/model_config.hpp"
#include "sim/config/plan_config.hpp"
#include "sim/cost/calibration_status.hpp"
#include "sim/output/sample_statistics.hpp"
#include "sparsering/version.hpp"
#include "traces/safetensors_trace.hpp"
#include "traces/token_count.hpp"
#include "traces/trace_samples.hpp"
#include "tuner/search/calibrated_blocks.hpp"
#include "tuner/search/file_digest.hpp"
#include "tuner/search/model_error.hpp"
#include "tuner/search/plan_search.hpp"
#include "tuner/search/progress_bar.hpp"
#include "tuner/search/search_budget.hpp"

namespace sparsering::cli {

void add_tune_command(CLI::App& app, const GlobalOptions& global);

namespace {

namespace fs = std::filesystem;

struct TuneOptions {
  std::string model;
  std::string cluster;
  std::string trace;
  std::string seq_len;
  int64_t top = 5;
  std::string objective = "step-time";
  double memory_cap_gib = 0.0;
  int threads = 0;
  double gap = 0.0;
  int64_t max_work_sets = 0;
  int64_t max_ring_simulated = 0;
  int64_t sample = -1;       // -1: not given (sample 0 unless --samples)
  std::string samples;       // empty: one sample
  std::string rank_by = "mean";
  double recall = 0.95;
  std::vector<int64_t> blocks = {64, 128};
  std::vector<double> granularities = {0.5, 1.0, 2.0};
  std::vector<std::string> layouts = {"contiguous", "zigzag", "striped"};
  std::vector<std::string> comms = {"p2p", "all_gather"};
  std::vector<std::string> layout_shuffles = {"per_layer", "loader"};
  std::vector<std::string> recomputes = {"none", "selective", "full"};
  std::vector<int64_t> zero_stages = {0, 1, 2, 3};
  bool brute_force = false;
  bool allow_extrapolated_shapes = false;
  double tie_band = -1.0;  // < 0: the median of --model-error
  std::string model_error = "configs/model_error.yaml";
  double max_search_seconds = 300.0;
  int64_t max_candidates = 10'000'000;
};

// Each plan of --top K is a file of the output bundle, which removes its temporaries on signals.
constexpr int64_t kMaxPlanFiles = 100;

/// A config given as a file path, or as a bare name found in configs/<folder>/<name>.yaml.
fs::path config_path(const std::string& ref, const char* flag, const char* folder) {
  require(!ref.empty(), flag, " is required");
  const fs::path direct(ref);
  std::error_code ec;
  if (fs::is_regular_file(direct, ec)) return direct;
  // A Hugging Face model folder: load_model reads its config.json (docs/configs.md).
  if (std::string_view(folder) == "models" && fs::is_directory(direct, ec) &&
      fs::is_regular_file(direct / "config.json", ec)) {
    return direct;
  }
  // Something that is not a regular file (a FIFO, /dev/zero): InputFile's refusal names its kind.
  if (fs::exists(direct, ec)) InputFile refused(direct, kDefaultTextFileCapBytes);
  const fs::path named = fs::path("configs") / folder / (ref + ".yaml");
  if (ref.find('/') == std::string::npos && fs::is_regular_file(named)) return named;
  throw InputError(str("unknown ", folder == std::string("models") ? "model" : "cluster", " '", ref, "' (", flag,
                       "): no such file, and no ", named.string()));
}

/// `target` as the plan at `plan_file` should reference it: relative to the plan's folder.
std::string reference_from(const fs::path& plan_file, const fs::path& target) {
  const fs::path base = fs::absolute(plan_file).parent_path();
  const fs::path rel = fs::absolute(target).lexically_normal().lexically_relative(base);
  return rel.empty() ? fs::absolute(target).lexically_normal().string() : rel.string();
}

SearchSpaceOptions space_options(const TuneOptions& o, const BlockChoice& blocks) {
  SearchSpaceOptions s;
  s.block_sizes = blocks.searched;
  s.stripe_shifts.clear();
  for (const double g : o.granularities) {
    const double shift = std::log2(g);
    require(g > 0.0 && std::isfinite(shift) && shift == std::round(shift) && std::abs(shift) <= 6.0,
            "--granularities takes powers of two between 1/64 and 64 (stripe = block x factor), got ", g);
    s.stripe_shifts.push_back(static_cast<int32_t>(shift));
  }
  s.layouts.clear();
  for (const std::string& l : o.layouts) s.layouts.push_back(parse_layout_kind(l));
  s.comms.clear();
  for (const std::string& c : o.comms) s.comms.push_back(c == "p2p" ? CommPrimitive::p2p : CommPrimitive::all_gather);
  s.layout_shuffles.clear();
  for (const std::string& m : o.layout_shuffles) {
    s.layout_shuffles.push_back(m == "loader" ? LayoutShuffleMode::loader : LayoutShuffleMode::per_layer);
  }
  s.recomputes.clear();
  for (const std::string& r : o.recomputes) {
    s.recomputes.push_back(r == "none" ? RecomputeMode::none : r == "selective" ? RecomputeMode::selective : RecomputeMode::full);
  }
  s.zero_stages = o.zero_stages;
  return s;
}

/// Milliseconds with more digits after the point for small values.
std::string ms(double value) {
  const double a = std::abs(value);
  return fixed(value, a >= 100.0 ? 1 : a >= 10.0 ? 2 : 3);
}

/// --sample, or --samples and --rank-by: how candidates are ranked over trace samples (the
/// samples themselves once the trace is read: apply_trace_samples).
void apply_sample_options(const TuneOptions& o, SearchOptions& options) {
  require(o.sample < 0 || o.samples.empty(), "give --sample or --samples, not both");
  options.trace_sample = std::max<int64_t>(o.sample, 0);
  options.rank_by = parse_sample_statistic(o.rank_by, "--rank-by");
}

/// --samples: which samples of the trace every candidate is evaluated on.
void apply_trace_samples(const TuneOptions& o, const Trace& trace, SearchOptions& options) {
  if (!o.samples.empty()) options.trace_samples = parse_trace_samples(o.samples, trace.samples, "--samples");
}

/// Per-sample figures of a ranked or simulated plan for --format json.
void add_sample_json(nlohmann::json& plan, const std::vector<int64_t>& samples, const std::vector<double>& step_ms) {
  const SampleSpread spread = sample_spread(step_ms);
  plan["samples"] = samples;
  plan["sample_step_ms"] = step_ms;
  plan["step_ms_spread"] = {{"min", spread.min}, {"max", spread.max}, {"mean", spread.mean}, {"stdev", spread.stdev}};
}

double gib_of(int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(int64_t{1} << 30); }

/// A ranked plan's step by the ranking statistic over its samples (its figures are one sample's).
double ranked_step_ms(const RankedPlan& r, SampleStatistic rank_by) { return sample_statistic(r.sample_step_ms, rank_by); }

/// Throughput at that step (the tokens of a step do not depend on the sample).
double ranked_tokens_per_s(const RankedPlan& r, SampleStatistic rank_by) {
  return r.figures.tokens_per_s * r.figures.step_ms / ranked_step_ms(r, rank_by);
}

/// The ranked table's columns for several samples: the spread of the step and where a plan wins.
std::vector<std::string> sample_columns(const RankedPlan& r) {
  const SampleSpread spread = sample_spread(r.sample_step_ms);
  std::string won;
  for (const int64_t s : r.fastest_on) won += str(won.empty() ? "" : ",", s);
  return {str(ms(spread.min), "-", ms(spread.max)), won.empty() ? "-" : won};
}

/// Which samples the search used, how it ranks them, and whose figures the other columns show.
void print_sample_note(const SearchResult& result, SampleStatistic rank_by) {
  std::string samples;
  for (const int64_t s : result.samples) samples += str(samples.empty() ? "" : ",", s);
  std::cout << "\nsamples: " << samples << "; ranked by the " << to_string(rank_by)
            << " step over them; the other figures are each plan's sample nearest to it (";
  for (size_t k = 0; k < result.ranked.size(); ++k) {
    std::cout << (k == 0 ? "" : ", ") << "rank " << k + 1 << ": sample " << result.ranked[k].representative_sample;
  }
  std::cout << ")\n";
}

void run_tune(const TuneOptions& o, const GlobalOptions& global) {
  require(o.objective == "step-time" || o.objective == "tokens-per-s", "--objective must be step-time or tokens-per-s, got ",
          o.objective);
  require(o.threads >= 0, "--threads must be >= 0, got ", o.threads);
  require(o.max_search_seconds > 0.0, "--max-search-seconds must be > 0, got ", o.max_search_seconds);
  require(o.max_candidates >= 1, "--max-candidates must be >= 1, got ", o.max_candidates);
  require(global.out.empty() || o.top <= kMaxPlanFiles, "--top ", o.top, " with --out writes a plan file per rank; at most ",
          kMaxPlanFiles, " (rank more without --out)");
  require(!(o.memory_cap_gib < 0.0) && std::isfinite(o.memory_cap_gib), "--memory-cap-gib must be > 0, got ", o.memory_cap_gib);
  const fs::path model_path = config_path(o.model, "--model", "models");
  const fs::path cluster_path = config_path(o.cluster, "--cluster", "clusters");
  require(!o.trace.empty(), "--trace is required (make one with `sparsering trace synth`)");
  const int64_t seq_len = parse_token_count(o.seq_len, "--seq-len");
  const ModelConfig model = load_model(model_path);
  const ClusterConfig cluster = load_cluster(cluster_path);
  require(seq_len % 64 == 0, "--seq-len ", seq_len, " is not a multiple of 64 tokens, the smallest kernel block; ",
          "every layout needs whole blocks");
  const BlockChoice blocks =
      choose_calibrated_blocks(cluster.gpu_config, model.head_dim, o.blocks, o.allow_extrapolated_shapes);
  const CalibrationStatus calibration = kernel_build_status(cluster.gpu_config, this_kernel_build());
  if (calibration.stale) std::cerr << escape_for_terminal(stale_calibration_warning(calibration)) << "\n";
  const auto extrapolated = [&blocks](int64_t block) {
    return std::find(blocks.extrapolated.begin(), blocks.extrapolated.end(), block) != blocks.extrapolated.end();
  };

  // Check the outputs before the search, so a refusal costs nothing.
  std::vector<fs::path> outputs;
  std::optional<OutputBundle> bundle;
  if (!global.out.empty()) {
    const fs::path best(global.out);
    require(!fs::is_directory(best), "--out ", best.string(), " is a folder; give the plan file to write");
    require(best.has_filename(), "--out ", best.string(), " names a folder; give the plan file to write");
    outputs.push_back(best);
    if (o.top > 1) {
      const std::string ext = best.extension().empty() ? std::string(".yaml") : best.extension().string();
      for (int64_t k = 1; k <= o.top; ++k) outputs.push_back(best.parent_path() / str(best.stem().string(), "-", k, ext));
    }
    std::vector<std::string> names;
    for (const fs::path& path : outputs) names.push_back(path.filename().string());
    bundle.emplace(best.parent_path(), names, global.force, best);
  }

  PlanTemplate tmpl;
  tmpl.name_prefix = str(model.name, "-", cluster.name);
  tmpl.model = model.name;
  tmpl.cluster = cluster.name;
  tmpl.sparse.recall = o.recall;
  require(o.recall > 0.0 && o.recall <= 1.0, "--recall must be in (0, 1], got ", o.recall);
  require(tmpl.sparse.last_q <= seq_len, "--seq-len ", seq_len, " is shorter than the ", tmpl.sparse.last_q,
          " queries the pattern estimate uses");

  SearchOptions options;
  options.objective = o.objective == "step-time" ? Objective::step_time : Objective::tokens_per_s;
  options.top = o.top;
  options.memory_cap_gib = o.memory_cap_gib;
  options.threads = o.threads;
  options.gap = o.gap;
  options.max_work_sets = o.max_work_sets;
  options.max_simulated_ring = o.max_ring_simulated;
  apply_sample_options(o, options);
  options.prune = !o.brute_force;
  if (o.tie_band >= 0.0) {
    require(o.tie_band < 1.0, "--tie-band must be in [0, 1), got ", o.tie_band);
    options.tie_band = o.tie_band;
    options.tie_band_source = "--tie-band";
  } else if (fs::is_regular_file(o.model_error)) {
    const ModelError error = load_model_error(o.model_error);
    options.tie_band = error.median_relative;
    options.tie_band_source = error.source;
  } else {
    require(o.model_error == "configs/model_error.yaml", "--model-error ", o.model_error, " does not exist");
  }
  SearchSpaceOptions plan_space = space_options(o, blocks);
  plan_space.max_candidates = o.max_candidates;

  // Everything up to the outputs runs under the time budget; nothing is written before disarm().
  std::atomic<int64_t> settled{0};
  std::atomic<int64_t> candidates{0};
  TimeLimit limit(o.max_search_seconds, [&](double elapsed) {
    return str("tune stopped after ", fixed(elapsed, 1), " s, over the time budget of ", o.max_search_seconds,
               " s (--max-search-seconds), with ", settled.load(), " of ", candidates.load(),
               " candidates settled; nothing was written. Bound the search (--gap, --max-work-sets, "
               "--max-ring-simulated), narrow the space or raise --max-search-seconds");
  });
  require_regular_file(o.trace);  // the trace reader would block on a FIFO
  std::error_code size_error;
  const auto trace_bytes = static_cast<double>(fs::file_size(o.trace, size_error));
  const double budget_gib = global.memory_budget_gib();
  const SearchEstimate estimate = check_search_budget(model, cluster, seq_len, plan_space, tmpl, options,
                                                      size_error ? 0.0 : trace_bytes, {budget_gib, o.max_search_seconds});
  memory_activity() = MemoryActivity{str("tuning on cluster ", cluster.name), estimate.memory_bytes, budget_gib};
  candidates = estimate.candidates;
  if (global.verbosity > 0) {
    std::cerr << "estimate: " << estimate.candidates << " candidates, about " << format_gib(estimate.memory_bytes)
              << " GiB (" << estimate.largest_memory() << "), at least " << fixed(estimate.seconds, 2)
              << " s before simulating (" << estimate.largest_time() << ")\n";
  }
  const Trace trace = read_trace(o.trace);
  apply_trace_samples(o, trace, options);

  ProgressBar bar(std::cerr, isatty(fileno(stderr)) != 0);
  options.progress = [&](const SearchProgress& p) {
    settled = p.settled;
    candidates = p.candidates;
    const double fraction = p.candidates > 0 ? static_cast<double>(p.settled) / static_cast<double>(p.candidates) : 0.0;
    bar.update(fraction, str(p.simulated, " simulated, ", p.work_sets, " work sets"));
  };
  const SearchResult result = search_plans(model, cluster, trace, seq_len, plan_space, tmpl, options);
  bar.finish();
  limit.disarm();

  // Outputs: plans referencing their inputs relative to where they are written.
  std::map<std::string, std::string> hashes;
  if (!outputs.empty()) {
    hashes["model"] = file_digest(model_path);
    hashes["cluster"] = file_digest(cluster_path);
    hashes["gpu"] = file_digest(cluster.gpu_path);
    hashes["trace"] = file_digest(o.trace);
    std::vector<std::string> texts;
    for (size_t k = 0; k < outputs.size(); ++k) {
      const size_t rank = k == 0 ? 0 : k - 1;  // the best plan, then plan-1 .. plan-K
      if (rank >= result.ranked.size()) break;  // fewer plans than --top
      PlanConfig plan = result.ranked[rank].plan;
      plan.model = reference_from(outputs[k], model_path);
      plan.cluster = reference_from(outputs[k], cluster_path);
      plan.trace = reference_from(outputs[k], o.trace);
      plan.prediction->input_hashes = hashes;
      texts.push_back(write_plan_yaml(plan));
    }
    for (size_t k = 0; k < texts.size(); ++k) bundle->write(outputs[k].filename().string(), texts[k]);
    bundle->commit();
    outputs.resize(texts.size());
  }

  const SearchStats& s = result.stats;
  const std::string header =
      str("sparsering tune: ", model.name, " on ", cluster.name, " (", cluster.world_size(), " x ", cluster.gpu_config.name,
          "), ", seq_len, " tokens, objective ", to_string(options.objective));
  const std::string space =
      str(s.candidates, " candidates in ", s.geometries, " geometries: ", s.memory_pruned, " pruned by memory, ",
          s.bound_pruned, " by step-time bounds, ", s.budget_skipped > 0 ? str(s.budget_skipped, " skipped by budget, ") : "",
          s.simulated, " simulated (", s.work_sets, " work sets counted, ", s.layers_counted, " layers, ", s.refined,
          " bounds refined) in ",
          fixed(s.seconds, 1), " s");
  if (global.format == OutputFormat::json) {
    nlohmann::json out;
    out["sparsering_version"] = kVersion;
    out["model"] = model.name;
    out["cluster"] = cluster.name;
    out["seq_len_tokens"] = seq_len;
    out["objective"] = std::string(to_string(options.objective));
    out["samples"] = result.samples;
    out["rank_by"] = std::string(to_string(options.rank_by));
    out["guarantee"] = result.guarantee;
    out["explanation"] = result.explanation;
    out["stats"] = {{"candidates", s.candidates},       {"geometries", s.geometries},     {"memory_pruned", s.memory_pruned},
                    {"bound_pruned", s.bound_pruned},   {"budget_skipped", s.budget_skipped}, {"simulated", s.simulated},
                    {"over_cap", s.over_cap},           {"work_sets", s.work_sets},       {"layers_counted", s.layers_counted},
                    {"refined", s.refined},
                    {"ring_refined", s.ring_refined},   {"rounds", s.rounds},             {"seconds", s.seconds}};
    out["ties"] = result.ties;
    out["tie_band"] = {{"relative", options.tie_band}, {"source", options.tie_band_source}};
    out["tie_note"] = result.tie_note;
    out["pruned_by_bound"] = {{"memory", s.memory_pruned},
                              {"coarse", s.pruned_by_bound[0]},
                              {"tiles", s.pruned_by_bound[1]},
                              {"cells", s.pruned_by_bound[2]},
                              {"strong_and_ring", s.pruned_by_bound[3]},
                              {"counted_layers", s.pruned_by_bound[4]}};
    nlohmann::json simulated = nlohmann::json::array();
    for (const SimulatedPlan& p : result.simulated) {
      const Candidate& c = result.space.candidates[static_cast<size_t>(p.candidate)];
      const double step_ms = options.objective == Objective::step_time
                                 ? p.cost * 1e-6
                                 : p.cost * 1e-6 * static_cast<double>(result.space.degrees_of(c).data_parallel * seq_len);
      nlohmann::json plan = {{"candidate", p.candidate},
                             {"description", describe_candidate(result.space, c)},
                             {"cost", p.cost},
                             {"step_ms", step_ms},
                             {"peak_memory_gib", static_cast<double>(p.peak_bytes) / static_cast<double>(int64_t{1} << 30)},
                             {"fits", p.fits},
                             {"tied_with_fastest", p.fits && !result.simulated.empty() &&
                                                       p.cost < result.simulated.front().cost * (1.0 + options.tie_band)}};
      std::vector<double> sample_ms;  // step_ms is linear in the cost
      for (const double cost : p.sample_costs) sample_ms.push_back(p.cost > 0.0 ? step_ms * cost / p.cost : 0.0);
      add_sample_json(plan, result.samples, sample_ms);
      simulated.push_back(plan);
    }
    out["simulated"] = simulated;
    nlohmann::json ranked = nlohmann::json::array();
    for (size_t k = 0; k < result.ranked.size(); ++k) {
      const RankedPlan& r = result.ranked[k];
      const PlanFigures& f = r.figures;
      ranked.push_back({{"rank", k + 1},
                        {"plan", r.plan.name},
                        {"description", describe_candidate(result.space, result.space.candidates[static_cast<size_t>(r.candidate)])},
                        {"step_ms", ranked_step_ms(r, options.rank_by)},
                        {"tokens_per_s", ranked_tokens_per_s(r, options.rank_by)},
                        {"attention_fwd_bwd_ms", f.attention_fwd_bwd_ms},
                        {"exposed_comm_ms", f.exposed_comm_ms},
                        {"worker_imbalance", f.worker_imbalance},
                        {"step_imbalance", f.step_imbalance},
                        {"peak_memory_gib", gib_of(r.peak_bytes)},
                        {"tie_group", r.tie_group},
                        {"extrapolated", extrapolated(result.space.geometry_of(result.space.candidates[static_cast<size_t>(r.candidate)]).block)},
                        {"figures_sample", r.representative_sample},
                        {"fastest_on_samples", r.fastest_on}});
      add_sample_json(ranked.back(), result.samples, r.sample_step_ms);
    }
    out["ranked"] = ranked;
    nlohmann::json notes = result.ranked.front().notes;
    if (!blocks.note.empty()) notes.push_back(blocks.note);
    out["notes"] = notes;
    nlohmann::json calibration_json = {{"source", calibration.source},
                                       {"this_kernel_build", calibration.this_kernel_build},
                                       {"stale", calibration.stale},
                                       {"searched_blocks", blocks.searched},
                                       {"extrapolated_blocks", blocks.extrapolated},
                                       {"left_out_blocks", blocks.left_out}};
    if (calibration.measured()) calibration_json["kernel_build"] = calibration.kernel_build;
    out["calibration"] = calibration_json;
    nlohmann::json files = nlohmann::json::array();
    for (const fs::path& path : outputs) files.push_back(path.string());
    out["outputs"] = files;
    std::cout << dump_json(out, 2) << '\n';
    return;
  }
  // Names in these lines come from the user's configs: escaped before they reach the terminal.
  std::cout << escape_for_terminal(header) << "\n" << escape_for_terminal(space) << "\n"
            << escape_for_terminal(result.guarantee, true) << "\n\n";
  if (global.verbosity > 0) {
    std::cerr << "time: bounds " << fixed(s.bound_seconds, 2) << " s, refining bounds " << fixed(s.refine_seconds, 2)
              << " s (" << s.refined << " geometries, " << s.ring_refined << " ring bounds), counting work "
              << fixed(s.count_seconds, 2) << " s (" << s.layers_counted << " layers of " << s.work_sets
              << " geometries), simulating " << fixed(s.simulate_seconds, 2) << " s (" << s.rounds << " rounds); " << s.over_cap
              << " simulated plans exceeded the memory cap\n";
  }
  const bool several = result.samples.size() > 1;
  std::vector<std::string> columns = {"rank", "tie", several ? str(to_string(options.rank_by), " step ms") : "step ms"};
  if (several) columns.insert(columns.end(), {"step ms min-max", "fastest on"});
  columns.insert(columns.end(), {"tokens/s", "attn fwd+bwd ms", "exposed comm ms", "imbalance w/s", "peak GiB", "degrees",
                                 "ring order", "ring levels", "layout", "block", "comm", "recompute", "zero"});
  Table table(columns);
  for (size_t k = 0; k < result.ranked.size(); ++k) {
    const RankedPlan& r = result.ranked[k];
    const PlanFigures& f = r.figures;
    const Candidate& c = result.space.candidates[static_cast<size_t>(r.candidate)];
    std::vector<std::string> row = {std::to_string(k + 1), str("T", r.tie_group + 1), ms(ranked_step_ms(r, options.rank_by))};
    if (several) {
      const std::vector<std::string> extra = sample_columns(r);
      row.insert(row.end(), extra.begin(), extra.end());
    }
    row.insert(row.end(), {fixed(ranked_tokens_per_s(r, options.rank_by), 0), ms(f.attention_fwd_bwd_ms),
                   ms(f.exposed_comm_ms), str(fixed(f.worker_imbalance, 2), "/", fixed(f.step_imbalance, 2)),
                   fixed(gib_of(r.peak_bytes), 2), describe_degrees(result.space.degrees_of(c)),
                   describe_order(result.space.order_of(c)), describe_hierarchy(result.space.hierarchy_of(c)),
                   str(describe_layout(result.space.geometry_of(c).layout),
                       result.space.geometry_of(c).layout.kind() == LayoutKind::striped
                           ? (c.shuffle == LayoutShuffleMode::loader ? " loader" : "")
                           : ""),
                   str(result.space.geometry_of(c).block, extrapolated(result.space.geometry_of(c).block) ? " extrapolated" : ""),
                   std::string(to_string(c.comm)), std::string(to_string(c.recompute)), std::to_string(c.zero_stage)});
    table.add_row(row);
  }
  table.print(std::cout);
  if (several) print_sample_note(result, options.rank_by);
  std::cout << "\nwhy: " << escape_for_terminal(result.explanation, true) << "\n";
  if (!result.tie_note.empty()) std::cout << "ties: " << escape_for_terminal(result.tie_note, true) << "\n";
  for (const std::string& note : result.ranked.front().notes) std::cout << "note: " << escape_for_terminal(note, true) << "\n";
  if (!blocks.note.empty()) std::cout << "note: " << escape_for_terminal(blocks.note, true) << "\n";
  if (!outputs.empty()) {
    std::cout << "\nwrote " << escape_for_terminal(outputs.front().string());
    if (outputs.size() > 1) {
      std::cout << " and " << escape_for_terminal(outputs[1].string()) << " .. " << escape_for_terminal(outputs.back().string());
    }
    std::cout << "\n";
  }
}

}  // namespace

void add_tune_command(CLI::App& app, const GlobalOptions& global) {
  auto o = std::make_shared<TuneOptions>();
  auto* cmd = app.add_subcommand("tune",
                                 "Search parallel layouts (degrees, ring hierarchy and order, token layout, blocks, "
                                 "comm, recompute, ZeRO) with the simulator and write the best plan (--out plan.yaml)");
  cmd->add_option("--model", o->model, "Model config (file, or a name in configs/models/)")->required();
  cmd->add_option("--cluster", o->cluster, "Cluster config (file, or a name in configs/clusters/)")->required();
  cmd->add_option("--trace", o->trace, "Sparsity trace (.safetensors) of the model at --seq-len")->required();
  cmd->add_option("--seq-len", o->seq_len, "Tokens per sequence, e.g. 524288 or 512K")->required();
  cmd->add_option("--top", o->top, "Plans to rank (and to write as <out>-1.yaml ..)")->capture_default_str();
  cmd->add_option("--objective", o->objective, "step-time (lowest step) or tokens-per-s (highest throughput)")
      ->check(CLI::IsMember({"step-time", "tokens-per-s"}))
      ->capture_default_str();
  cmd->add_option("--memory-cap-gib", o->memory_cap_gib, "Memory per GPU a plan may use (default: the GPU's)");
  cmd->add_option("--threads", o->threads, "Simulation threads (0 = every core); never changes the result")
      ->capture_default_str();
  cmd->add_option("--gap", o->gap, "Accept plans within this relative distance of the optimum (0.02 = 2%); 0 = exact")
      ->capture_default_str();
  cmd->add_option("--max-work-sets", o->max_work_sets,
                  "Stop counting new work sets after this many (0 = no limit); the output says what was skipped")
      ->capture_default_str();
  cmd->add_option("--max-ring-simulated", o->max_ring_simulated,
                  "Simulate context-parallel rings of at most this many GPUs (0 = no limit); larger ones are "
                  "reported with their lower bound")
      ->capture_default_str();
  cmd->add_option("--sample", o->sample, "Trace sample whose patterns are used (default 0)");
  cmd->add_option("--samples", o->samples,
                  "Evaluate every plan on several trace samples: all, a count N (the first N) or a list i,j,k");
  cmd->add_option("--rank-by", o->rank_by, "With --samples: rank plans by the mean, p50, p90 or max of their step")
      ->check(CLI::IsMember({"mean", "p50", "p90", "max"}))
      ->capture_default_str();
  cmd->add_option("--recall", o->recall, "Top-p recall of the kept sparse pattern")->capture_default_str();
  cmd->add_option("--blocks", o->blocks, "Kernel block sizes to try (block_q = block_k); a calibrated GPU searches the calibrated ones only")->delimiter(',')->capture_default_str();
  cmd->add_option("--granularities", o->granularities, "Stripe sizes to try, as multiples of the block (powers of two)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--layouts", o->layouts, "Token layouts to try")
      ->delimiter(',')
      ->check(CLI::IsMember({"contiguous", "zigzag", "striped"}))
      ->capture_default_str();
  cmd->add_option("--comms", o->comms, "Communication primitives to try")
      ->delimiter(',')
      ->check(CLI::IsMember({"p2p", "all_gather"}))
      ->capture_default_str();
  cmd->add_option("--layout-shuffles", o->layout_shuffles,
                  "Where striped layouts are established: per_layer (all-to-alls around every attention) or loader "
                  "(once, by the data loader)")
      ->delimiter(',')
      ->check(CLI::IsMember({"per_layer", "loader"}))
      ->capture_default_str();
  cmd->add_option("--recompute", o->recomputes, "Recomputation modes to try")
      ->delimiter(',')
      ->check(CLI::IsMember({"none", "selective", "full"}))
      ->capture_default_str();
  cmd->add_option("--zero", o->zero_stages, "ZeRO stages to try")->delimiter(',')->check(CLI::Range(0, 3))->capture_default_str();
  cmd->add_option("--tie-band", o->tie_band,
                  "Plans closer than this relative step difference are statistically tied (default: the median "
                  "error of --model-error)");
  cmd->add_option("--model-error", o->model_error, "The model's validated error (YAML)")->capture_default_str();
  cmd->add_option("--max-search-seconds", o->max_search_seconds,
                  "Time budget: a search estimated to need more is refused before it starts, and one that runs "
                  "past it is stopped (exit 2, nothing written)")
      ->capture_default_str();
  cmd->add_option("--max-candidates", o->max_candidates, "Refuse a plan space holding more candidates than this")
      ->capture_default_str();
  cmd->add_flag("--brute-force", o->brute_force, "Simulate every candidate without pruning (slow; for checking)");
  cmd->add_flag("--allow-extrapolated-shapes", o->allow_extrapolated_shapes,
                "Also search block sizes whose kernel shape the GPU's calibration does not list, on costs extrapolated "
                "from a calibrated shape (marked \"extrapolated\" in the ranking); by default they are left out");
  cmd->callback([o, &global] { run_tune(*o, global); });
}

}  // namespace sparsering::cli
