// Recall selection: turns a head's mass-sorted candidates into the kept verticals and slashes for a
// recall target p (docs/algorithm.md section 2, step 4), offline, from a trace.
//
// Semantics, for one (sample, layer, head) and one kind (verticals or slashes) separately:
//   m_0 >= m_1 >= ... >= m_{n-1}  the masses of the n real (non-pad) candidates,
//   M = m_0 + ... + m_{n-1}       the head's total candidate mass (what the trace captured; the
//                                 mass of keys or diagonals that are not candidates is unknown),
//   k_p = the smallest k with m_0 + ... + m_{k-1} >= p * M * (1 - 1e-6)
//         (the relative slack absorbs float rounding of masses and of p; k_p = 0 when M = 0),
//   kept = min(max(k_p, min_entries), n, cap)   with cap = max_verticals or max_slashes.
// So p = 1 keeps candidates until all but a 1e-6 share of M is covered (never a zero-mass one),
// and the kept set is always a prefix of the candidate list: the caller gets the kept key
// positions / offsets in mass-descending order.
// Sums are accumulated in double. Offset 0 is not forced in: the kernels add it themselves
// (kernels/sparse_index.hpp), and the trace summary counts it (traces/trace_summary.hpp).
// Tested in tests/traces/recall_test.cpp against hand-computed cases.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "traces/trace.hpp"

namespace sparsering {

struct RecallSettings {
  double recall = 0.95;          ///< p in (0, 1]
  int64_t max_verticals = 4096;  ///< cap on kept key columns per head, >= 0
  int64_t max_slashes = 4096;    ///< cap on kept diagonals per head, >= 0
  int64_t min_entries = 0;       ///< keep at least this many of each kind (when there are that many
                                 ///< candidates), before the cap; 0 <= min_entries
};

/// Throws InputError naming the field when a setting is out of range (recall not in (0, 1],
/// negative caps or minimum).
void validate_recall_settings(const RecallSettings& settings);

/// Number of kept entries of one candidate list (semantics above). `mass` is the list's masses
/// including any trailing pad slots (0 mass); `real_count` is how many leading slots are real.
/// Preconditions: masses non-increasing and >= 0 (validate_trace guarantees it).
int64_t recall_prefix_length(std::span<const float> mass, int64_t real_count, double recall, int64_t min_entries,
                             int64_t cap);

/// Kept counts of one head.
struct KeptCounts {
  int64_t verticals = 0;
  int64_t slashes = 0;
};

/// Kept counts of (sample, layer, head) of a validated trace.
KeptCounts kept_counts(const Trace& trace, int64_t sample, int64_t layer, int64_t head, const RecallSettings& settings);

/// The kept entries of one head, in candidate (mass-descending) order.
struct HeadSelection {
  std::vector<int32_t> vertical_keys;  ///< key positions in [0, seq_len)
  std::vector<int32_t> slash_offsets;  ///< diagonal offsets q - k in [0, seq_len)
};

/// Kept key positions and offsets of (sample, layer, head) of a validated trace.
HeadSelection select_head(const Trace& trace, int64_t sample, int64_t layer, int64_t head,
                          const RecallSettings& settings);

}  // namespace sparsering
