// `sparsering export PLAN --to megatron|te|torchtitan|mtraining|chakra|torch --out DIR`
//   [--durations SIM.json | --trace T.safetensors [--sample N]] [--layers N]   (chakra)
//   [--pattern-config NAME] [--torchtitan-format python|toml-v0.2] [--force]
// Loads the plan with its model and cluster, refuses an export estimated beyond --max-memory-gib
// (tuner/export/export_budget.hpp), hands it to the exporter (tuner/export/), writes the files and
// NOTES.md into DIR, and prints what the target cannot express of the plan. Tested by
// tests/tuner/export_command_test.cpp, which runs the built binary, and
// tests/cli/resource_budget_cli_test.cpp.
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.hpp"
#include "common/error.hpp"
#include "common/json_text.hpp"
#include "common/memory_budget.hpp"
#include "sim/config/plan_config.hpp"
#include "tuner/export/export_budget.hpp"
#include "tuner/export/export_plan.hpp"

namespace sparsering::cli {
namespace {

struct ExportCommandOptions {
  std::string plan_path;
  std::string target;
  std::string durations_path;
  std::string trace_path;
  int64_t sample = 0;
  int64_t layers = 0;
  std::string pattern_config;
  std::string torchtitan_format = "python";
};

void run_export(const ExportCommandOptions& o, const GlobalOptions& global) {
  require(!global.out.empty(), "export needs --out DIR (the folder to write the export into)");
  const ExportTarget target = parse_export_target(o.target);
  require(target == ExportTarget::chakra || (o.durations_path.empty() && o.trace_path.empty()),
          "--durations and --trace apply to --to chakra only");
  const LoadedPlan loaded = load_plan_with_inputs(o.plan_path);
  ExportOptions options;
  options.durations_path = o.durations_path;
  options.trace_path = o.trace_path;
  options.trace_sample = o.sample;
  options.torchtitan_format = parse_torchtitan_format(o.torchtitan_format);
  options.chakra_layers = o.layers;
  options.pattern_config_name = o.pattern_config;
  const ExportInput input{loaded.plan, loaded.model, loaded.cluster};
  // Estimate before work: refuse what would not fit in the memory budget.
  std::error_code size_error;
  const std::filesystem::path read_by_chakra = !o.durations_path.empty()  ? std::filesystem::path(o.durations_path)
                                               : !o.trace_path.empty()    ? std::filesystem::path(o.trace_path)
                                                                          : loaded.plan.trace_path;
  const double input_bytes = target == ExportTarget::chakra && !read_by_chakra.empty()
                                 ? static_cast<double>(std::filesystem::file_size(read_by_chakra, size_error))
                                 : 0.0;
  const ExportMemoryEstimate estimate = estimate_export_memory(target, input, options, size_error ? 0.0 : input_bytes);
  const std::string what = str("exporting plan ", o.plan_path, " to ", to_string(target));
  memory_activity() = MemoryActivity{what, estimate.bytes, global.memory_budget_gib()};
  require_memory_budget(what, estimate.bytes, global.memory_budget_gib(),
                        str("largest: ", largest_items(estimate.parts),
                            ". Export a plan with fewer tokens or GPUs, or raise --max-memory-gib"));
  const ExportBundle bundle = export_plan(target, input, options);
  const auto written = write_export_bundle(bundle, global.out, global.force);
  if (global.format == OutputFormat::json) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& path : written) files.push_back(path.string());
    const nlohmann::json doc = {{"target", bundle.target}, {"plan", bundle.plan_name}, {"out", global.out},
                                {"exact", bundle.exact()},  {"lost", bundle.lost},     {"notes", bundle.notes},
                                {"files", files}};
    std::cout << dump_json(doc, 2) << '\n';
    return;
  }
  std::cout << "exported plan " << bundle.plan_name << " to " << bundle.target << ": " << written.size()
            << " files in " << global.out << " (see " << (std::filesystem::path(global.out) / "NOTES.md").string()
            << ")\n";
  if (bundle.exact()) {
    std::cout << "nothing of the plan is lost\n";
  } else {
    std::cout << "what " << bundle.target << " cannot express of the plan:\n";
    for (const std::string& line : bundle.lost) std::cout << "  - " << line << '\n';
  }
  if (global.verbosity > 0) {
    for (const std::string& line : bundle.notes) std::cerr << "note: " << line << '\n';
  }
}

}  // namespace

void add_export_command(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<ExportCommandOptions>();
  auto* cmd = app.add_subcommand(
      "export", "Export a plan to a training framework or simulator (writes a folder; --out DIR)");
  cmd->add_option("plan", options->plan_path, "Plan file (configs/plans/<name>.yaml)")->required();
  cmd->add_option("--to", options->target, "Target: megatron, te, torchtitan, mtraining, chakra or torch")
      ->required()
      ->option_text("TARGET");
  cmd->add_option("--durations", options->durations_path,
                  "chakra: per-(rank, step) kernel times: `simulate --out DIR`'s DIR/result.json, or JSON "
                  "{\"forward\": [[ns per step] per rank], \"backward\": ...}; default: simulate the plan");
  cmd->add_option("--trace", options->trace_path,
                  "chakra: sparsity trace (.safetensors) to simulate the plan with; default: the plan's `trace:`");
  cmd->add_option("--sample", options->sample, "chakra: trace sample whose patterns are simulated")
      ->capture_default_str();
  cmd->add_option("--layers", options->layers,
                  "chakra: attention layers chained in each rank's trace (0 = every layer of the durations)")
      ->capture_default_str();
  cmd->add_option("--pattern-config", options->pattern_config,
                  "mtraining: MInference pattern config name (default: a recall-style flex config written with "
                  "the export)");
  cmd->add_option("--torchtitan-format", options->torchtitan_format,
                  "torchtitan: python (Trainer.Config fields, current torchtitan) or toml-v0.2 (job-config TOML of "
                  "torchtitan up to v0.2.2)")
      ->capture_default_str();
  cmd->callback([options, &global] { run_export(*options, global); });
}

}  // namespace sparsering::cli
