#include "sim/work/kept_pattern.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>

#include "common/error.hpp"

namespace sparsering {

namespace {

void sort_unique_checked(std::vector<int64_t>& values, int64_t seq_len_tokens, const char* what) {
  bool ascending = true;  // strictly: already sorted and unique (normalized patterns are)
  for (size_t k = 0; k < values.size(); ++k) {
    const int64_t v = values[k];
    require(v >= 0 && v < seq_len_tokens, what, " ", v, " lies outside [0, ", seq_len_tokens, ") tokens");
    ascending = ascending && (k == 0 || values[k - 1] < v);
  }
  if (ascending) return;
  // A bitmap over the sequence sorts and deduplicates in O(N/64 + values) when that beats a
  // comparison sort (kept sets of thousands on sequences of up to a few million tokens).
  const auto n = static_cast<size_t>(values.size());
  const auto words = static_cast<size_t>((seq_len_tokens + 63) / 64);
  if (n < 64 || words > 16 * n) {
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    return;
  }
  std::vector<uint64_t> bits(words, 0);
  for (const int64_t v : values) bits[static_cast<size_t>(v >> 6)] |= uint64_t{1} << (v & 63);
  values.clear();
  for (size_t w = 0; w < words; ++w) {
    uint64_t word = bits[w];
    while (word != 0) {
      values.push_back(static_cast<int64_t>(w * 64) + std::countr_zero(word));
      word &= word - 1;
    }
  }
}

}  // namespace

KeptPattern normalize_pattern(const KeptPattern& pattern, int64_t seq_len_tokens) {
  require(seq_len_tokens > 0, "sequence length must be > 0 tokens, got ", seq_len_tokens);
  KeptPattern out = pattern;
  // Offset 0 first: an ascending list stays ascending (and is not sorted again).
  if (out.slash_offsets.empty() || out.slash_offsets.front() != 0) out.slash_offsets.insert(out.slash_offsets.begin(), 0);
  sort_unique_checked(out.slash_offsets, seq_len_tokens, "slash offset");
  sort_unique_checked(out.vertical_positions, seq_len_tokens, "vertical position");
  return out;
}

KeptPattern pattern_from_slots(std::span<const int32_t> slash_offsets, std::span<const int32_t> vertical_positions) {
  KeptPattern out;
  for (const int32_t v : slash_offsets) {
    if (v >= 0) out.slash_offsets.push_back(v);
  }
  for (const int32_t v : vertical_positions) {
    if (v >= 0) out.vertical_positions.push_back(v);
  }
  return out;
}

}  // namespace sparsering
