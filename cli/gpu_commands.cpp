// Registration of the GPU commands in a build with CUDA and NCCL (chosen by cli/CMakeLists.txt;
// the CPU-only build registers cli/gpu_commands_unavailable.cpp instead).
#include "cli/commands.hpp"
#include "cli/gpu/gpu_commands.hpp"
#include "common/error.hpp"

namespace sparsering::cli {

void add_gpu_commands(CLI::App& app, const GlobalOptions& global) {
  add_validate_command(app, global);
  auto* trace = app.get_subcommand("trace");
  add_trace_capture_command(*trace, global);
}

}  // namespace sparsering::cli
