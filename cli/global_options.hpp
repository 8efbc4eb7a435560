// Flags every subcommand shares. Parsed once in main and handed to each command.
#pragma once

#include <string>

namespace sparsering::cli {

enum class OutputFormat { table, json };

struct GlobalOptions {
  std::string out;                          ///< --out: output path (file or folder, per command)
  OutputFormat format = OutputFormat::table;///< --format: human table or JSON on stdout
  int verbosity = 0;                        ///< -v, -vv: more detail on stderr
  bool force = false;                       ///< --force: allow overwriting existing outputs
};

}  // namespace sparsering::cli
