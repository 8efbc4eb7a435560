// Flags every subcommand shares. Parsed once in main and handed to each command.
#pragma once

#include <string>

#include "common/memory_budget.hpp"

namespace sparsering::cli {

enum class OutputFormat { table, json };

struct GlobalOptions {
  std::string out;                          ///< --out: output path (file or folder, per command)
  OutputFormat format = OutputFormat::table;///< --format: human table or JSON on stdout
  int verbosity = 0;                        ///< -v, -vv: more detail on stderr
  bool force = false;                       ///< --force: allow overwriting existing outputs
  double max_memory_gib = 0.0;              ///< --max-memory-gib: memory budget (0 = physical memory or cgroup limit)

  /// The memory budget in GiB: --max-memory-gib, else the machine's (common/memory_budget.hpp).
  double memory_budget_gib() const { return max_memory_gib > 0.0 ? max_memory_gib : default_memory_budget_gib(); }
};

}  // namespace sparsering::cli
