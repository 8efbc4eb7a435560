// Registration of the GPU commands in a build without CUDA: they exist, so --help lists them,
// and they say how to get a GPU build instead of failing obscurely.
#include "cli/commands.hpp"
#include "common/error.hpp"

namespace sparsering::cli {

void add_gpu_commands(CLI::App& app, const GlobalOptions&) {
  for (const char* name : {"validate", "calibrate"}) {
    auto* command = app.add_subcommand(name, std::string("(needs a CUDA build) ") + name + " on real GPUs");
    command->allow_extras();
    command->callback([name] {
      throw InputError(str("`sparsering ", name,
                           "` needs a build with CUDA; reconfigure with -DSPARSERING_CUDA=ON on a machine with nvcc"));
    });
  }
}

}  // namespace sparsering::cli
