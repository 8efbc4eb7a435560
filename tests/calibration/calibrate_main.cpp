// `sparsering_calibrate`: the `calibrate` command alone (cli/gpu/calibrate_command.cpp) with the
// shared flags and exit codes of cli/main.cpp, for GPU machines where only the calibration
// benchmarks are built (see tests/calibration/CMakeLists.txt).
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "cli/gpu/gpu_commands.hpp"
#include "common/error.hpp"

int main(int argc, char** argv) {
  using namespace sparsering;
  cli::GlobalOptions global;
  CLI::App app{"sparsering calibrate, built alone", "sparsering_calibrate"};
  app.require_subcommand(1);
  app.fallthrough();
  app.add_option("--out,-o", global.out, "Folder for the raw measurements (default: current folder)");
  app.add_option("--format", global.format, "Output on stdout: table or json")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, cli::OutputFormat>{{"table", cli::OutputFormat::table}, {"json", cli::OutputFormat::json}},
          CLI::ignore_case));
  app.add_flag("-v,--verbose", global.verbosity, "More detail on stderr");
  app.add_flag("--force", global.force, "Replace existing calibrations and outputs");
  cli::add_calibrate_command(app, global);
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
