// What a trace means at a recall target: kept verticals and slashes per head and layer, their
// distribution, and how much of causal attention the sparse kernel computes (density) per head,
// per layer and overall. Printed by `sparsering trace info` (traces/trace_summary_report.hpp).
//
// Densities are computed pairs / causal pairs of one unsplit causal sequence of N tokens
// (N (N + 1) / 2 causal pairs), per (sample, layer, head), both exact:
//  - element density: the pairs (q, k), k <= q, with q - k a kept slash offset (offset 0 always
//    counts: every query sees itself) or k a kept vertical key. A slash at offset d covers N - d
//    pairs, a vertical at k covers N - k, and a (vertical k, slash d) couple shares exactly one
//    pair when k + d < N, so the union is counted exactly by inclusion-exclusion.
//  - tile density: the pairs the kernel computes (kernels/sparse_index.hpp) with square
//    block_tokens x block_tokens tiles: every causal pair of each tile that a kept offset touches
//    (some pair of the tile has q - k == d; offset 0's diagonal tiles always), plus each kept
//    vertical's pairs in query blocks where no such tile covers its column. Partial last blocks
//    are handled exactly. This is the figure that sets kernel time; sparsity = 1 - density.
// Layer and overall densities sum computed pairs and causal pairs over their heads and samples.
// Tested in tests/traces/trace_summary_test.cpp against brute-force pair enumeration.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "traces/recall.hpp"
#include "traces/trace.hpp"

namespace sparsering {

struct SummarySettings {
  RecallSettings recall;
  int64_t block_tokens = 64;  ///< kernel tile size for the tile density (tokens), >= 1
};

/// Computed pairs of one head's kept sets over a causal sequence of `seq_len` tokens.
struct HeadPairs {
  double element_pairs = 0.0;  ///< exact union of slash and vertical pairs
  double tile_pairs = 0.0;     ///< pairs the tiled kernel computes
  double causal_pairs = 0.0;   ///< seq_len (seq_len + 1) / 2
};

/// Pair counts for kept `vertical_keys` (in [0, seq_len)) and `slash_offsets` (in [0, seq_len)),
/// in any order, repeats ignored. Preconditions: seq_len >= 1, block_tokens >= 1.
HeadPairs head_pairs(std::span<const int32_t> vertical_keys, std::span<const int32_t> slash_offsets, int64_t seq_len,
                     int64_t block_tokens);

/// min, median, 90th percentile (nearest rank), max and mean of a set of values.
struct Distribution {
  double min = 0.0, p50 = 0.0, p90 = 0.0, max = 0.0, mean = 0.0;
};

/// Distribution of `values` (all zeros when empty).
Distribution distribution_of(std::vector<double> values);

struct HeadSummary {
  int64_t layer = 0;
  int64_t head = 0;
  double kept_verticals = 0.0;   ///< mean over samples
  double kept_slashes = 0.0;     ///< mean over samples
  double element_density = 0.0;  ///< over samples: sum of computed / sum of causal pairs
  double tile_density = 0.0;
};

struct LayerSummary {
  int64_t layer = 0;
  double kept_verticals = 0.0;  ///< mean over heads and samples
  double kept_slashes = 0.0;
  double element_density = 0.0;
  double tile_density = 0.0;
};

struct TraceSummary {
  TraceMetadata metadata;
  int64_t samples = 0, layers = 0, heads = 0;
  int64_t vertical_candidates = 0, slash_candidates = 0;
  std::vector<int64_t> sample_seq_len;
  SummarySettings settings;
  std::vector<LayerSummary> layer_summaries;  ///< (L)
  std::vector<HeadSummary> head_summaries;    ///< (L, H) row-major
  Distribution kept_verticals;                ///< over every (sample, layer, head)
  Distribution kept_slashes;
  Distribution head_tile_density;     ///< over every (sample, layer, head)
  int64_t heads_at_vertical_cap = 0;  ///< (sample, layer, head)s whose kept verticals hit max_verticals
  int64_t heads_at_slash_cap = 0;
  double element_density = 0.0;  ///< whole trace
  double tile_density = 0.0;
};

/// Summarizes a validated trace. Throws InputError on bad settings (recall, caps, block size).
TraceSummary summarize_trace(const Trace& trace, const SummarySettings& settings);

}  // namespace sparsering
