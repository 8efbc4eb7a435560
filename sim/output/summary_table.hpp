// The simulation result as readable text for the CLI: inputs and assumptions, step time and
// tokens/s with their breakdown, per-layer attention times and imbalance figures, memory.
// Tested in tests/sim/output_test.cpp.
#pragma once

#include <ostream>

#include "sim/step/simulation.hpp"

namespace sparsering {

/// Writes the summary to `out`.
void print_summary(std::ostream& out, const SimulationResult& result);

}  // namespace sparsering
