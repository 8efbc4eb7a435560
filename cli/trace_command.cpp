// `sparsering trace`: the command group for sparsity traces. Subcommands are added below.
#include "cli/commands.hpp"

namespace sparsering::cli {

void add_trace_command(CLI::App& app, const GlobalOptions& /*global*/) {
  auto* trace = app.add_subcommand("trace", "Synthesize, inspect and convert attention-sparsity traces");
  trace->require_subcommand(1);
}

}  // namespace sparsering::cli
