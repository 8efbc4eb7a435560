// The memory a command may use (`--max-memory-gib`, docs/simulator.md section 11): the machine's
// physical memory, or a lower cgroup limit, unless the user states a budget; the parts of an
// estimate; and the refusal of a request whose estimate exceeds it. Header-only so every layer
// can use it. Tested through the CLI in tests/cli/resource_budget_cli_test.cpp (simulate, trace synth),
// tests/cli/search_budget_cli_test.cpp (tune).
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <algorithm>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace sparsering {

/// Bytes in one GiB (2^30).
inline constexpr double kBytesPerGib = 1073741824.0;

/// Physical memory of the machine in bytes (sysconf); 0 if unknown.
inline double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_bytes = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_bytes <= 0) return 0.0;
  return static_cast<double>(pages) * static_cast<double>(page_bytes);
}

/// The cgroup v2 memory limit of this process in bytes (/sys/fs/cgroup/memory.max); 0 when
/// absent or "max".
inline double cgroup_memory_limit_bytes() {
  std::ifstream in("/sys/fs/cgroup/memory.max");
  std::string text;
  if (!(in >> text) || text == "max") return 0.0;
  try {
    return std::stod(text);
  } catch (...) {
    return 0.0;
  }
}

/// The default budget in GiB: physical memory, or the cgroup limit when that is lower.
inline double default_memory_budget_gib() {
  double bytes = physical_memory_bytes();
  const double cgroup = cgroup_memory_limit_bytes();
  if (cgroup > 0.0 && (bytes <= 0.0 || cgroup < bytes)) bytes = cgroup;
  return bytes > 0.0 ? bytes / kBytesPerGib : 16.0;
}

/// The process itself (code, configs, allocator arenas): the first item of every estimate.
inline constexpr double kProcessBaseBytes = 48.0 * 1024 * 1024;

/// One part of a memory estimate.
struct MemoryEstimatePart {
  std::string name;    ///< e.g. "work counting scratch"
  double bytes = 0.0;  ///< peak bytes of this part
};

/// Sorts `items` largest first; returns their sum, the estimated peak.
inline double sort_and_sum(std::vector<MemoryEstimatePart>& items) {
  std::sort(items.begin(), items.end(), [](const MemoryEstimatePart& a, const MemoryEstimatePart& b) { return a.bytes > b.bytes; });
  double sum = 0.0;
  for (const MemoryEstimatePart& item : items) sum += item.bytes;
  return sum;
}

/// `bytes` as GiB with two decimals (at least 0.01 for anything non-zero).
inline std::string format_gib(double bytes) {
  std::ostringstream out;
  const double gib = bytes / kBytesPerGib;
  out << std::fixed << std::setprecision(gib > 0.0 && gib < 0.01 ? 4 : 2) << gib;
  return out.str();
}

/// "name X GiB, name Y GiB" for the first `count` items (sorted largest first).
inline std::string largest_items(const std::vector<MemoryEstimatePart>& items, size_t count = 2) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < count; ++i) {
    out += str(i > 0 ? ", " : "", items[i].name, " ", format_gib(items[i].bytes), " GiB");
  }
  return out;
}

/// Throws InputError unless `need_bytes` fits in `budget_gib`. The message names what was asked
/// (`what`), the estimate, the budget and `--max-memory-gib`, then `advice` (what to change).
inline void require_memory_budget(const std::string& what, double need_bytes, double budget_gib,
                                  const std::string& advice) {
  if (need_bytes <= budget_gib * kBytesPerGib) return;
  throw InputError(str(what, " needs about ", format_gib(need_bytes), " GiB of memory, over the budget of ",
                       format_gib(budget_gib * kBytesPerGib), " GiB (--max-memory-gib); ", advice));
}

/// What the command is doing and what it was estimated to need, for the message when an
/// allocation fails anyway (cli/app_runner.hpp turns std::bad_alloc into exit 2).
struct MemoryActivity {
  std::string what = "running the command";  ///< e.g. "simulating plan p.yaml"
  double estimate_bytes = 0.0;                ///< 0 = no estimate
  double budget_gib = 0.0;
};

/// The process-wide activity record (one command runs per process).
inline MemoryActivity& memory_activity() {
  static MemoryActivity activity;
  return activity;
}

}  // namespace sparsering
