// `sparsering_calibrate`: the `calibrate` command alone (cli/gpu/calibrate_command.cpp) with the
// shared flags and exit codes of cli/main.cpp, for GPU machines where only the calibration
// benchmarks are built (see tests/measure/calibration/CMakeLists.txt).
#include <CLI/CLI.hpp>

#include "cli/app_runner.hpp"
#include "cli/commands.hpp"

int main(int argc, char** argv) {
  using namespace sparsering;
  cli::GlobalOptions global;
  CLI::App app{"sparsering calibrate, built alone", "sparsering_calibrate"};
  app.require_subcommand(1);
  app.fallthrough();
  cli::add_global_options(app, global);
  cli::add_calibrate_command(app, global);
  return cli::run_app(app, argc, argv);
}
