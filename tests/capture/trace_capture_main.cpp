// A stand-alone driver for `sparsering trace capture` alone, so tests/capture/agreement_test.py
// can run the CUDA capture path with the shared flags and exit codes of cli/main.cpp (0 success,
// 2 bad input, 1 internal error) whether or not the full binary registers the GPU commands.
#include <exception>
#include <iostream>
#include <map>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/global_options.hpp"
#include "cli/gpu/gpu_commands.hpp"
#include "common/error.hpp"

int main(int argc, char** argv) {
  using namespace sparsering;
  cli::GlobalOptions global;
  CLI::App app{"trace capture driver for tests", "sparsering"};
  app.require_subcommand(1);
  app.fallthrough();
  app.add_option("--out,-o", global.out, "Output path");
  app.add_option("--format", global.format, "table or json")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, cli::OutputFormat>{{"table", cli::OutputFormat::table}, {"json", cli::OutputFormat::json}},
          CLI::ignore_case));
  app.add_flag("-v,--verbose", global.verbosity, "More detail");
  app.add_flag("--force", global.force, "Overwrite existing output files");
  auto* trace = app.add_subcommand("trace", "Traces");
  trace->require_subcommand(1);
  cli::add_trace_capture_command(*trace, global);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const InputError& e) {
    std::cerr << "error: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
