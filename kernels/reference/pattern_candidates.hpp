// From estimated masses to a trace's candidate lists (docs/formats.md section 1): the top-K vertical keys and
// slash offsets by mass, mass-descending, each with its share of the total estimated mass, padded
// with -1 / 0. This is what a capture tool writes into vertical.index / vertical.mass /
// slash.offset / slash.mass for one (sample, layer, head). Tested in
// tests/kernels/pattern_candidates_test.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/token_layout.hpp"

namespace sparsering {

/// Candidates of one (sample, layer, head), in the trace's slot layout.
struct PatternCandidates {
  std::vector<int32_t> vertical_index;  ///< (vertical slots) global key positions, -1 pads last
  std::vector<float> vertical_mass;     ///< (vertical slots) share of the total vertical mass, 0 on pads
  std::vector<int32_t> slash_offset;    ///< (slash slots) offsets q - k, -1 pads last
  std::vector<float> slash_mass;        ///< (slash slots) share of the total slash mass, 0 on pads
};

/// Keeps the `vertical_slots` keys and `slash_slots` offsets of largest mass (ties: smaller
/// position first), entries of zero mass never. Shares are mass / total mass of the vector (the
/// total is last_q when the masses come from estimate_pattern_pass2_ref), so they sum to <= 1.
/// `vertical_mass_by_token` and `slash_mass_by_offset` are indexed by global key position and by
/// offset (both of length N < 2^31). Throws InputError on negative slot counts, negative or
/// non-finite masses, or N >= 2^31.
PatternCandidates select_pattern_candidates(std::span<const float> vertical_mass_by_token,
                                            std::span<const float> slash_mass_by_offset, int64_t vertical_slots,
                                            int64_t slash_slots);

/// Assembles per-rank vertical masses (rank r's span holds its N/W local keys, as pass 2 writes
/// them for one head) into one vector indexed by global key position. Throws InputError when the
/// number of spans is not W or a span is not N/W long.
std::vector<float> vertical_mass_by_token(const TokenLayout& layout, std::span<const std::span<const float>> per_rank);

}  // namespace sparsering
