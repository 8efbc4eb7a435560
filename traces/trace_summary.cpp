// Trace summary (definitions in trace_summary.hpp). The tile count works on block diagonals:
// with square tiles, tile (i, j) holds offsets (i - j) B - B + 1 .. (i - j) B + B - 1, so offset d
// touches the block diagonals floor(d / B) and ceil(d / B) in every full row of blocks; only the
// last, possibly partial, row of blocks needs its own test.
#include "traces/trace_summary.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"

namespace sparsering {
namespace {

std::vector<int64_t> sorted_unique(std::span<const int32_t> values) {
  std::vector<int64_t> out(values.begin(), values.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

HeadPairs head_pairs(std::span<const int32_t> vertical_keys, std::span<const int32_t> slash_offsets, int64_t seq_len,
                     int64_t block_tokens) {
  const int64_t n = seq_len;
  const int64_t b = block_tokens;
  std::vector<int64_t> offsets = sorted_unique(slash_offsets);
  if (offsets.empty() || offsets.front() != 0) offsets.insert(offsets.begin(), 0);
  const std::vector<int64_t> keys = sorted_unique(vertical_keys);
  HeadPairs pairs;
  pairs.causal_pairs = static_cast<double>(n) * static_cast<double>(n + 1) / 2.0;

  // Element level: inclusion-exclusion over (vertical, slash) couples.
  int64_t element = 0;
  for (const int64_t d : offsets) element += n - d;
  for (const int64_t k : keys) {
    element += n - k;
    // Offsets d with k + d < n: each shares the pair (k + d, k) with the vertical.
    element -= std::lower_bound(offsets.begin(), offsets.end(), n - k) - offsets.begin();
  }
  pairs.element_pairs = static_cast<double>(element);

  // Tile level.
  const int64_t blocks = (n + b - 1) / b;
  const int64_t last_rows = n - (blocks - 1) * b;  // rows (and keys) of the last block, 1..b
  // Block diagonals touched in full rows of blocks (rows 0..blocks-2), ascending, without 0.
  std::vector<int64_t> full;
  // Block diagonals touched in the last row: delta >= 1 with delta*b - b + 1 <= d <= delta*b + last_rows - 1.
  std::vector<int64_t> last;
  for (const int64_t d : offsets) {
    const int64_t lo = d / b, hi = (d + b - 1) / b;
    for (const int64_t delta : {lo, hi}) {
      if (delta >= 1 && delta <= blocks - 1) {
        full.push_back(delta);
        if (d >= delta * b - b + 1 && d <= delta * b + last_rows - 1) last.push_back(delta);
      }
    }
  }
  std::sort(full.begin(), full.end());
  full.erase(std::unique(full.begin(), full.end()), full.end());
  std::sort(last.begin(), last.end());
  last.erase(std::unique(last.begin(), last.end()), last.end());

  int64_t tile = (blocks - 1) * (b * (b + 1) / 2) + last_rows * (last_rows + 1) / 2;  // diagonal tiles
  for (const int64_t delta : full) tile += (blocks - 1 - delta) * b * b;              // full rows delta..blocks-2
  tile += static_cast<int64_t>(last.size()) * last_rows * b;                          // last row, one tile each
  for (const int64_t k : keys) {
    const int64_t kb = k / b;
    if (kb >= blocks - 1) continue;  // only the last row sees it, through its diagonal tile
    // Full rows kb+1..blocks-2 whose tile at delta = row - kb is not touched.
    const int64_t span = blocks - 2 - kb;
    const auto covered = std::upper_bound(full.begin(), full.end(), span) - full.begin();
    tile += (span - covered) * b;
    if (!std::binary_search(last.begin(), last.end(), blocks - 1 - kb)) tile += last_rows;
  }
  pairs.tile_pairs = static_cast<double>(tile);
  return pairs;
}

Distribution distribution_of(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  auto rank = [&](double p) {
    const auto r = static_cast<size_t>(std::ceil(p * static_cast<double>(values.size())));
    return values[std::clamp<size_t>(r, 1, values.size()) - 1];
  };
  d.min = values.front();
  d.max = values.back();
  d.p50 = rank(0.5);
  d.p90 = rank(0.9);
  double sum = 0.0;
  for (const double v : values) sum += v;
  d.mean = sum / static_cast<double>(values.size());
  return d;
}

TraceSummary summarize_trace(const Trace& trace, const SummarySettings& settings) {
  validate_recall_settings(settings.recall);
  require(settings.block_tokens >= 1 && settings.block_tokens <= (1 << 20),
          "block size must be in [1, 2^20] tokens, got ", settings.block_tokens);
  TraceSummary summary;
  summary.metadata = trace.metadata;
  summary.samples = trace.samples;
  summary.layers = trace.layers;
  summary.heads = trace.heads;
  summary.vertical_candidates = trace.vertical_candidates;
  summary.slash_candidates = trace.slash_candidates;
  summary.sample_seq_len = trace.sample_seq_len;
  summary.settings = settings;

  std::vector<double> kept_v, kept_s, head_density;
  double total_element = 0.0, total_tile = 0.0, total_causal = 0.0;
  for (int64_t l = 0; l < trace.layers; ++l) {
    LayerSummary layer;
    layer.layer = l;
    double layer_element = 0.0, layer_tile = 0.0, layer_causal = 0.0;
    for (int64_t h = 0; h < trace.heads; ++h) {
      HeadSummary head;
      head.layer = l;
      head.head = h;
      double element = 0.0, tile = 0.0, causal = 0.0;
      for (int64_t s = 0; s < trace.samples; ++s) {
        const HeadSelection kept = select_head(trace, s, l, h, settings.recall);
        const auto nv = static_cast<double>(kept.vertical_keys.size());
        const auto ns = static_cast<double>(kept.slash_offsets.size());
        head.kept_verticals += nv;
        head.kept_slashes += ns;
        kept_v.push_back(nv);
        kept_s.push_back(ns);
        summary.heads_at_vertical_cap +=
            settings.recall.max_verticals > 0 &&
            static_cast<int64_t>(kept.vertical_keys.size()) == settings.recall.max_verticals;
        summary.heads_at_slash_cap += settings.recall.max_slashes > 0 &&
                                      static_cast<int64_t>(kept.slash_offsets.size()) == settings.recall.max_slashes;
        const HeadPairs pairs = head_pairs(kept.vertical_keys, kept.slash_offsets,
                                           trace.sample_seq_len[static_cast<size_t>(s)], settings.block_tokens);
        element += pairs.element_pairs;
        tile += pairs.tile_pairs;
        causal += pairs.causal_pairs;
        head_density.push_back(pairs.tile_pairs / pairs.causal_pairs);
      }
      const auto samples = static_cast<double>(trace.samples);
      head.kept_verticals /= samples;
      head.kept_slashes /= samples;
      head.element_density = element / causal;
      head.tile_density = tile / causal;
      layer.kept_verticals += head.kept_verticals;
      layer.kept_slashes += head.kept_slashes;
      layer_element += element;
      layer_tile += tile;
      layer_causal += causal;
      summary.head_summaries.push_back(head);
    }
    layer.kept_verticals /= static_cast<double>(trace.heads);
    layer.kept_slashes /= static_cast<double>(trace.heads);
    layer.element_density = layer_element / layer_causal;
    layer.tile_density = layer_tile / layer_causal;
    total_element += layer_element;
    total_tile += layer_tile;
    total_causal += layer_causal;
    summary.layer_summaries.push_back(layer);
  }
  summary.kept_verticals = distribution_of(std::move(kept_v));
  summary.kept_slashes = distribution_of(std::move(kept_s));
  summary.head_tile_density = distribution_of(std::move(head_density));
  summary.element_density = total_element / total_causal;
  summary.tile_density = total_tile / total_causal;
  return summary;
}

}  // namespace sparsering
