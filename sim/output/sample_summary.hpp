// One plan simulated on several trace samples, side by side: a table for the CLI (one row per
// sample, then the statistics over them) and the same as JSON ("samples" and "aggregate").
// Names come from user files and are escaped before they are printed. Tested in
// tests/sim/output_test.cpp.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "sim/step/simulation.hpp"

namespace sparsering {

/// {"samples": [{sample, step_ns, tokens_per_s, attention_fwd_ns, attention_bwd_ns, worker and
/// step imbalance, exposed_share, peak_bytes}, ...], "aggregate": {per figure: mean, p50, p90,
/// max, min, stdev}}; `results[k]` is the simulation of trace sample `samples[k]`.
nlohmann::json sample_summary_json(const std::vector<int64_t>& samples, const std::vector<SimulationResult>& results);

/// The same as a table.
void print_sample_summary(std::ostream& out, const std::vector<int64_t>& samples,
                          const std::vector<SimulationResult>& results);

}  // namespace sparsering
