// The kept vertical-slash pattern of one index row (batch x query head), in global token
// coordinates, and its prepared form: slash offsets merged into sorted intervals (offset 0, each
// query seeing itself, always included) and vertical keys sorted and deduplicated. Preparing once
// per row lets the index builder and the work counter reuse it for every (rank, ring step).
// Tested in tests/kernels/row_pattern_test.cpp and, through the builder, in
// tests/kernels/build_sparse_index_test.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sparsering {

/// Kept sets of one row as selected from a trace: any order, duplicates allowed.
struct RowPattern {
  std::vector<int64_t> slash_offsets;    ///< global q - k distances (tokens), each in [0, N)
  std::vector<int64_t> vertical_tokens;  ///< global key positions (tokens), each in [0, N)
};

/// A closed interval [lo, hi] of global slash offsets (tokens).
struct OffsetInterval {
  int64_t lo = 0;
  int64_t hi = 0;
  friend bool operator==(const OffsetInterval&, const OffsetInterval&) = default;
};

/// A RowPattern in the form the index builder walks.
struct PreparedRowPattern {
  /// Kept offsets plus offset 0, as ascending, disjoint, non-adjacent intervals (so consecutive
  /// offsets such as a local window 0..4095 cost one interval, not 4096 slashes).
  std::vector<OffsetInterval> slash_intervals;
  std::vector<int64_t> vertical_tokens;  ///< ascending, unique global key positions
};

/// Sorts, deduplicates and merges a row's kept sets. `seq_len_tokens` is N. Throws InputError
/// naming the value and its position when an offset or a key lies outside [0, N).
PreparedRowPattern prepare_row_pattern(std::span<const int64_t> slash_offsets,
                                       std::span<const int64_t> vertical_tokens, int64_t seq_len_tokens);

/// Same, for a RowPattern.
PreparedRowPattern prepare_row_pattern(const RowPattern& pattern, int64_t seq_len_tokens);

/// Prepares every row; an error message starts with the row index ("row 3: ...").
std::vector<PreparedRowPattern> prepare_row_patterns(std::span<const RowPattern> rows, int64_t seq_len_tokens);

/// Number of kept slash offsets (offset 0 included) that a prepared row covers.
int64_t kept_slash_offsets(const PreparedRowPattern& row);

}  // namespace sparsering
