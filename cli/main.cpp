// The sparsering command line: parses flags with CLI11 and hands them to the libraries.
// Exit codes: 0 success, 2 bad input (arguments, files, configs, plans), 1 internal error.
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

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
  app.add_option("--out,-o", global.out, "Output path (file or folder; each command says which)");
  app.add_option("--format", global.format, "Output on stdout: table (for people) or json (for tools)")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, cli::OutputFormat>{{"table", cli::OutputFormat::table}, {"json", cli::OutputFormat::json}},
          CLI::ignore_case))
      ->option_text("table|json");
  app.add_flag("-v,--verbose", global.verbosity, "More detail on stderr (repeat for more)");
  app.add_flag("--force", global.force, "Overwrite existing output files");

  cli::add_trace_command(app, global);
  cli::add_simulate_command(app, global);
  cli::add_tune_command(app, global);
  cli::add_export_command(app, global);
  cli::add_gpu_commands(app, global);

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
