// Where synthetic candidates sit (docs/algorithm.md section 2): vertical candidates are attention sinks
// plus heavy content keys (many at document starts of the packed sample, shared by the heads of a
// KV group); slash candidates are a local window at offsets 0..w-1 plus clusters of distant
// diagonals (RoPE's preferred offsets, periodic for some heads), ordered by a structural score
// that the mass profile then follows. Tested in tests/traces/candidate_positions_test.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "traces/synth/prng.hpp"

namespace sparsering::synth {

/// `count` distinct integers of [lo, hi) that are not in `excluded_sorted` (ascending), in random
/// order. Preconditions: lo <= hi, and [lo, hi) minus the excluded values holds >= count values.
std::vector<int32_t> sample_distinct(SplitMix64& rng, int64_t lo, int64_t hi, int64_t count,
                                     std::span<const int32_t> excluded_sorted);

/// Start tokens of the documents packed into one sample of `seq_len` tokens: 0, then cumulative
/// document lengths drawn log-uniformly in [min_doc_tokens, max_doc_tokens].
std::vector<int64_t> document_starts(SplitMix64& rng, int64_t seq_len, int64_t min_doc_tokens, int64_t max_doc_tokens);

/// Heavy content keys shared by the heads of one KV group: `size` distinct positions in
/// [1, seq_len), ordered heaviest first. Tokens at document starts (and the two after each) lead
/// the order; the rest are spread uniformly. Precondition: 1 <= size <= seq_len - 1.
std::vector<int32_t> heavy_key_pool(SplitMix64& rng, int64_t seq_len, int64_t size,
                                    std::span<const int64_t> doc_starts);

/// One head's view of its group's pool: positions below `first_allowed` (the head's sinks) are
/// dropped; walking the pool in order, each position is taken, or with probability `skip` set
/// aside and appended after the walk; then neighbours swap with probability 1/4. The first
/// `count` are returned. So the heads of a group share most heavy keys in a similar order.
/// Precondition: the pool holds >= count positions >= first_allowed.
std::vector<int32_t> head_heavy_keys(SplitMix64& rng, std::span<const int32_t> pool, int64_t first_allowed,
                                     int64_t count, double skip);

/// A band of distant diagonals: offsets [center - width/2, center - width/2 + width).
struct DiagonalCluster {
  int64_t center = 0;   ///< offset q - k of the band's middle (tokens)
  int64_t width = 1;    ///< diagonals in the band, >= 1
  double weight = 0.0;  ///< structural score of the band's middle diagonal, > 0
};

/// The `count` strongest slash offsets of a head, strongest first: offset 0, the local window
/// 0..window-1 (score 1 / (1 + d / tau), tau = window / 4), then bands from `next_cluster` in the
/// order it yields them (score weight * (1 - |d - center| / (width + 2))), clipped to
/// [window, seq_len). Offsets are distinct. When the bands stop adding offsets (the range is
/// full), the remaining offsets of [window, seq_len) are added in increasing order.
/// Preconditions: 1 <= window <= count <= seq_len.
std::vector<int32_t> slash_core(int64_t seq_len, int64_t window, int64_t count,
                                const std::function<DiagonalCluster()>& next_cluster);

}  // namespace sparsering::synth
