// Which samples of a trace a command uses, as people type them: "all", a count "N" (the first N
// samples) or a list "i,j,k" of sample indices. Tested in tests/traces/trace_samples_test.cpp.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace sparsering {

/// The sample indices `spec` names in a trace of `available` samples, ascending and distinct
/// (a list keeps its order but may not repeat an index). Throws InputError naming `what` (e.g.
/// "--samples") and the text for an empty or malformed spec, a count of 0 or above `available`,
/// and an index outside [0, available).
std::vector<int64_t> parse_trace_samples(std::string_view spec, int64_t available, std::string_view what);

}  // namespace sparsering
