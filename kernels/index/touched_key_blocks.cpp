#include "kernels/index/touched_key_blocks.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace sparsering {

namespace {

// Appends the key blocks holding local keys [local_begin, local_end) (non-empty).
void push_blocks(std::vector<KeyBlockRange>& ranges, int64_t local_begin, int64_t local_end, int64_t block_k) {
  ranges.push_back({static_cast<int32_t>(local_begin / block_k), static_cast<int32_t>((local_end - 1) / block_k)});
}

}  // namespace

void touched_key_blocks(const StepGeometry& geometry, const PreparedRowPattern& row, int32_t q_block,
                        std::vector<KeyBlockRange>& ranges) {
  ranges.clear();
  const std::vector<OffsetInterval>& slashes = row.slash_intervals;
  if (slashes.empty()) return;
  const std::span<const GlobalRun> keys = geometry.key_runs();
  const int64_t block_k = geometry.block_k();
  const int64_t key_first = geometry.key_global_first();
  const int64_t key_last = geometry.key_global_last();
  const int64_t widest_offset = slashes.back().hi;
  for (const GlobalRun& run : geometry.query_runs(q_block)) {
    // Slash intervals that can reach the chunk's global span [key_first, key_last]:
    // d_hi >= r_lo - key_last (else every key reached is later than the chunk) and
    // d_lo <= r_hi - key_first (else every key reached is earlier).
    const auto d_begin = std::lower_bound(slashes.begin(), slashes.end(), run.lo - key_last,
                                          [](const OffsetInterval& d, int64_t bound) { return d.hi < bound; });
    const auto d_end = std::upper_bound(d_begin, slashes.end(), run.hi - key_first,
                                        [](int64_t bound, const OffsetInterval& d) { return bound < d.lo; });
    // Key runs that some kept offset can reach: k_hi >= r_lo - widest offset and k_lo <= r_hi.
    const auto k_begin = std::lower_bound(keys.begin(), keys.end(), run.lo - widest_offset,
                                          [](const GlobalRun& k, int64_t bound) { return k.hi < bound; });
    const auto k_end = std::upper_bound(k_begin, keys.end(), run.hi,
                                        [](int64_t bound, const GlobalRun& k) { return bound < k.lo; });
    if (d_end - d_begin <= k_end - k_begin) {
      // Few intervals (contiguous, zigzag, clustered patterns): map each interval's reach
      // [r_lo - d_hi, r_hi - d_lo] to the local range of the keys inside it.
      for (auto d = d_begin; d != d_end; ++d) {
        const int64_t local_begin = geometry.keys_below(run.lo - d->hi);
        const int64_t local_end = geometry.keys_below(run.hi - d->lo + 1);
        if (local_begin < local_end) push_blocks(ranges, local_begin, local_end, block_k);
      }
    } else {
      // Few key runs (striped with many scattered offsets, most of which fall between this
      // chunk's stripes): for each key run, only the intervals meeting [r_lo - k_hi, r_hi - k_lo].
      for (auto k = k_begin; k != k_end; ++k) {
        auto d = std::lower_bound(slashes.begin(), slashes.end(), run.lo - k->hi,
                                  [](const OffsetInterval& interval, int64_t bound) { return interval.hi < bound; });
        for (; d != slashes.end() && d->lo <= run.hi - k->lo; ++d) {
          const int64_t global_begin = std::max(run.lo - d->hi, k->lo);
          const int64_t global_end = std::min(run.hi - d->lo, k->hi);  // inclusive, >= global_begin
          push_blocks(ranges, k->local_lo + (global_begin - k->lo), k->local_lo + (global_end - k->lo) + 1, block_k);
        }
      }
    }
  }
  if (ranges.size() <= 1) return;
  std::sort(ranges.begin(), ranges.end(),
            [](const KeyBlockRange& a, const KeyBlockRange& b) { return a.first < b.first; });
  size_t kept = 0;
  for (size_t n = 1; n < ranges.size(); ++n) {
    if (ranges[n].first <= ranges[kept].last + 1) {
      ranges[kept].last = std::max(ranges[kept].last, ranges[n].last);
    } else {
      ranges[++kept] = ranges[n];
    }
  }
  ranges.resize(kept + 1);
}

void held_vertical_keys(const StepGeometry& geometry, const PreparedRowPattern& row, std::vector<int32_t>& locals) {
  locals.clear();
  const int32_t kv_rank = geometry.geometry().position.kv_rank;
  const int64_t seq_len = geometry.layout().seq_len_tokens();
  for (const int64_t key : row.vertical_tokens) {
    require(key >= 0 && key < seq_len, "vertical key ", key, " is outside [0, ", seq_len,
            ") (was the row prepared for another sequence length?)");
    const TokenOwner owner = geometry.layout().owner(key);
    // Ascending global order is ascending local order within one rank.
    if (owner.ring_rank == kv_rank) locals.push_back(static_cast<int32_t>(owner.local_index));
  }
}

}  // namespace sparsering
