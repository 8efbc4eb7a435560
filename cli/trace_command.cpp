// `sparsering trace`: the command group for sparsity traces.
//   trace synth --model M.yaml --seq-len 512K [--samples S] [--drift D] [--seed N] --out T.safetensors
//   trace info T.safetensors [--recall P] [--max-verticals N] [--max-slashes N] [--block B] [--per-head]
// synth checks its output first, then estimates its memory (estimate_synth_memory) and refuses a
// request beyond --max-memory-gib before allocating. The callbacks only turn flags into library
// calls (traces/, sim/config/); tested by tests/traces/cli_trace_test.cpp, which runs the built
// binary, and by tests/cli/ (hostile_input_cli_test.cpp, hostile_output_cli_test.cpp).
#include <chrono>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/commands.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/input_file.hpp"
#include "common/json_text.hpp"
#include "common/memory_budget.hpp"
#include "common/output_target.hpp"
#include "common/text_safety.hpp"
#include "sim/config/model_config.hpp"
#include "traces/safetensors_trace.hpp"
#include "traces/sparsity_prior.hpp"
#include "traces/synth/synthetic_trace.hpp"
#include "traces/token_count.hpp"
#include "traces/trace_summary.hpp"
#include "traces/trace_summary_report.hpp"

namespace sparsering::cli {
namespace {

struct SynthOptions {
  std::string model_path;
  std::string seq_len = "";
  int64_t samples = 1;
  double drift = 0.0;
  uint64_t seed = 0;
  std::string prior_path;
  int64_t vertical_slots = 8192;
  int64_t slash_slots = 8192;
  double budget_recall = 0.95;
  int64_t last_q = 64;
  int64_t block_q = 64;
  int64_t block_k = 64;
  int threads = 0;
};

struct InfoOptions {
  std::string trace_path;
  double recall = 0.95;
  int64_t max_verticals = 4096;
  int64_t max_slashes = 4096;
  int64_t min_entries = 0;
  int64_t block_tokens = 64;
  bool per_head = false;
};

void run_synth(const SynthOptions& o, const GlobalOptions& global) {
  require(!global.out.empty(), "trace synth needs --out FILE.safetensors");
  // Refuse an output that cannot be written (missing folder, existing file without --force, a
  // device or FIFO) before reading the inputs and synthesizing.
  check_output_target(global.out, global.force);
  const ModelConfig model = load_model(o.model_path);
  const std::filesystem::path prior_path =
      o.prior_path.empty() ? sparsity_prior_path(model) : std::filesystem::path(o.prior_path);
  SynthSettings settings;
  settings.model = model.name;
  settings.layers = model.layers;
  settings.q_heads = model.q_heads;
  settings.kv_heads = model.kv_heads;
  settings.seq_len_tokens = parse_token_count(o.seq_len, "--seq-len");
  settings.samples = o.samples;
  settings.drift = o.drift;
  settings.seed = o.seed;
  settings.vertical_slots = o.vertical_slots;
  settings.slash_slots = o.slash_slots;
  settings.budget_recall = o.budget_recall;
  settings.last_q = o.last_q;
  settings.block_q = o.block_q;
  settings.block_k = o.block_k;
  settings.threads = o.threads;
  settings.prior = load_sparsity_prior(prior_path);
  validate_synth_settings(settings);
  // Estimate before allocating: refuse what would not fit in the memory budget.
  const SynthMemoryEstimate estimate = estimate_synth_memory(settings);
  const std::string what = str("trace synth of ", settings.samples, " samples x ", settings.layers, " layers x ",
                               settings.q_heads, " heads at ", settings.seq_len_tokens, " tokens");
  memory_activity() = MemoryActivity{what, estimate.bytes, global.memory_budget_gib()};
  require_memory_budget(what, estimate.bytes, global.memory_budget_gib(),
                        str("largest: ", largest_items(estimate.parts),
                            ". Use fewer --samples or candidate slots (--vertical-slots, --slash-slots), fewer "
                            "--threads, or raise --max-memory-gib"));
  const auto start = std::chrono::steady_clock::now();
  Trace trace = synthesize_trace(settings);
  trace.metadata.provenance["prior_file"] = prior_path.filename().string();
  write_trace(global.out, trace, global.force);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (global.format == OutputFormat::json) {
    const nlohmann::json doc = {{"out", global.out},
                                {"samples", trace.samples},
                                {"layers", trace.layers},
                                {"heads", trace.heads},
                                {"vertical_candidates", trace.vertical_candidates},
                                {"slash_candidates", trace.slash_candidates},
                                {"seq_len_tokens", settings.seq_len_tokens},
                                {"prior", settings.prior.name},
                                {"bytes", std::filesystem::file_size(global.out)}};
    std::cout << dump_json(doc, 2) << '\n';
  } else {
    std::cout << "wrote " << escape_for_terminal(global.out) << ": " << trace.samples << " samples x " << trace.layers << " layers x "
              << trace.heads << " heads at " << settings.seq_len_tokens << " tokens, " << trace.vertical_candidates
              << " vertical / " << trace.slash_candidates << " slash candidate slots, "
              << std::filesystem::file_size(global.out) << " bytes (prior " << escape_for_terminal(settings.prior.name) << ")\n";
  }
  if (global.verbosity > 0) std::cerr << "synthesized and wrote in " << seconds << " s\n";
}

void run_info(const InfoOptions& o, const GlobalOptions& global) {
  SummarySettings settings;
  settings.recall.recall = o.recall;
  settings.recall.max_verticals = o.max_verticals;
  settings.recall.max_slashes = o.max_slashes;
  settings.recall.min_entries = o.min_entries;
  settings.block_tokens = o.block_tokens;
  validate_recall_settings(settings.recall);  // before reading a large file
  require_regular_file(o.trace_path);  // the trace reader would block on a FIFO
  const Trace trace = read_trace(o.trace_path);
  const TraceSummary summary = summarize_trace(trace, settings);
  std::string text;
  if (global.format == OutputFormat::json) {
    text = trace_summary_json(summary, o.per_head);
  } else {
    std::ostringstream out;
    print_trace_summary(out, summary, o.per_head);
    text = out.str();
  }
  if (global.out.empty()) {
    // The table quotes the trace's model name and provenance; JSON is already escaped text.
    std::cout << (global.format == OutputFormat::json ? text : escape_for_terminal(text, true));
  } else {
    write_file_atomically(global.out, text, global.force);
  }
}

}  // namespace

void add_trace_command(CLI::App& app, const GlobalOptions& global) {
  auto* trace = app.add_subcommand("trace", "Synthesize, inspect and convert attention-sparsity traces");
  trace->require_subcommand(1);

  auto synth = std::make_shared<SynthOptions>();
  auto* synth_cmd = trace->add_subcommand(
      "synth", "Generate a synthetic sparsity trace for a model from its sparsity prior (writes --out)");
  synth_cmd->add_option("--model", synth->model_path, "Model config (configs/models/<name>.yaml)")->required();
  synth_cmd->add_option("--seq-len", synth->seq_len, "Tokens per sample, e.g. 524288 or 512K")->required();
  synth_cmd->add_option("--samples", synth->samples, "Samples (training steps) to generate")->capture_default_str();
  synth_cmd->add_option("--drift", synth->drift,
                        "Trend of each head's budgets from the first sample to the last, on a log scale (0 = "
                        "samples vary independently; 0.5 = a typical head's budgets change by a factor e^0.5)")
      ->capture_default_str();
  synth_cmd->add_option("--seed", synth->seed, "Random seed; the same seed gives the same trace")
      ->capture_default_str();
  synth_cmd->add_option("--prior", synth->prior_path,
                        "Sparsity prior YAML instead of the model's sparsity_prior (configs/sparsity/<name>.yaml)");
  synth_cmd->add_option("--vertical-slots", synth->vertical_slots, "Vertical candidate slots per head")
      ->capture_default_str();
  synth_cmd->add_option("--slash-slots", synth->slash_slots, "Slash candidate slots per head")->capture_default_str();
  synth_cmd
      ->add_option("--budget-recall", synth->budget_recall, "Recall at which kept counts match the prior's budgets")
      ->capture_default_str();
  synth_cmd->add_option("--last-q", synth->last_q, "Estimator queries recorded in the metadata")->capture_default_str();
  synth_cmd->add_option("--block-q", synth->block_q, "Estimator query block recorded in the metadata")
      ->capture_default_str();
  synth_cmd->add_option("--block-k", synth->block_k, "Estimator key block recorded in the metadata")
      ->capture_default_str();
  synth_cmd->add_option("--threads", synth->threads, "Worker threads (0 = all cores); never changes the output")
      ->capture_default_str();
  synth_cmd->callback([synth, &global] { run_synth(*synth, global); });

  auto info = std::make_shared<InfoOptions>();
  auto* info_cmd = trace->add_subcommand(
      "info", "Summarize a trace at a recall target: kept budgets, density and sparsity per layer");
  info_cmd->add_option("trace", info->trace_path, "Trace file (.safetensors)")->required();
  info_cmd->add_option("--recall", info->recall, "Recall target p in (0, 1]")->capture_default_str();
  info_cmd->add_option("--max-verticals", info->max_verticals, "Cap on kept verticals per head")->capture_default_str();
  info_cmd->add_option("--max-slashes", info->max_slashes, "Cap on kept slashes per head")->capture_default_str();
  info_cmd->add_option("--min-entries", info->min_entries, "Keep at least this many of each kind")
      ->capture_default_str();
  info_cmd->add_option("--block", info->block_tokens, "Kernel tile size (tokens) for the tile density")
      ->capture_default_str();
  info_cmd->add_flag("--per-head", info->per_head, "Also list every (layer, head)");
  info_cmd->callback([info, &global] { run_info(*info, global); });
}

}  // namespace sparsering::cli
