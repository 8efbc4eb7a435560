// The kept sparse pattern of one attention head: which slash offsets and vertical key positions the
// kernel computes (after recall selection, docs/algorithm.md section 2). The work counter's input.
// Tested in tests/sim/work_counter_test.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sparsering {

struct KeptPattern {
  std::vector<int64_t> slash_offsets;       ///< kept diagonal offsets q - k (tokens, >= 0)
  std::vector<int64_t> vertical_positions;  ///< kept key positions (global token index)
};

/// Canonical form: slash offsets sorted, unique and including 0 (every query sees itself);
/// vertical positions sorted and unique. Throws InputError if any value lies outside
/// [0, seq_len_tokens), naming the kind, the value and the sequence length.
KeptPattern normalize_pattern(const KeptPattern& pattern, int64_t seq_len_tokens);

/// Builds a pattern from trace-style slots (int32, -1 pads ignored).
KeptPattern pattern_from_slots(std::span<const int32_t> slash_offsets, std::span<const int32_t> vertical_positions);

}  // namespace sparsering
