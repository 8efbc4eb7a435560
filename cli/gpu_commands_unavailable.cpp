// Registration of the GPU commands in a build without CUDA: they exist, so --help lists them,
// and they say how to get a GPU build instead of failing obscurely. `calibrate` is registered in
// every build (cli/calibrate_command.cpp: its --refit needs no GPU); its benchmarks say the same.
#include "cli/calibrate_command.hpp"
#include "cli/commands.hpp"
#include "common/error.hpp"

namespace sparsering::cli {
namespace {

void add_unavailable(CLI::App& parent, const std::string& name, const std::string& full_name) {
  auto* command = parent.add_subcommand(name, "(needs a CUDA build) " + full_name + " on real GPUs");
  command->allow_extras();
  command->callback([full_name] {
    throw InputError(str("`sparsering ", full_name,
                         "` needs a build with CUDA and NCCL; reconfigure with -DSPARSERING_CUDA=ON on a machine "
                         "with nvcc"));
  });
}

}  // namespace

void run_calibrate_benchmarks(const CalibrateOptions&, const GlobalOptions&) {
  throw InputError(
      "`sparsering calibrate` measures on GPUs and needs a build with CUDA and NCCL; reconfigure with "
      "-DSPARSERING_CUDA=ON on a machine with nvcc (`calibrate --refit CSV` refits recorded measurements in any build)");
}

void add_gpu_commands(CLI::App& app, const GlobalOptions&) {
  add_unavailable(app, "validate", "validate");
  add_unavailable(*app.get_subcommand("trace"), "capture", "trace capture");
}

}  // namespace sparsering::cli
