// The kept vertical-slash set of a layer: for every index row (batch x query head) the sorted,
// unique vertical key positions and slash offsets q - k that the sparse pattern keeps, in global
// token coordinates, with its invariants checked once at construction. It travels unchanged from
// the validated problem (measure/validation/validation_problem.hpp) to the NCCL ring runtime
// (kernels/nccl/ring_attention_layer.hpp); padded() is the one conversion to the padded layout
// the GPU index build reads (KeptSetsView, kernels/cuda/sparse_index_build.hpp). Offset 0 (each
// query sees itself) is implied by the index contract (kernels/sparse_index.hpp): a row may list
// it or not. Tested in tests/core/kept_set_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sparsering {

/// The kept sets of one index row, global coordinates.
struct KeptRow {
  std::vector<int32_t> vertical_keys;  ///< key positions (tokens) in [0, N)
  std::vector<int32_t> slash_offsets;  ///< offsets q - k (tokens) in [0, N)
  friend bool operator==(const KeptRow&, const KeptRow&) = default;
};

/// A KeptSet in the padded layout of the GPU index build: row r's entries first, then -1 pads.
struct PaddedKeptSet {
  int32_t rows = 0;
  int32_t capacity = 1;                 ///< entries per row: the longest list of any row, >= 1
  std::vector<int32_t> vertical_count;  ///< (rows)
  std::vector<int32_t> vertical_keys;   ///< (rows x capacity), ascending and unique per row
  std::vector<int32_t> slash_count;     ///< (rows)
  std::vector<int32_t> slash_offsets;   ///< (rows x capacity), ascending and unique per row
};

class KeptSet {
 public:
  /// No rows over no tokens (the value of a problem whose pattern is not given as kept sets).
  KeptSet() = default;

  /// Takes `rows` as they are. Preconditions, checked (InputError naming the row, the list, the
  /// entry and its value): 1 <= seq_len_tokens < 2^31; every list strictly ascending (sorted,
  /// unique) with every entry in [0, seq_len_tokens).
  KeptSet(int64_t seq_len_tokens, std::vector<KeptRow> rows);

  /// Sorts and deduplicates each list of `rows` (any order, duplicates allowed, e.g. a trace's
  /// recall selection), then checks as the constructor does.
  static KeptSet normalized(int64_t seq_len_tokens, std::vector<KeptRow> rows);

  /// `rows` rows that keep every slash offset 0 .. N-1 and no vertical: every causal pair.
  /// Throws InputError when rows < 0 or N is outside [1, 2^31).
  static KeptSet dense(int32_t rows, int64_t seq_len_tokens);

  /// The set held in a padded layout (e.g. downloaded from the GPU selection): the first
  /// count entries of each row. Throws InputError when the arrays do not match rows x capacity,
  /// a count lies outside [0, capacity], or a row breaks the constructor's preconditions.
  static KeptSet from_padded(const PaddedKeptSet& padded, int64_t seq_len_tokens);

  /// Index rows (batch x query heads).
  int32_t rows() const { return static_cast<int32_t>(rows_.size()); }
  /// N: the sequence length (tokens) the positions and offsets lie in; 0 for a default set.
  int64_t seq_len_tokens() const { return seq_len_tokens_; }
  /// Row `row`, 0 <= row < rows() (unchecked).
  const KeptRow& row(int32_t row) const { return rows_[static_cast<size_t>(row)]; }
  /// Entries per row of the padded layout: the longest vertical or slash list, at least 1.
  int32_t capacity() const;
  /// The padded layout (-1 pads), as the GPU index build takes it. The only conversion.
  PaddedKeptSet padded() const;

  friend bool operator==(const KeptSet&, const KeptSet&) = default;

 private:
  int64_t seq_len_tokens_ = 0;
  std::vector<KeptRow> rows_;
};

}  // namespace sparsering
