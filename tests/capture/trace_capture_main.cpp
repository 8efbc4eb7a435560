// A stand-alone driver for `sparsering trace capture` alone, so tests/capture/agreement_test.py
// can run the CUDA capture path with the shared flags and exit codes of cli/main.cpp (0 success,
// 2 bad input, 1 internal error) whether or not the full binary registers the GPU commands.
#include <CLI/CLI.hpp>

#include "cli/app_runner.hpp"
#include "cli/gpu/gpu_commands.hpp"

int main(int argc, char** argv) {
  using namespace sparsering;
  cli::GlobalOptions global;
  CLI::App app{"trace capture driver for tests", "sparsering"};
  app.require_subcommand(1);
  app.fallthrough();
  cli::add_global_options(app, global);
  auto* trace = app.add_subcommand("trace", "Traces");
  trace->require_subcommand(1);
  cli::add_trace_capture_command(*trace, global);
  return cli::run_app(app, argc, argv);
}
