// Commands that run on GPUs; compiled only in a build with CUDA and NCCL (cli/CMakeLists.txt).
// Each lives in its own file under cli/gpu/ and is registered by cli/gpu_commands.cpp.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/global_options.hpp"

namespace sparsering::cli {

/// `sparsering validate PLAN --trace T [--replay]`: run a plan's attention layer on the GPUs
/// present and print measured against predicted (cli/gpu/validate_command.cpp).
void add_validate_command(CLI::App& app, const GlobalOptions& global);

/// `sparsering trace capture --qk DUMP`: the CUDA pattern estimator on dumped Q/K tensors,
/// written as a trace; `trace` is the existing `sparsering trace` command
/// (cli/gpu/trace_capture_command.cpp).
void add_trace_capture_command(CLI::App& trace, const GlobalOptions& global);

}  // namespace sparsering::cli
