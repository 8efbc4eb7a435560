// The human output of `sparsering validate`: per-layer attention time, exposed communication and
// the compute matrix's errors, predicted against measured, then per ring step (the slowest
// position), then the targets met or missed. Tested in tests/measure/validation/validation_compare_test.cpp.
#pragma once

#include <ostream>

#include "measure/validation/validation_compare.hpp"

namespace sparsering {

/// Prints the side-by-side comparison. At most `max_steps` step rows (the rest summarised).
void print_validation(std::ostream& out, const ValidationReport& report, int max_steps = 16);

}  // namespace sparsering
