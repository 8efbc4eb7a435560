// Each subcommand lives in its own file and registers itself on the app through one of these.
// A command's callback only converts flags into library calls; the logic lives in the libraries.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/global_options.hpp"

namespace sparsering::cli {

/// `sparsering trace ...`: synthesize, inspect and convert sparsity traces (cli/trace_command.cpp).
void add_trace_command(CLI::App& app, const GlobalOptions& global);

/// `sparsering simulate`: predict a plan's ring steps, layers, training step and memory
/// (cli/simulate_command.cpp).
void add_simulate_command(CLI::App& app, const GlobalOptions& global);

/// `sparsering tune`: search plans with the simulator, rank them and write the best
/// (cli/tune_command.cpp).
void add_tune_command(CLI::App& app, const GlobalOptions& global);

/// `sparsering export`: hand a plan to a training framework (cli/export_command.cpp).
void add_export_command(CLI::App& app, const GlobalOptions& global);

/// `sparsering calibrate`: kernel and NCCL microbenchmarks on this machine's GPUs (a GPU build),
/// least-squares fit, calibration written into a GPU config; `--refit CSV` fits recorded
/// measurements again, in any build (cli/calibrate_command.cpp).
void add_calibrate_command(CLI::App& app, const GlobalOptions& global);

/// Commands that need a GPU build; without CUDA they are registered but explain how to get them
/// (cli/gpu_commands.cpp or cli/gpu_commands_unavailable.cpp, chosen by CMake).
void add_gpu_commands(CLI::App& app, const GlobalOptions& global);

}  // namespace sparsering::cli
