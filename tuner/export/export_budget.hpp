// The peak memory of `sparsering export` (export_plan, then writing its bundle), estimated before
// anything proportional to the plan is allocated, so that the command refuses a plan beyond
// --max-memory-gib (docs/robustness.md section 2) instead of running out of memory. Parts:
//   - the token permutation every target but chakra writes: the int64 matrix and its .npy bytes
//     (16 bytes a token), or for torch plan.json's JSON values and text (56 bytes a token);
//   - what a target writes per GPU of the plan: torch a JSON object of groups and neighbours (about
//     4.4 KiB), te its rank lists (80 bytes), the others their rank order (24 bytes);
//   - chakra: the simulation it runs without --durations (sim/step/resource_estimate.hpp, with
//     ring records), or the durations file as parsed, and its execution traces (about 900 bytes
//     per rank, ring step and layer).
// The per-unit figures are what the development machine measured (docs/PERF.md).
// Tested in tests/tuner/export_budget_test.cpp and, against the measured peak, in
// tests/cli/resource_budget_cli_test.cpp.
#pragma once

#include <vector>

#include "common/memory_budget.hpp"
#include "tuner/export/export_target.hpp"

namespace sparsering {

struct ExportMemoryEstimate {
  std::vector<MemoryEstimatePart> parts;  ///< largest first
  double bytes = 0.0;                     ///< sum of the parts
};

/// The estimate for exporting `input` to `target` with `options`; `input_bytes` is the size of
/// the file chakra reads (the durations, or the trace it simulates with; 0 for none).
ExportMemoryEstimate estimate_export_memory(ExportTarget target, const ExportInput& input, const ExportOptions& options,
                                            double input_bytes);

}  // namespace sparsering
