// The sparsering command line: parses flags with CLI11 and hands them to the libraries.
// Exit codes: 0 success, 2 bad input (arguments, files, configs, plans), 1 internal error.
#include <CLI/CLI.hpp>

#include "cli/app_runner.hpp"
#include "cli/commands.hpp"
#include "common/error.hpp"
#include "sparsering/version.hpp"

int main(int argc, char** argv) {
  using namespace sparsering;
  cli::GlobalOptions global;
  CLI::App app{
      "sparsering plans, simulates and validates dynamic-sparse ring attention for long-context\n"
      "LLM training. Start with `sparsering trace synth --help`.",
      "sparsering"};
  app.set_version_flag("--version", str("sparsering ", kVersion, " (commit ", kGitCommit, ")"));
  app.require_subcommand(1);
  app.fallthrough();
  cli::add_global_options(app, global);

  cli::add_trace_command(app, global);
  cli::add_simulate_command(app, global);
  cli::add_tune_command(app, global);
  cli::add_export_command(app, global);
  cli::add_calibrate_command(app, global);
  cli::add_gpu_commands(app, global);
  return cli::run_app(app, argc, argv);
}
