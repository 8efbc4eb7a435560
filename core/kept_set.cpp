// The kept set of a layer (see kept_set.hpp). Tested in tests/core/kept_set_test.cpp.
#include "core/kept_set.hpp"

#include <algorithm>
#include <limits>
#include <utility>

#include "common/error.hpp"

namespace sparsering {
namespace {

// The GPU index build and its padded arrays hold positions as int32, so N itself must fit.
void check_seq_len(int64_t seq_len_tokens) {
  require(seq_len_tokens >= 1 && seq_len_tokens <= std::numeric_limits<int32_t>::max(),
          "kept set: sequence length ", seq_len_tokens, " tokens is outside [1, 2^31)");
}

void check_list(const std::vector<int32_t>& list, int64_t seq_len_tokens, size_t row, const char* name) {
  for (size_t i = 0; i < list.size(); ++i) {
    const int32_t v = list[i];
    require(v >= 0 && v < seq_len_tokens, "kept set row ", row, ": ", name, "[", i, "] = ", v, " is not in [0, ",
            seq_len_tokens, ")");
    require(i == 0 || list[i - 1] < v, "kept set row ", row, ": ", name, " is not ascending and unique at entry ", i,
            " (", list[i - 1], " then ", v, ")");
  }
}

void sort_unique(std::vector<int32_t>& list) {
  std::sort(list.begin(), list.end());
  list.erase(std::unique(list.begin(), list.end()), list.end());
}

}  // namespace

KeptSet::KeptSet(int64_t seq_len_tokens, std::vector<KeptRow> rows)
    : seq_len_tokens_(seq_len_tokens), rows_(std::move(rows)) {
  check_seq_len(seq_len_tokens);
  require(rows_.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()), "kept set: ", rows_.size(),
          " rows do not fit 32 bits");
  for (size_t r = 0; r < rows_.size(); ++r) {
    check_list(rows_[r].vertical_keys, seq_len_tokens, r, "vertical_keys");
    check_list(rows_[r].slash_offsets, seq_len_tokens, r, "slash_offsets");
  }
}

KeptSet KeptSet::normalized(int64_t seq_len_tokens, std::vector<KeptRow> rows) {
  for (KeptRow& row : rows) {
    sort_unique(row.vertical_keys);
    sort_unique(row.slash_offsets);
  }
  return KeptSet(seq_len_tokens, std::move(rows));
}

KeptSet KeptSet::dense(int32_t rows, int64_t seq_len_tokens) {
  require(rows >= 0, "kept set: rows must be >= 0, got ", rows);
  check_seq_len(seq_len_tokens);
  KeptRow all;
  all.slash_offsets.resize(static_cast<size_t>(seq_len_tokens));
  for (size_t d = 0; d < all.slash_offsets.size(); ++d) all.slash_offsets[d] = static_cast<int32_t>(d);
  return KeptSet(seq_len_tokens, std::vector<KeptRow>(static_cast<size_t>(rows), all));
}

KeptSet KeptSet::from_padded(const PaddedKeptSet& padded, int64_t seq_len_tokens) {
  require(padded.rows >= 0 && padded.capacity >= 1, "padded kept set: rows ", padded.rows, " and capacity ",
          padded.capacity, " must be >= 0 and >= 1");
  const auto rows = static_cast<size_t>(padded.rows);
  const auto capacity = static_cast<size_t>(padded.capacity);
  require(padded.vertical_count.size() == rows && padded.slash_count.size() == rows &&
              padded.vertical_keys.size() == rows * capacity && padded.slash_offsets.size() == rows * capacity,
          "padded kept set: arrays of ", padded.vertical_count.size(), ", ", padded.vertical_keys.size(), ", ",
          padded.slash_count.size(), " and ", padded.slash_offsets.size(), " entries do not match ", rows, " rows x ",
          capacity);
  std::vector<KeptRow> out(rows);
  for (size_t r = 0; r < rows; ++r) {
    const int32_t vc = padded.vertical_count[r];
    const int32_t sc = padded.slash_count[r];
    require(vc >= 0 && vc <= padded.capacity && sc >= 0 && sc <= padded.capacity, "padded kept set row ", r,
            ": counts ", vc, " and ", sc, " are not in [0, ", padded.capacity, "]");
    const auto v = padded.vertical_keys.begin() + static_cast<std::ptrdiff_t>(r * capacity);
    const auto s = padded.slash_offsets.begin() + static_cast<std::ptrdiff_t>(r * capacity);
    out[r].vertical_keys.assign(v, v + vc);
    out[r].slash_offsets.assign(s, s + sc);
  }
  return KeptSet(seq_len_tokens, std::move(out));
}

int32_t KeptSet::capacity() const {
  size_t capacity = 1;
  for (const KeptRow& row : rows_) capacity = std::max({capacity, row.vertical_keys.size(), row.slash_offsets.size()});
  // Lists are unique and lie in [0, N) with N < 2^31, so the longest fits int32.
  return static_cast<int32_t>(capacity);
}

PaddedKeptSet KeptSet::padded() const {
  PaddedKeptSet out;
  out.rows = rows();
  out.capacity = capacity();
  const auto rows = rows_.size();
  const auto capacity = static_cast<size_t>(out.capacity);
  out.vertical_count.resize(rows);
  out.slash_count.resize(rows);
  out.vertical_keys.assign(rows * capacity, -1);
  out.slash_offsets.assign(rows * capacity, -1);
  for (size_t r = 0; r < rows; ++r) {
    const KeptRow& row = rows_[r];
    out.vertical_count[r] = static_cast<int32_t>(row.vertical_keys.size());
    out.slash_count[r] = static_cast<int32_t>(row.slash_offsets.size());
    std::copy(row.vertical_keys.begin(), row.vertical_keys.end(),
              out.vertical_keys.begin() + static_cast<std::ptrdiff_t>(r * capacity));
    std::copy(row.slash_offsets.begin(), row.slash_offsets.end(),
              out.slash_offsets.begin() + static_cast<std::ptrdiff_t>(r * capacity));
  }
  return out;
}

}  // namespace sparsering
