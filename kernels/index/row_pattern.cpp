#include "kernels/index/row_pattern.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace sparsering {

PreparedRowPattern prepare_row_pattern(std::span<const int64_t> slash_offsets,
                                       std::span<const int64_t> vertical_tokens, int64_t seq_len_tokens) {
  require(seq_len_tokens > 0, "sequence length must be > 0 tokens, got ", seq_len_tokens);
  std::vector<int64_t> offsets;
  offsets.reserve(slash_offsets.size() + 1);
  offsets.push_back(0);  // every query sees itself (the contract's d == 0)
  for (size_t n = 0; n < slash_offsets.size(); ++n) {
    const int64_t d = slash_offsets[n];
    require(d >= 0 && d < seq_len_tokens, "slash offset #", n, " = ", d, " is outside [0, ", seq_len_tokens,
            ") (offsets are global q - k distances)");
    offsets.push_back(d);
  }
  std::sort(offsets.begin(), offsets.end());

  PreparedRowPattern prepared;
  for (const int64_t d : offsets) {
    if (!prepared.slash_intervals.empty() && d <= prepared.slash_intervals.back().hi + 1) {
      prepared.slash_intervals.back().hi = std::max(prepared.slash_intervals.back().hi, d);
    } else {
      prepared.slash_intervals.push_back({d, d});
    }
  }

  prepared.vertical_tokens.reserve(vertical_tokens.size());
  for (size_t n = 0; n < vertical_tokens.size(); ++n) {
    const int64_t key = vertical_tokens[n];
    require(key >= 0 && key < seq_len_tokens, "vertical key #", n, " = ", key, " is outside [0, ", seq_len_tokens,
            ") (keys are global token positions)");
    prepared.vertical_tokens.push_back(key);
  }
  std::sort(prepared.vertical_tokens.begin(), prepared.vertical_tokens.end());
  prepared.vertical_tokens.erase(std::unique(prepared.vertical_tokens.begin(), prepared.vertical_tokens.end()),
                                 prepared.vertical_tokens.end());
  return prepared;
}

PreparedRowPattern prepare_row_pattern(const RowPattern& pattern, int64_t seq_len_tokens) {
  return prepare_row_pattern(pattern.slash_offsets, pattern.vertical_tokens, seq_len_tokens);
}

std::vector<PreparedRowPattern> prepare_row_patterns(std::span<const RowPattern> rows, int64_t seq_len_tokens) {
  std::vector<PreparedRowPattern> prepared;
  prepared.reserve(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    try {
      prepared.push_back(prepare_row_pattern(rows[r], seq_len_tokens));
    } catch (const InputError& error) {
      throw InputError(str("row ", r, ": ", error.what()));
    }
  }
  return prepared;
}

int64_t kept_slash_offsets(const PreparedRowPattern& row) {
  int64_t count = 0;
  for (const OffsetInterval& interval : row.slash_intervals) count += interval.hi - interval.lo + 1;
  return count;
}

}  // namespace sparsering
