// `sparsering simulate --plan P [--trace T] [--sample S | --samples all|N|i,j,k] [--out DIR]`: runs
// the cluster performance model (sim/step/simulation.hpp) on a plan and prints the summary (table
// or --format json); with several samples also each sample's figures and the statistics over
// them (sim/output/sample_summary.hpp), the detailed figures being the first sample's. With --out
// it writes DIR/result.json (everything, including every per-rank per-step figure) and
// DIR/timeline.json (Chrome/Perfetto trace events) as one bundle (common/output_bundle.hpp): both
// are replaced together or neither is, and existing files are refused before the simulation
// unless --force. The callback only turns flags into library calls; the library is tested in
// tests/sim/ (simulation_test.cpp, output_test.cpp), the command in tests/cli/
// (simulate_cli_test.cpp, hostile_output_cli_test.cpp).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "cli/commands.hpp"
#include "common/error.hpp"
#include "common/input_file.hpp"
#include "common/json_text.hpp"
#include "common/memory_budget.hpp"
#include "common/output_bundle.hpp"
#include "common/text_safety.hpp"
#include "core/kernel_build.hpp"
#include "sim/config/plan_config.hpp"
#include "sim/cost/calibration_status.hpp"
#include "sim/output/result_json.hpp"
#include "sim/output/sample_summary.hpp"
#include "sim/output/summary_table.hpp"
#include "sim/output/timeline_json.hpp"
#include "sim/step/resource_estimate.hpp"
#include "sim/step/simulation.hpp"
#include "sparsering/version.hpp"
#include "traces/safetensors_trace.hpp"
#include "traces/trace_samples.hpp"

namespace sparsering::cli {
namespace {

struct SimulateOptions {
  std::string plan_path;
  std::string trace_path;
  int64_t sample = -1;   // -1: not given (sample 0)
  std::string samples;   // several samples: all, N or i,j,k
  std::string layout_shuffle = "auto";
  bool no_grad_overlap = false;
  int64_t timeline_events = 2000000;
  int threads = 0;
  std::string accumulators = "mirror";
};

/// Identity of a trace file for the simulator's caches: path, size and modification time.
std::string trace_key(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  const auto time = std::filesystem::last_write_time(path, ec);
  return str(std::filesystem::absolute(path).lexically_normal().string(), "|", size, "|",
             time.time_since_epoch().count());
}

/// The trace samples to simulate: --samples, else the one sample.
std::vector<int64_t> chosen_samples(const SimulateOptions& o, const PlanConfig& plan, const Trace* trace, int64_t sample) {
  if (o.samples.empty()) return {sample};
  require(plan.sparse.enabled && trace != nullptr, "--samples needs a sparse plan and its trace (a dense plan has no samples)");
  return parse_trace_samples(o.samples, trace->samples, "--samples");
}

/// Several samples: the detailed figures are the first sample's; "samples" and "aggregate" put
/// every sample side by side.
void add_samples(nlohmann::json& out, const std::vector<int64_t>& samples, const std::vector<SimulationResult>& results) {
  nlohmann::json side_by_side = sample_summary_json(samples, results);
  out["detail_sample"] = samples.front();
  out["samples"] = std::move(side_by_side["samples"]);
  out["aggregate"] = std::move(side_by_side["aggregate"]);
}

void run_simulate(const SimulateOptions& o, const GlobalOptions& global) {
  require(o.sample >= -1, "--sample must be >= 0, got ", o.sample);
  require(o.sample < 0 || o.samples.empty(), "give --sample or --samples, not both");
  require(o.timeline_events >= 0, "--timeline-events must be >= 0, got ", o.timeline_events);
  require(o.threads >= 0, "--threads must be >= 0, got ", o.threads);
  const LoadedPlan loaded = load_plan_with_inputs(o.plan_path);
  const CalibrationStatus calibration = kernel_build_status(loaded.cluster.gpu_config, this_kernel_build());
  if (calibration.stale) std::cerr << escape_for_terminal(stale_calibration_warning(calibration)) << "\n";
  std::filesystem::path trace_path = o.trace_path.empty() ? loaded.plan.trace_path : std::filesystem::path(o.trace_path);
  SimulationOptions options;
  options.trace_sample = std::max<int64_t>(o.sample, 0);
  options.overlap_grad_sync = !o.no_grad_overlap;
  options.layout_shuffle = o.layout_shuffle == "always"  ? LayoutShuffle::always
                           : o.layout_shuffle == "never" ? LayoutShuffle::never
                                                         : LayoutShuffle::automatic;
  options.keep_ring_records = !global.out.empty();
  options.accumulator_route = o.accumulators == "direct" ? AccumulatorRoute::direct_return : AccumulatorRoute::mirror;
  options.threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));

  // Check the outputs before the (possibly long) simulation, so a refusal costs nothing.
  std::optional<OutputBundle> bundle;
  if (!global.out.empty()) bundle.emplace(global.out, std::vector<std::string>{"result.json", "timeline.json"}, global.force);

  Trace trace;
  const Trace* trace_ptr = nullptr;
  if (loaded.plan.sparse.enabled) {
    require(!trace_path.empty(), "plan ", o.plan_path, " is sparse: give a trace with --trace or the plan's `trace:` key");
    require_regular_file(trace_path);  // the trace reader would block on a FIFO
    trace = read_trace(trace_path);
    trace_ptr = &trace;
    options.trace_key = trace_key(trace_path);
  }
  // Estimate before work: refuse what would not fit in the memory budget.
  std::error_code size_error;
  const double trace_bytes =
      trace_ptr != nullptr ? static_cast<double>(std::filesystem::file_size(trace_path, size_error)) : 0.0;
  const SimulationResourceEstimate estimate =
      estimate_simulation_resources(loaded.plan, loaded.model, options, size_error ? 0.0 : trace_bytes);
  const double budget_gib = global.memory_budget_gib();
  memory_activity() = MemoryActivity{str("simulating plan ", o.plan_path), estimate.memory_bytes, budget_gib};
  require_memory_budget(str("simulating plan ", o.plan_path), estimate.memory_bytes, budget_gib,
                        str("largest: ", estimate.largest(),
                            ". Use fewer tokens per rank or a smaller ring (context_parallel), drop --out, "
                            "or raise --max-memory-gib"));
  SimulationContext context;
  const std::vector<int64_t> samples = chosen_samples(o, loaded.plan, trace_ptr, options.trace_sample);
  std::vector<SimulationResult> per_sample;
  for (const int64_t sample : samples) {
    options.trace_sample = sample;
    per_sample.push_back(simulate(context, loaded.plan, loaded.model, loaded.cluster, trace_ptr, options));
    options.keep_ring_records = false;  // only the first sample's records are written
  }
  const SimulationResult& result = per_sample.front();

  std::vector<std::filesystem::path> written;
  if (bundle) {
    TimelineOptions timeline;
    timeline.max_events = o.timeline_events;
    // Written into the bundle's temporary folder and moved into place together.
    nlohmann::json full = result_to_json(result);
    if (samples.size() > 1) add_samples(full, samples, per_sample);
    bundle->write("result.json", dump_json(full) + "\n");
    bundle->write("timeline.json", dump_json(timeline_json(result, timeline)) + "\n");
    written = bundle->commit();
  }
  if (global.format == OutputFormat::json) {
    nlohmann::json summary = result_summary_json(result);
    summary["sparsering_version"] = kVersion;
    if (samples.size() > 1) add_samples(summary, samples, per_sample);
    if (bundle) summary["outputs"] = {written.at(0).string(), written.at(1).string()};
    std::cout << dump_json(summary, 2) << '\n';
  } else {
    print_summary(std::cout, result);
    if (samples.size() > 1) {
      std::cout << "\n";
      print_sample_summary(std::cout, samples, per_sample);
    }
    if (bundle) {
      std::cout << "\nwrote " << escape_for_terminal(written.at(0).string()) << " and "
                << escape_for_terminal(written.at(1).string()) << "\n";
    }
  }
}

}  // namespace

void add_simulate_command(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<SimulateOptions>();
  auto* cmd = app.add_subcommand(
      "simulate", "Predict every rank's ring steps, the training step, tokens/s and memory for a plan "
                  "(--out DIR writes result.json and timeline.json)");
  cmd->add_option("--plan", options->plan_path, "Plan (configs/plans/<name>.yaml)")->required();
  cmd->add_option("--trace", options->trace_path, "Sparsity trace (.safetensors); default: the plan's `trace:`");
  cmd->add_option("--sample", options->sample, "Trace sample whose patterns are simulated (default 0)");
  cmd->add_option("--samples", options->samples,
                  "Simulate several trace samples (all, a count N, or a list i,j,k): each one's figures and "
                  "statistics over them; the detailed output is the first one's");
  cmd->add_option("--layout-shuffle", options->layout_shuffle,
                  "Layout all-to-alls: auto (striped only), always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  cmd->add_flag("--no-grad-overlap", options->no_grad_overlap, "Do not hide gradient sync behind backward");
  cmd->add_option("--timeline-events", options->timeline_events,
                  "Event budget of timeline.json before ring passes are drawn coarsely")
      ->capture_default_str();
  cmd->add_option("--accumulators", options->accumulators,
                  "Backward dK/dV route on hierarchical rings: mirror (along the K/V ring at every level) or "
                  "direct (straight back to the owner after each inner cycle)")
      ->check(CLI::IsMember({"mirror", "direct"}))
      ->capture_default_str();
  cmd->add_option("--threads", options->threads, "Work counting threads (0 = all cores); never changes the result")
      ->capture_default_str();
  cmd->callback([options, &global] { run_simulate(*options, global); });
}

}  // namespace sparsering::cli
