// Renders a TraceSummary for people (plain-text tables) and for tools (JSON). Used by
// `sparsering trace info`. Tested in tests/traces/trace_summary_test.cpp (JSON fields and values).
#pragma once

#include <ostream>
#include <string>

#include "traces/trace_summary.hpp"

namespace sparsering {

/// Writes the summary as text: trace facts, overall densities, budget distribution, one row per
/// layer and, when `per_head`, one row per (layer, head).
void print_trace_summary(std::ostream& out, const TraceSummary& summary, bool per_head);

/// The summary as a JSON document (2-space indented). Keys: trace, settings, overall, budgets,
/// layers, and heads (only when `per_head`). Densities are fractions in [0, 1].
std::string trace_summary_json(const TraceSummary& summary, bool per_head);

}  // namespace sparsering
