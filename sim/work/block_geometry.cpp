#include "sim/work/block_geometry.hpp"

#include <algorithm>
#include <numeric>

#include "common/error.hpp"

namespace sparsering {

int64_t local_run_end(const TokenLayout& layout, int64_t local) {
  const int64_t len = layout.local_len();
  switch (layout.kind()) {
    case LayoutKind::zigzag: {
      const int64_t half = len / 2;
      return local < half ? half : len;
    }
    case LayoutKind::striped:
      // With one rank every stripe follows the previous one: the whole sequence is one run.
      return layout.ranks() == 1 ? len : std::min(len, (local / layout.granularity_tokens() + 1) * layout.granularity_tokens());
    case LayoutKind::contiguous:
    default:
      return len;
  }
}

int64_t first_local_at_or_after(const TokenLayout& layout, int32_t ring_rank, int64_t global) {
  const int64_t len = layout.local_len();
  if (global <= layout.global_token(ring_rank, 0)) return 0;
  if (global > layout.global_token(ring_rank, len - 1)) return len;
  switch (layout.kind()) {
    case LayoutKind::zigzag: {
      const int64_t half = len / 2;
      const int64_t front_end = layout.global_token(ring_rank, half - 1);  // last global of the front half
      const int64_t back_begin = layout.global_token(ring_rank, half);
      if (global <= front_end) return global - layout.global_token(ring_rank, 0);
      if (global <= back_begin) return half;
      return half + (global - back_begin);
    }
    case LayoutKind::striped: {
      const int64_t g = layout.granularity_tokens();
      const int64_t stripe = global / g;
      const int64_t owner = stripe % layout.ranks();
      if (owner == ring_rank) return (stripe / layout.ranks()) * g + global % g;
      const int64_t next = stripe + ((ring_rank - owner) % layout.ranks() + layout.ranks()) % layout.ranks();
      return std::min(len, (next / layout.ranks()) * g);
    }
    case LayoutKind::contiguous:
    default:
      return global - layout.global_token(ring_rank, 0);
  }
}

void append_global_runs(const TokenLayout& layout, int32_t ring_rank, int64_t local_begin, int64_t local_end,
                        std::vector<Interval>& out) {
  int64_t l = local_begin;
  while (l < local_end) {
    const int64_t end = std::min(local_end, local_run_end(layout, l));
    const int64_t g = layout.global_token(ring_rank, l);
    out.push_back(Interval{g, g + (end - l) - 1});
    l = end;
  }
}

namespace {

/// Regular blocks of size `block` inside each segment, grouped into classes.
void build_classes(const BlockGeometry& geo, int64_t block, int64_t period, int64_t blocks_total,
                   std::vector<BlockClass>& classes, std::vector<int32_t>& block_class, std::vector<int64_t>& irregular) {
  block_class.assign(static_cast<size_t>(blocks_total), -1);
  const int64_t per_period = period / block;
  for (size_t s = 0; s < geo.segments.size(); ++s) {
    const int64_t first = ceil_div(geo.segments[s].local_begin, block);
    const int64_t last = geo.segments[s].local_end / block - 1;  // last full block inside
    if (last < first) continue;
    const int64_t regular = last - first + 1;
    const int64_t count = std::min(per_period, regular);
    for (int64_t c = 0; c < count; ++c) {
      BlockClass cls{static_cast<int32_t>(s), first + c, per_period, (last - (first + c)) / per_period + 1};
      const auto index = static_cast<int32_t>(classes.size());
      for (int64_t m = 0; m < cls.members; ++m) block_class[static_cast<size_t>(cls.first_block + m * per_period)] = index;
      classes.push_back(cls);
    }
  }
  for (int64_t i = 0; i < blocks_total; ++i) {
    if (block_class[static_cast<size_t>(i)] < 0) irregular.push_back(i);
  }
}

/// Global runs of block `index` (size `block`) of rank 0, relative to the start of `segment`.
std::vector<Interval> relative_runs(const BlockGeometry& geo, int64_t block, int64_t index, int32_t segment) {
  std::vector<Interval> runs;
  const int64_t begin = index * block;
  append_global_runs(geo.layout, 0, begin, std::min(begin + block, geo.layout.local_len()), runs);
  const int64_t base = geo.segment_start_global(0, segment);
  for (Interval& run : runs) {
    run.lo -= base;
    run.hi -= base;
  }
  return runs;
}

std::vector<DifferenceItem> difference_items(const std::vector<Interval>& q_runs, const std::vector<Interval>& k_runs,
                                             int64_t period_shift) {
  std::vector<Interval> diffs;
  diffs.reserve(q_runs.size() * k_runs.size());
  for (const Interval& q : q_runs) {
    for (const Interval& k : k_runs) diffs.push_back(Interval{q.lo - k.hi, q.hi - k.lo});
  }
  std::sort(diffs.begin(), diffs.end(), [](const Interval& a, const Interval& b) { return a.lo < b.lo; });
  RunSet merged;
  for (const Interval& d : diffs) merged.append(d.lo, d.hi);
  const std::vector<Interval>& runs = merged.runs();
  // Equal widths at a constant spacing that divides the class period: one progression item
  // (striped layouts whose stripes are finer than the blocks).
  if (runs.size() >= 2) {
    const int64_t width = runs[0].hi - runs[0].lo;
    const int64_t stride = runs[1].lo - runs[0].lo;
    bool progression = period_shift % stride == 0;
    for (size_t k = 1; progression && k < runs.size(); ++k) {
      progression = runs[k].hi - runs[k].lo == width && runs[k].lo - runs[k - 1].lo == stride;
    }
    if (progression) {
      return {DifferenceItem{runs[0].lo, runs[0].hi, stride, 0, static_cast<int64_t>(runs.size()) - 1}};
    }
  }
  std::vector<DifferenceItem> items;
  items.reserve(runs.size());
  for (const Interval& run : runs) items.push_back(DifferenceItem{run.lo, run.hi, 0, 0, 0});
  return items;
}

/// The pair of a query block (global runs `q_runs`, relative to the start of its segment) with every
/// key of segment `segment` of the K/V chunk (relative to the start of that segment).
ClassPair chunk_pair(const BlockGeometry& geo, int32_t q_class, const std::vector<Interval>& q_runs, int32_t segment) {
  ClassPair pair;
  pair.q_class = q_class;
  pair.k_class = -1;
  pair.q_segment = geo.q_classes[static_cast<size_t>(q_class)].segment;
  pair.k_segment = segment;
  const TokenLayout& layout = geo.layout;
  if (layout.kind() != LayoutKind::striped || layout.ranks() == 1) {
    // The segment's keys are one run of consecutive positions.
    std::vector<Interval> k_runs;
    const LayoutSegment& seg = geo.segments[static_cast<size_t>(segment)];
    append_global_runs(layout, 0, seg.local_begin, seg.local_end, k_runs);
    const int64_t base = geo.segment_start_global(0, segment);
    for (Interval& run : k_runs) {
      run.lo -= base;
      run.hi -= base;
    }
    pair.items = difference_items(q_runs, k_runs, geo.period_shift);
    pair.min_difference = q_runs.front().lo - k_runs.back().hi;
    pair.max_difference = q_runs.back().hi - k_runs.front().lo;
    return pair;
  }
  // Striped: the keys are T stripes [t P, t P + G - 1] (P = W G), never enumerated. Query run
  // [a, b] against stripe t gives [a - (G - 1) - (T - 1) P, b - (T - 1) P] + u P with
  // u = T - 1 - t; runs of equal width P apart (stripes finer than the block) extend u instead.
  const int64_t g = layout.granularity_tokens();
  const int64_t p = g * layout.ranks();
  const int64_t t = layout.local_len() / g;
  bool progression = q_runs.size() > 1;
  for (size_t k = 1; progression && k < q_runs.size(); ++k) {
    progression = q_runs[k].hi - q_runs[k].lo == q_runs[0].hi - q_runs[0].lo && q_runs[k].lo - q_runs[k - 1].lo == p;
  }
  const size_t items = progression ? 1 : q_runs.size();
  for (size_t k = 0; k < items; ++k) {
    const int64_t extra = progression ? static_cast<int64_t>(q_runs.size()) - 1 : 0;
    const int64_t m_hi = t - 1 + extra;
    pair.items.push_back(DifferenceItem{q_runs[k].lo - (g - 1) - (t - 1) * p, q_runs[k].hi - (t - 1) * p,
                                        m_hi > 0 ? p : 0, 0, m_hi});
  }
  pair.min_difference = q_runs.front().lo - ((t - 1) * p + g - 1);
  pair.max_difference = q_runs.back().hi;
  return pair;
}

}  // namespace

BlockGeometry make_block_geometry(const TokenLayout& layout, int64_t block_q, int64_t block_k) {
  require(block_q >= 1, "block_q must be >= 1 token, got ", block_q);
  require(block_k >= 1, "block_k must be >= 1 token, got ", block_k);
  BlockGeometry geo;
  geo.layout = layout;
  geo.block_q = block_q;
  geo.block_k = block_k;
  const int64_t len = layout.local_len();
  geo.q_blocks = ceil_div(len, block_q);
  geo.k_blocks = ceil_div(len, block_k);
  const int64_t tile_period = std::lcm(block_q, block_k);
  int64_t period = tile_period;
  switch (layout.kind()) {
    case LayoutKind::zigzag:
      geo.segments = {{0, len / 2}, {len / 2, len}};
      geo.period_shift = period;
      break;
    case LayoutKind::striped:
      geo.segments = {{0, len}};
      period = std::lcm(tile_period, layout.granularity_tokens());
      geo.period_shift = period * layout.ranks();
      break;
    case LayoutKind::contiguous:
    default:
      geo.segments = {{0, len}};
      geo.period_shift = period;
      break;
  }
  build_classes(geo, block_q, period, geo.q_blocks, geo.q_classes, geo.q_block_class, geo.irregular_q_blocks);
  build_classes(geo, block_k, period, geo.k_blocks, geo.k_classes, geo.k_block_class, geo.irregular_k_blocks);

  std::vector<std::vector<Interval>> k_runs(geo.k_classes.size());
  for (size_t b = 0; b < geo.k_classes.size(); ++b) {
    k_runs[b] = relative_runs(geo, block_k, geo.k_classes[b].first_block, geo.k_classes[b].segment);
  }
  for (size_t a = 0; a < geo.q_classes.size(); ++a) {
    const std::vector<Interval> q_runs = relative_runs(geo, block_q, geo.q_classes[a].first_block, geo.q_classes[a].segment);
    for (size_t b = 0; b < geo.k_classes.size(); ++b) {
      ClassPair pair;
      pair.q_class = static_cast<int32_t>(a);
      pair.k_class = static_cast<int32_t>(b);
      pair.q_segment = geo.q_classes[a].segment;
      pair.k_segment = geo.k_classes[b].segment;
      pair.items = difference_items(q_runs, k_runs[b], geo.period_shift);
      pair.min_difference = q_runs.front().lo - k_runs[b].back().hi;
      pair.max_difference = q_runs.back().hi - k_runs[b].front().lo;
      geo.pairs.push_back(std::move(pair));
    }
    for (size_t s = 0; s < geo.segments.size(); ++s) {
      geo.chunk_pairs.push_back(chunk_pair(geo, static_cast<int32_t>(a), q_runs, static_cast<int32_t>(s)));
    }
  }
  return geo;
}

}  // namespace sparsering
