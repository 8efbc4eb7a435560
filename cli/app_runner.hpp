// What every sparsering executable shares: the global flags and the mapping of failures to exit
// codes (0 success, 2 bad input: arguments, files, configs, plans; 1 internal error). Used by
// cli/main.cpp and by the single-command drivers under tests/ (calibrate, trace capture). Every
// message may quote user input, so it is printed through escape_for_terminal. Tested by
// tests/cli/hostile_input_cli_test.cpp.
#pragma once

#include <exception>
#include <iostream>
#include <map>
#include <new>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/global_options.hpp"
#include "common/error.hpp"
#include "common/memory_budget.hpp"
#include "common/temporary_paths.hpp"
#include "common/text_safety.hpp"

namespace sparsering::cli {

/// Registers --out, --format, -v and --force on `app`, parsed into `global`.
inline void add_global_options(CLI::App& app, GlobalOptions& global) {
  app.add_option("--out,-o", global.out, "Output path (file or folder; each command says which)");
  app.add_option("--format", global.format, "Output on stdout: table (for people) or json (for tools)")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, OutputFormat>{{"table", OutputFormat::table}, {"json", OutputFormat::json}},
          CLI::ignore_case))
      ->option_text("table|json");
  app.add_flag("-v,--verbose", global.verbosity, "More detail on stderr (repeat for more)");
  app.add_flag("--force", global.force, "Overwrite existing output files");
  app.add_option("--max-memory-gib", global.max_memory_gib,
                 "Memory budget in GiB; requests estimated above it are refused (default: physical memory or cgroup limit)")
      ->check(CLI::PositiveNumber);
}

/// Parses the command line, which runs the chosen command's callback, and returns the exit
/// code: 0, 2 for bad input (InputError or a CLI11 parse error), 1 for anything else.
inline int run_app(CLI::App& app, int argc, char** argv) {
  // Interrupted runs remove their temporary outputs (common/temporary_paths.hpp).
  install_temporary_cleanup();
  // CLI11 quotes unexpected arguments verbatim; escape them like every other message.
  app.failure_message([](const CLI::App* failed, const CLI::Error& e) {
    return escape_for_terminal(CLI::FailureMessage::simple(failed, e), true);
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const InputError& e) {
    std::cerr << "error: " << escape_for_terminal(e.what(), true) << '\n';
    return 2;
  } catch (const std::bad_alloc&) {
    // Estimation before work should refuse such requests; this is the backstop for what it misses.
    const MemoryActivity& a = memory_activity();
    std::cerr << "error: out of memory while " << escape_for_terminal(a.what, true);
    if (a.estimate_bytes > 0.0) {
      std::cerr << "; the request needs about " << format_gib(a.estimate_bytes) << " GiB (budget "
                << format_gib(a.budget_gib * kBytesPerGib) << " GiB, --max-memory-gib)";
    }
    std::cerr << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << escape_for_terminal(e.what(), true) << '\n';
    return 1;
  }
  return 0;
}

}  // namespace sparsering::cli
