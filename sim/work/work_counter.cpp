#include "sim/work/work_counter.hpp"

#include <algorithm>
#include <bit>
#include <tuple>

#include "common/error.hpp"

namespace sparsering {

namespace {

// Above this many class pairs (odd stripe sizes whose period spans most of a rank), the presence
// sets are recomputed per rank pair instead of cached, so memory stays O(class pairs).
constexpr size_t kMaxMemoizedPairs = 256;

/// Which rank of a kept column's owner sees it from the same query block on (the cases of
/// WorkCounter::KeyBlockColumns): 0 below the owner, 1 the owner, 2 above.
int visibility_case(int32_t q_rank, int32_t kv_rank) { return q_rank < kv_rank ? 0 : (q_rank == kv_rank ? 1 : 2); }

/// The column work of query blocks, summed: a block that sees `columns` kept columns gathers them
/// in ceil(columns / block_k) chunks and ceil(columns / column_item) items of one list (none when
/// it sees none). Covered columns are visible ones, so a block's count is never negative.
struct ColumnTotals {
  int64_t columns = 0;
  int64_t chunks = 0;
  int64_t lists = 0;
  int64_t items = 0;

  /// For block_k = 2^chunk_shift and column_item = 2^item_shift: ceilings by shifts (the sweeps'
  /// inner loops).
  void add_shifted(int64_t block_columns, int chunk_shift, int item_shift) {
    const int64_t c = std::max<int64_t>(block_columns, 0);
    columns += c;
    chunks += (c + (int64_t{1} << chunk_shift) - 1) >> chunk_shift;
    lists += c > 0 ? 1 : 0;
    items += (c + (int64_t{1} << item_shift) - 1) >> item_shift;
  }
  void add(int64_t block_columns, int64_t block_k, int64_t column_item) {
    if (block_columns <= 0) return;
    columns += block_columns;
    chunks += ceil_div(block_columns, block_k);
    lists += 1;
    items += ceil_div(block_columns, column_item);
  }
  void add_to(WorkCounts& counts) const {
    counts.columns += columns;
    counts.column_chunks += chunks;
    counts.column_lists += lists;
    counts.column_items += items;
  }
};

/// The sweeps' inner loop: `members` query blocks, `stride` apart in `visible` from `visible_at`,
/// each seeing visible + the running sum of `diff` (minus the covered columns) columns; zeroes
/// what it reads of `diff`. Shifts as template arguments: a shift by a register costs several
/// micro-operations, and this loop runs once per query block of every rank pair and head.
template <int kChunkShift, int kItemShift>
void sweep_fixed(int64_t* diff, const int32_t* visible_at, int64_t members, int64_t stride, ColumnTotals& totals) {
  int64_t covered = 0;
  int64_t columns = 0;
  int64_t chunks = 0;
  int64_t lists = 0;
  int64_t items = 0;
  for (int64_t m = 0; m < members; ++m) {
    covered += diff[m];
    diff[m] = 0;
    const int64_t c = std::max<int64_t>(visible_at[m * stride] + covered, 0);
    columns += c;
    chunks += (c + (int64_t{1} << kChunkShift) - 1) >> kChunkShift;
    lists += c > 0 ? 1 : 0;
    items += (c + (int64_t{1} << kItemShift) - 1) >> kItemShift;
  }
  totals.columns += columns;
  totals.chunks += chunks;
  totals.lists += lists;
  totals.items += items;
}

void sweep_any(int64_t* diff, const int32_t* visible_at, int64_t members, int64_t stride, int chunk_shift,
               int item_shift, ColumnTotals& totals) {
  int64_t covered = 0;
  for (int64_t m = 0; m < members; ++m) {
    covered += diff[m];
    diff[m] = 0;
    totals.add_shifted(visible_at[m * stride] + covered, chunk_shift, item_shift);
  }
}

/// sweep_fixed for the common block sizes (64 and 128 keys, 64-column items), sweep_any otherwise.
void sweep(int64_t* diff, const int32_t* visible_at, int64_t members, int64_t stride, int chunk_shift, int item_shift,
           ColumnTotals& totals) {
  if (item_shift == 6 && chunk_shift == 6) return sweep_fixed<6, 6>(diff, visible_at, members, stride, totals);
  if (item_shift == 6 && chunk_shift == 7) return sweep_fixed<7, 6>(diff, visible_at, members, stride, totals);
  sweep_any(diff, visible_at, members, stride, chunk_shift, item_shift, totals);
}

}  // namespace

WorkCounter::WorkCounter(const BlockGeometry& geometry, size_t max_slot_entries)
    : geo_(geometry),
      memoize_(geometry.pairs.size() <= kMaxMemoizedPairs),
      pair_presence_(geometry.pairs.size(), nullptr),
      key_columns_(static_cast<size_t>(geometry.layout.ranks())) {
  int64_t offset = 0;
  for (const BlockClass& cls : geometry.q_classes) {
    class_offset_.push_back(offset);
    offset += cls.members + 1;
    strided_classes_ = strided_classes_ || (cls.members > 1 && cls.block_stride > 1);
    every_class_strided_ = every_class_strided_ && cls.members > 1 && cls.block_stride > 1;
  }
  every_class_strided_ = every_class_strided_ && !geometry.q_classes.empty();
  covered_diff_.assign(static_cast<size_t>(offset), 0);
  if (!memoize_) {
    pair_scratch_.resize(geometry.pairs.size());
    listed_scratch_.resize(geometry.chunk_pairs.size());
  }
  if ((geometry.block_k & (geometry.block_k - 1)) == 0) {
    block_k_shift_ = 0;
    while ((int64_t{1} << block_k_shift_) < geometry.block_k) ++block_k_shift_;
  }
  if (geometry.column_item >= 1 && (geometry.column_item & (geometry.column_item - 1)) == 0) {
    item_shift_ = 0;
    while ((int64_t{1} << item_shift_) < geometry.column_item) ++item_shift_;
  }
  require(geometry.column_item >= 1, "column item must be >= 1 column, got ", geometry.column_item);
  size_t key_offset = 0;
  for (const BlockClass& cls : geometry.k_classes) {
    key_class_offset_.push_back(key_offset);
    key_offset += static_cast<size_t>(cls.members) + 2;
  }
  key_member_diff_.assign(key_offset, 0);
  key_member_range_.assign(geometry.k_classes.size(), BlockRange{});
  shared_key_tiles_ = memoize_ && geometry.segments.size() == 1 && geometry.irregular_q_blocks.empty() &&
                      geometry.irregular_k_blocks.empty();
  segment_start_.resize(static_cast<size_t>(geometry.layout.ranks()) * geometry.segments.size());
  for (int32_t r = 0; r < geometry.layout.ranks(); ++r) {
    for (size_t s = 0; s < geometry.segments.size(); ++s) {
      segment_start_[static_cast<size_t>(r) * geometry.segments.size() + s] =
          geometry.segment_start_global(r, static_cast<int32_t>(s));
    }
  }
  const auto ranks = static_cast<size_t>(geometry.layout.ranks());
  if (memoize_ && ranks * ranks * (geometry.pairs.size() + geometry.chunk_pairs.size()) <= max_slot_entries) {
    build_slot_tables();
  }
}

void WorkCounter::build_slot_tables() {
  const int32_t ranks = geo_.layout.ranks();
  const size_t segments = geo_.segments.size();
  const auto x0_of = [&](int32_t q, int32_t kv, int32_t q_segment, int32_t k_segment) {
    return segment_start_[static_cast<size_t>(q) * segments + static_cast<size_t>(q_segment)] -
           segment_start_[static_cast<size_t>(kv) * segments + static_cast<size_t>(k_segment)];
  };
  // The same keys as the hash maps: x0 x pairs + pair.
  const auto number = [&](const std::vector<ClassPair>& pairs, std::vector<int32_t>& slots, bool chunk) {
    FlatIndexMap ids;
    size_t next = 0;
    slots.resize(static_cast<size_t>(ranks) * static_cast<size_t>(ranks) * pairs.size());
    size_t at = 0;
    for (int32_t q = 0; q < ranks; ++q) {
      for (int32_t kv = 0; kv < ranks; ++kv) {
        for (size_t p = 0; p < pairs.size(); ++p, ++at) {
          // A chunk pair's offset is that of its query class's segment against the chunk's segment.
          const int32_t q_segment = chunk ? geo_.q_classes[static_cast<size_t>(pairs[p].q_class)].segment : pairs[p].q_segment;
          const int64_t x0 = x0_of(q, kv, q_segment, pairs[p].k_segment);
          const auto [id, inserted] = ids.try_emplace(x0 * static_cast<int64_t>(pairs.size()) + static_cast<int64_t>(p), next);
          next += inserted ? 1 : 0;
          slots[at] = static_cast<int32_t>(id);
        }
      }
    }
    return next;
  };
  presence_of_slot_.assign(number(geo_.pairs, pair_slot_, false), -1);
  listed_of_slot_.assign(number(geo_.chunk_pairs, chunk_slot_, true), -1);
}

void WorkCounter::prepare(const KeptPattern& pattern) {
  KeptPattern normalized = normalize_pattern(pattern, geo_.layout.seq_len_tokens());
  prepare_runs(RunSet::dilated_points(normalized.slash_offsets, 0), normalized.vertical_positions);
}

void WorkCounter::prepare_runs(RunSet slash_runs, const std::vector<int64_t>& vertical_positions) {
  // Offsets are held as runs so that a dense head (every offset) costs one run, not one entry
  // per token.
  slashes_ = std::move(slash_runs);
  widths_.clear();
  dilations_.clear();
  presence_index_.clear();
  presence_store_.clear();
  key_tiles_index_.clear();  // its keys are presence sets of the previous head
  listed_index_.clear();
  listed_store_.clear();
  std::fill(presence_of_slot_.begin(), presence_of_slot_.end(), -1);
  std::fill(listed_of_slot_.begin(), listed_of_slot_.end(), -1);
  group_store_.clear();
  const auto ranks = static_cast<size_t>(geo_.layout.ranks());
  std::vector<std::vector<int64_t>> locals(ranks);
  std::vector<std::vector<int64_t>> globals(ranks);
  for (const int64_t v : vertical_positions) {
    const TokenOwner owner = geo_.layout.owner(v);
    locals[static_cast<size_t>(owner.ring_rank)].push_back(owner.local_index);
    globals[static_cast<size_t>(owner.ring_rank)].push_back(v);
  }
  total_visible_.assign(ranks * 3, 0);
  for (size_t r = 0; r < ranks; ++r) group_columns(static_cast<int32_t>(r), locals[r], globals[r]);
  flatten_groups();
}

void WorkCounter::flatten_groups() {
  const size_t q_classes = geo_.q_classes.size();
  group_class_min_.resize(group_store_.size() * q_classes);
  for (size_t g = 0; g < group_store_.size(); ++g) {
    const int64_t i_min = group_store_[g].first_block;
    for (size_t a = 0; a < q_classes; ++a) {
      const BlockClass& qc = geo_.q_classes[a];
      group_class_min_[g * q_classes + a] = i_min <= qc.first_block ? 0 : ceil_div(i_min - qc.first_block, qc.block_stride);
    }
  }
  const size_t k_classes = geo_.k_classes.size();
  const size_t ranks = key_columns_.size();
  flat_groups_.clear();
  flat_begin_.assign(ranks * 3 * (k_classes + 1), 0);
  for (size_t owner = 0; owner < ranks; ++owner) {
    for (size_t c = 0; c < 3; ++c) {
      size_t* begin = flat_begin_.data() + (owner * 3 + c) * (k_classes + 1);
      for (size_t b = 0; b < k_classes; ++b) {
        begin[b] = flat_groups_.size();
        // Blocks ascend, so members of one key class ascend too.
        for (const KeyBlockColumns& block : key_columns_[owner]) {
          if (block.k_class != static_cast<int32_t>(b)) continue;
          for (size_t g = block.begin[c]; g < block.end[c]; ++g) {
            flat_groups_.push_back(FlatGroup{block.member, group_store_[g].first_block, group_store_[g].count, g});
          }
        }
      }
      begin[k_classes] = flat_groups_.size();
    }
  }
  // Visible columns per query block, only for the (owner, case) rows that see any column; the
  // other rows are never read (count_columns returns before it needs them).
  const auto q_blocks = static_cast<size_t>(geo_.q_blocks);
  if (visible_.size() != ranks * 3 * q_blocks) visible_.assign(ranks * 3 * q_blocks, 0);
  visible_first_.assign(ranks * 3, geo_.q_blocks);
  visible_pairs_.assign(ranks * 3, 0);
  for (size_t owner = 0; owner < ranks; ++owner) {
    const std::vector<KeyBlockColumns>& blocks = key_columns_[owner];
    for (size_t c = 0; c < 3; ++c) {
      if (blocks.empty() || blocks.front().begin[c] == blocks.front().end[c]) continue;
      int32_t* visible = visible_.data() + (owner * 3 + c) * q_blocks;
      std::fill(visible, visible + q_blocks, 0);
      for (const KeyBlockColumns& block : blocks) {
        for (size_t g = block.begin[c]; g < block.end[c]; ++g) {
          const ColumnGroup& group = group_store_[g];
          visible[group.first_block] += static_cast<int32_t>(group.count);
          visible_pairs_[owner * 3 + c] += group.count * (geo_.q_blocks - group.first_block);
          visible_first_[owner * 3 + c] = std::min(visible_first_[owner * 3 + c], group.first_block);
        }
      }
      for (size_t i = 1; i < q_blocks; ++i) visible[i] += visible[i - 1];
    }
  }
}

void WorkCounter::group_columns(int32_t owner, std::vector<int64_t>& locals, std::vector<int64_t>& globals) {
  std::vector<KeyBlockColumns>& out = key_columns_[static_cast<size_t>(owner)];
  out.clear();
  const int32_t ranks = geo_.layout.ranks();
  // Striped layouts in closed form (what first_local_at_or_after computes): a column at local
  // index l of its owner lies in the owner's local stripe l / G; a lower rank first sees it at the
  // start of its next local stripe, a higher rank at the start of the same local stripe.
  const bool striped = geo_.layout.kind() == LayoutKind::striped && ranks > 1;
  const int64_t stripe = geo_.layout.granularity_tokens();
  const int64_t len = geo_.layout.local_len();
  const auto striped_first_visible = [&](int c, int64_t local) {
    const int64_t at = c == 1 ? local : (local / stripe + (c == 0 ? 1 : 0)) * stripe;
    return at < len ? at / geo_.block_q : geo_.q_blocks;
  };
  size_t idx = 0;
  while (idx < locals.size()) {
    KeyBlockColumns block;
    block.block = locals[idx] / geo_.block_k;
    size_t end = idx + 1;
    while (end < locals.size() && locals[end] / geo_.block_k == block.block) ++end;
    block.k_class = geo_.k_block_class[static_cast<size_t>(block.block)];
    if (block.k_class >= 0) {
      const BlockClass& kc = geo_.k_classes[static_cast<size_t>(block.k_class)];
      block.member = (block.block - kc.first_block) / kc.block_stride;
    }
    const int32_t representative[3] = {owner - 1, owner, owner + 1};
    for (int c = 0; c < 3; ++c) {
      block.begin[c] = block.end[c] = group_store_.size();
      if (representative[c] < 0 || representative[c] >= ranks) continue;
      for (size_t k = idx; k < end; ++k) {
        const int64_t first = striped ? striped_first_visible(c, locals[k]) : first_visible_block(representative[c], globals[k]);
        if (first >= geo_.q_blocks) break;  // monotone: later columns are not visible either
        if (group_store_.size() > block.begin[c] && group_store_.back().first_block == first) {
          ++group_store_.back().count;
        } else {
          group_store_.push_back(ColumnGroup{first, 1});
        }
      }
      block.end[c] = group_store_.size();
      for (size_t g = block.begin[c]; g < block.end[c]; ++g) {
        total_visible_[static_cast<size_t>(owner) * 3 + static_cast<size_t>(c)] += group_store_[g].count;
      }
    }
    out.push_back(block);
    idx = end;
  }
}

const RunSet& WorkCounter::dilated_slashes(int64_t width) {
  for (size_t k = 0; k < widths_.size(); ++k) {
    if (widths_[k] == width) return dilations_[k];
  }
  widths_.push_back(width);
  // The union of [p - width, p] over a run [lo, hi] of points is [lo - width, hi].
  RunSet dilated;
  for (const Interval& run : slashes_.runs()) dilated.append(run.lo - width, run.hi);
  dilations_.push_back(std::move(dilated));
  return dilations_.back();
}

bool WorkCounter::any_slash_in(int64_t lo, int64_t hi) const {
  const size_t run = slashes_.first_run_reaching(lo);
  return run < slashes_.runs().size() && slashes_.runs()[run].lo <= hi;
}

RunSet WorkCounter::present_offsets(const ClassPair& pair, int64_t count_b, int64_t x0) {
  RunSet mu;
  const int64_t count_a = geo_.q_classes[static_cast<size_t>(pair.q_class)].members;
  const int64_t shift = geo_.period_shift;
  const int64_t n = geo_.layout.seq_len_tokens();
  // Only member offsets whose difference set can meet [0, N) can hold a kept offset.
  const int64_t mu_lo = std::max(-(count_b - 1), ceil_div(-(pair.max_difference + x0), shift));
  const int64_t mu_hi = std::min(count_a - 1, floor_div(n - 1 - (pair.min_difference + x0), shift));
  if (mu_lo > mu_hi) return mu;
  for (const DifferenceItem& item : pair.items) {
    const RunSet& dilated = dilated_slashes(item.hi - item.lo);
    RunSet hits;
    if (item.m_lo == item.m_hi) {
      hits = dilated.sample(item.lo + item.m_lo * item.stride + x0, shift, mu_lo, mu_hi);
    } else {
      // A progression of windows (stripes finer than blocks): first the windows m' that hold a
      // kept offset, then the mu whose window range [m_lo + mu*k, m_hi + mu*k] meets them.
      const int64_t k = shift / item.stride;
      const RunSet windows = dilated.sample(item.lo + x0, item.stride, item.m_lo + mu_lo * k, item.m_hi + mu_hi * k);
      const RunSet starts = windows.window_hits(item.m_lo, item.m_hi, mu_lo * k, mu_hi * k);
      hits = starts.sample(0, k, mu_lo, mu_hi);
    }
    mu = pair.items.size() == 1 ? std::move(hits) : RunSet::unite(mu, hits);
  }
  return mu;
}

void WorkCounter::compute_presence(const ClassPair& pair, int64_t x0, Presence& out) {
  out.run_lo.clear();
  out.run_end.clear();
  out.run_from.assign(1, 0);
  out.prefix.assign(1, 0);
  out.base = 0;
  out.tiles = 0;
  out.masked = 0;
  const int64_t count_a = geo_.q_classes[static_cast<size_t>(pair.q_class)].members;
  const int64_t count_b = geo_.k_classes[static_cast<size_t>(pair.k_class)].members;
  const int64_t shift = geo_.period_shift;
  out.mu = present_offsets(pair, count_b, x0);
  if (out.mu.empty()) return;
  const int64_t mu_masked = ceil_div(-(pair.min_difference + x0), shift) - 1;  // last mu with a pair q < k
  out.base = -(count_b - 1);
  const auto span = static_cast<size_t>(count_a + count_b - 1);
  out.prefix.assign(span + 1, 0);
  for (const Interval& run : out.mu.runs()) {
    for (int64_t x = run.lo - out.base; x <= run.hi - out.base; ++x) out.prefix[static_cast<size_t>(x) + 1] = 1;
  }
  for (size_t x = 0; x < span; ++x) out.prefix[x + 1] += out.prefix[x];
  out.run_from.assign(span + 1, 0);
  for (const Interval& run : out.mu.runs()) {
    // Offsets past this run's end start from the next run.
    const auto past = static_cast<size_t>(run.hi + 1 - out.base);
    if (past <= span) out.run_from[past] = static_cast<int32_t>(out.run_lo.size() + 1);
    out.run_lo.push_back(run.lo);
    out.run_end.push_back(run.hi + 1);
    out.tiles += diagonal_pairs_sum(count_a, count_b, run.lo, run.hi);
    out.masked += diagonal_pairs_sum(count_a, count_b, run.lo, std::min(run.hi, mu_masked));
  }
  for (size_t x = 1; x <= span; ++x) out.run_from[x] = std::max(out.run_from[x], out.run_from[x - 1]);
}

const WorkCounter::Presence& WorkCounter::presence(size_t rank_pair, size_t pair_index, int64_t x0) {
  const ClassPair& pair = geo_.pairs[pair_index];
  if (!memoize_) {
    compute_presence(pair, x0, pair_scratch_[pair_index]);
    return pair_scratch_[pair_index];
  }
  size_t index = 0;
  bool inserted = false;
  if (pair_slot_.empty()) {
    const int64_t key = x0 * static_cast<int64_t>(geo_.pairs.size()) + static_cast<int64_t>(pair_index);
    std::tie(index, inserted) = presence_index_.try_emplace(key, presence_store_.size());
  } else {
    int32_t& slot = presence_of_slot_[static_cast<size_t>(pair_slot_[rank_pair * geo_.pairs.size() + pair_index])];
    inserted = slot < 0;
    if (inserted) slot = static_cast<int32_t>(presence_store_.size());
    index = static_cast<size_t>(slot);
  }
  if (inserted) {
    presence_store_.emplace_back();
    compute_presence(pair, x0, presence_store_.back());
  }
  return presence_store_[index];
}

RunSet WorkCounter::compute_listed_members(size_t chunk_pair_index, int64_t x0) {
  const ClassPair& chunk = geo_.chunk_pairs[chunk_pair_index];
  if (!geo_.irregular_k_blocks.empty()) return present_offsets(chunk, 1, x0);
  // Every key lies in a regular key block: member a has a tile iff a - b is a present offset of
  // some key class of the segment for some member b, so the listed members are the present
  // offsets of the current rank pair (which has this x0) widened by each class's members.
  // Cheaper than sampling the kept offsets again.
  const size_t k_class_count = geo_.k_classes.size();
  const int64_t count_a = geo_.q_classes[static_cast<size_t>(chunk.q_class)].members;
  listed_scratch_runs_.clear();
  for (size_t b = 0; b < k_class_count; ++b) {
    if (geo_.k_classes[b].segment != chunk.k_segment) continue;
    const int64_t widen = geo_.k_classes[b].members - 1;
    for (const Interval& run : pair_presence_[static_cast<size_t>(chunk.q_class) * k_class_count + b]->mu.runs()) {
      const int64_t lo = std::max<int64_t>(0, run.lo);
      const int64_t hi = std::min(count_a - 1, run.hi + widen);
      if (lo <= hi) listed_scratch_runs_.push_back(Interval{lo, hi});
    }
  }
  std::sort(listed_scratch_runs_.begin(), listed_scratch_runs_.end(),
            [](const Interval& x, const Interval& y) { return x.lo < y.lo; });
  RunSet listed;
  for (const Interval& run : listed_scratch_runs_) listed.append(run.lo, run.hi);
  return listed;
}

const RunSet& WorkCounter::listed_members(size_t rank_pair, size_t chunk_pair_index, int64_t x0) {
  if (!memoize_) {
    listed_scratch_[chunk_pair_index] = compute_listed_members(chunk_pair_index, x0);
    return listed_scratch_[chunk_pair_index];
  }
  size_t index = 0;
  bool inserted = false;
  if (chunk_slot_.empty()) {
    const int64_t key = x0 * static_cast<int64_t>(geo_.chunk_pairs.size()) + static_cast<int64_t>(chunk_pair_index);
    std::tie(index, inserted) = listed_index_.try_emplace(key, listed_store_.size());
  } else {
    int32_t& slot =
        listed_of_slot_[static_cast<size_t>(chunk_slot_[rank_pair * geo_.chunk_pairs.size() + chunk_pair_index])];
    inserted = slot < 0;
    if (inserted) slot = static_cast<int32_t>(listed_store_.size());
    index = static_cast<size_t>(slot);
  }
  if (inserted) listed_store_.push_back(compute_listed_members(chunk_pair_index, x0));
  return listed_store_[index];
}

int64_t WorkCounter::count_lists(int32_t q_rank, int32_t kv_rank, int64_t first_with_columns) {
  // Every query block from the first one that sees a kept column of this chunk has a column or
  // a tile (a block without tiles covers no column); before it, only the blocks with a tile.
  int64_t lists = geo_.q_blocks - first_with_columns;
  const size_t segments = geo_.segments.size();
  const size_t rank_pair = static_cast<size_t>(q_rank) * static_cast<size_t>(geo_.layout.ranks()) + static_cast<size_t>(kv_rank);
  for (size_t a = 0; a < geo_.q_classes.size(); ++a) {
    const BlockClass& qc = geo_.q_classes[a];
    if (first_with_columns <= qc.first_block) continue;
    const int64_t below = std::min(qc.members, ceil_div(first_with_columns - qc.first_block, qc.block_stride));
    const int64_t q_start = segment_start_[static_cast<size_t>(q_rank) * segments + static_cast<size_t>(qc.segment)];
    const auto x0_of = [&](size_t s) { return q_start - segment_start_[static_cast<size_t>(kv_rank) * segments + s]; };
    const RunSet& first = listed_members(rank_pair, a * segments, x0_of(0));
    // At most two segments (zigzag): the union of both segments' listed members.
    lists += segments == 1
                 ? first.size_in(0, below - 1)
                 : RunSet::union_size_in(first, listed_members(rank_pair, a * segments + 1, x0_of(1)), 0, below - 1);
  }
  return lists;
}

std::pair<bool, bool> WorkCounter::tile_direct(int32_t q_rank, int64_t i, int32_t kv_rank, int64_t j) {
  const int64_t len = geo_.layout.local_len();
  q_runs_.clear();
  k_runs_.clear();
  append_global_runs(geo_.layout, q_rank, i * geo_.block_q, std::min((i + 1) * geo_.block_q, len), q_runs_);
  append_global_runs(geo_.layout, kv_rank, j * geo_.block_k, std::min((j + 1) * geo_.block_k, len), k_runs_);
  if (q_runs_.back().hi < k_runs_.front().lo) return {false, false};  // no causal pair at all
  for (const Interval& q : q_runs_) {
    for (const Interval& k : k_runs_) {
      if (any_slash_in(q.lo - k.hi, q.hi - k.lo)) return {true, q_runs_.front().lo < k_runs_.back().hi};
    }
  }
  return {false, false};
}

int64_t WorkCounter::first_visible_block(int32_t q_rank, int64_t global) const {
  const int64_t local = first_local_at_or_after(geo_.layout, q_rank, global);
  return local >= geo_.layout.local_len() ? geo_.q_blocks : local / geo_.block_q;
}

void WorkCounter::cover_regular(int32_t k_class, int64_t member, const int64_t* class_min, int64_t count) {
  const size_t k_class_count = geo_.k_classes.size();
  for (size_t a = 0; a < geo_.q_classes.size(); ++a) {
    const BlockClass& qc = geo_.q_classes[a];
    const int64_t a_min = class_min[a];
    const int64_t a_max = qc.members - 1;
    if (a_min > a_max) continue;
    const Presence& presence = *pair_presence_[a * k_class_count + static_cast<size_t>(k_class)];
    // Members one block apart write straight into the per-block array; others into their class's.
    const bool direct = qc.block_stride == 1 || qc.members == 1;
    int64_t* diff = direct ? block_diff_.data() + qc.first_block : covered_diff_.data() + class_offset_[a];
    // Present tiles of this key block: q members a with a - member in a run of mu.
    const int64_t* const lo = presence.run_lo.data();
    const int64_t* const end = presence.run_end.data();
    const size_t runs = presence.run_lo.size();
    for (size_t r = presence.first_run_from(a_min - member); r < runs; ++r) {
      const int64_t a1 = std::max(a_min, member + lo[r]);
      if (a1 > a_max) break;
      const int64_t a2 = std::min(a_max, member + end[r] - 1);
      diff[a1] -= count;
      diff[a2 + 1] += count;
    }
  }
}

void WorkCounter::cover_direct(int32_t q_rank, int32_t kv_rank, int64_t j, int64_t i_min, bool regular_key_block,
                               int64_t count) {
  if (regular_key_block) {
    for (const int64_t i : geo_.irregular_q_blocks) {
      if (i >= i_min && tile_direct(q_rank, i, kv_rank, j).first) covered_direct_[static_cast<size_t>(i)] += count;
    }
  } else {
    for (int64_t i = i_min; i < geo_.q_blocks; ++i) {
      if (tile_direct(q_rank, i, kv_rank, j).first) covered_direct_[static_cast<size_t>(i)] += count;
    }
  }
}

bool WorkCounter::count_columns_sparse(int c, int32_t kv_rank, WorkCounts& counts) {
  // Valid when every query and key block is regular and the rank pair has at most block_k (and at
  // most column_item) visible columns: then each query block gathers at most one chunk and one
  // item, so chunks = blocks with a visible column that no tile covers. Blocks that see a column
  // are those from the first group's block on; a block with visible columns is fully covered only
  // if it is covered for the first group, so only those candidates are checked. Query classes may
  // be strided (members a stripe period apart): members map to blocks first + m x stride.
  if (!geo_.irregular_q_blocks.empty() || !geo_.irregular_k_blocks.empty()) return false;
  if (total_visible_[static_cast<size_t>(kv_rank) * 3 + static_cast<size_t>(c)] > std::min(geo_.block_k, geo_.column_item)) {
    return false;
  }
  const std::vector<KeyBlockColumns>& blocks = key_columns_[static_cast<size_t>(kv_rank)];
  const size_t k_class_count = geo_.k_classes.size();
  const size_t q_class_count = geo_.q_classes.size();
  const KeyBlockColumns& first_block = blocks.front();
  const int64_t* const first_min = group_class_min_.data() + first_block.begin[c] * q_class_count;
  int64_t fully_covered = 0;
  int64_t candidates_checked = 0;
  for (size_t a = 0; a < q_class_count; ++a) {
    const BlockClass& qc = geo_.q_classes[a];
    const int64_t a_min = first_min[a];
    const RunSet& mu = pair_presence_[a * k_class_count + static_cast<size_t>(first_block.k_class)]->mu;
    for (size_t r = mu.first_run_reaching(a_min - first_block.member); r < mu.runs().size(); ++r) {
      const int64_t lo = std::max(a_min, first_block.member + mu.runs()[r].lo);
      const int64_t hi = std::min(qc.members - 1, first_block.member + mu.runs()[r].hi);
      if (lo > qc.members - 1) break;
      candidates_checked += std::max<int64_t>(0, hi - lo + 1);
      if (candidates_checked > geo_.q_blocks / 4) return false;  // dense coverage: the sweep is cheaper
      for (int64_t m = lo; m <= hi; ++m) {
        const int64_t i = qc.first_block + m * qc.block_stride;
        bool covered = true;
        for (const KeyBlockColumns& block : blocks) {
          for (size_t g = block.begin[c]; covered && g < block.end[c]; ++g) {
            if (group_store_[g].first_block > i) break;
            covered = pair_presence_[a * k_class_count + static_cast<size_t>(block.k_class)]->test(m - block.member);
          }
          if (!covered || block.begin[c] == block.end[c] || group_store_[block.begin[c]].first_block > i) break;
        }
        fully_covered += covered ? 1 : 0;
      }
    }
  }
  int64_t chunks = -fully_covered;
  for (size_t a = 0; a < q_class_count; ++a) chunks += std::max<int64_t>(0, geo_.q_classes[a].members - first_min[a]);
  // Columns: the visible (column, query block) pairs less the covered ones, a group's columns
  // covered on the query members of each class whose tile list holds their key block (the flat
  // groups of each key class share one presence set per query class).
  const size_t key = static_cast<size_t>(kv_rank) * 3 + static_cast<size_t>(c);
  int64_t columns = visible_pairs_[key];
  const size_t* flat_begin = flat_begin_.data() + key * (k_class_count + 1);
  for (size_t b = 0; b < k_class_count; ++b) {
    const FlatGroup* const groups_begin = flat_groups_.data() + flat_begin[b];
    const FlatGroup* const groups_end = flat_groups_.data() + flat_begin[b + 1];
    if (groups_begin == groups_end) continue;
    for (size_t a = 0; a < geo_.q_classes.size(); ++a) {
      const BlockClass& qc = geo_.q_classes[a];
      const Presence& presence = *pair_presence_[a * k_class_count + b];
      if (presence.mu.empty()) continue;
      int64_t covered = 0;
      for (const FlatGroup* g = groups_begin; g != groups_end; ++g) {
        const int64_t a_min = group_class_min_[g->group * q_class_count + a];
        covered += g->count * presence.count(a_min - g->member, qc.members - 1 - g->member);
      }
      columns -= covered;
    }
  }
  counts.columns += columns;
  counts.column_chunks += chunks;
  counts.column_lists += chunks;  // at most one chunk (and one item) per block
  counts.column_items += chunks;
  return true;
}

void WorkCounter::cover_flat(int c, int32_t kv_rank, int64_t* diff) const {
  const size_t k_class_count = geo_.k_classes.size();
  const size_t* flat_begin =
      flat_begin_.data() + (static_cast<size_t>(kv_rank) * 3 + static_cast<size_t>(c)) * (k_class_count + 1);
  for (size_t a = 0; a < geo_.q_classes.size(); ++a) {
    const BlockClass& qc = geo_.q_classes[a];
    const int64_t first = qc.first_block;
    const int64_t a_max = qc.members - 1;
    for (size_t b = 0; b < k_class_count; ++b) {
      const Presence& presence = *pair_presence_[a * k_class_count + b];
      const int64_t* const lo = presence.run_lo.data();
      const int64_t* const end = presence.run_end.data();
      const size_t runs = presence.run_lo.size();
      // The present tiles of key member m are the query members m + mu, mu in the presence runs;
      // each run adds one interval of covered query blocks [m + lo, m + end) to the difference
      // array, clipped to the visible members [a_min, a_max]. The runs that reach into that range
      // are [rb, re); only the first and last of them can need clipping. Groups ascend by member,
      // so re never grows.
      size_t re = runs;
      const FlatGroup* const groups_end = flat_groups_.data() + flat_begin[b + 1];
      for (const FlatGroup* g = flat_groups_.data() + flat_begin[b]; g != groups_end; ++g) {
        const int64_t m = g->member;
        const int64_t n = g->count;
        const int64_t a_min = std::max<int64_t>(0, g->first_block - first);
        while (re > 0 && m + lo[re - 1] > a_max) --re;
        const size_t rb = static_cast<size_t>(std::upper_bound(end, end + re, a_min - m) - end);  // end > a_min - m
        if (rb >= re) continue;
        int64_t* const at = diff + first;
        if (rb + 1 == re) {
          const int64_t a1 = std::max(a_min, m + lo[rb]);
          const int64_t a2 = std::min(a_max, m + end[rb] - 1);
          at[a1] -= n;
          at[a2 + 1] += n;
          continue;
        }
        at[std::max(a_min, m + lo[rb])] -= n;
        at[m + end[rb]] += n;
        for (size_t r = rb + 1; r + 1 < re; ++r) {
          at[m + lo[r]] -= n;
          at[m + end[r]] += n;
        }
        at[m + lo[re - 1]] -= n;
        at[std::min(a_max, m + end[re - 1] - 1) + 1] += n;
      }
    }
  }
}

void WorkCounter::count_columns_strided(int c, int32_t kv_rank, WorkCounts& counts) {
  if (!covered_clean_) {
    covered_diff_.assign(covered_diff_.size(), 0);
    covered_clean_ = true;
  }
  const std::vector<KeyBlockColumns>& blocks = key_columns_[static_cast<size_t>(kv_rank)];
  const size_t q_classes = geo_.q_classes.size();
  for (const KeyBlockColumns& block : blocks) {
    for (size_t g = block.begin[c]; g < block.end[c]; ++g) {
      cover_regular(block.k_class, block.member, group_class_min_.data() + g * q_classes, group_store_[g].count);
    }
  }
  // Each class's members in order: the visible columns of the block (prefix counts of the
  // groups) plus the running covered count; the sweep zeroes what it read for the next call.
  // Covering writes start at a group's first visible block: members before it read nothing.
  const size_t key = static_cast<size_t>(kv_rank) * 3 + static_cast<size_t>(c);
  const int32_t* const visible = visible_.data() + key * static_cast<size_t>(geo_.q_blocks);
  const int64_t from = visible_first_[key];
  ColumnTotals totals;
  for (size_t a = 0; a < geo_.q_classes.size(); ++a) {
    const BlockClass& qc = geo_.q_classes[a];
    int64_t* const diff = covered_diff_.data() + class_offset_[a];
    const int64_t first = from <= qc.first_block ? 0 : std::min(qc.members, ceil_div(from - qc.first_block, qc.block_stride));
    sweep(diff + first, visible + qc.first_block + first * qc.block_stride, qc.members - first, qc.block_stride,
          block_k_shift_, item_shift_, totals);
    diff[qc.members] = 0;
  }
  totals.add_to(counts);
}

void WorkCounter::count_columns_regular(int c, int32_t kv_rank, WorkCounts& counts) {
  const auto q_blocks = static_cast<size_t>(geo_.q_blocks);
  if (regular_diff_.size() != q_blocks + 1) regular_diff_.assign(q_blocks + 1, 0);
  int64_t* const diff = regular_diff_.data();
  cover_flat(c, kv_rank, diff);
  // Covering writes start at a group's first visible block, so everything before the first
  // visible block is zero; the sweep zeroes what it read for the next call.
  const size_t key = static_cast<size_t>(kv_rank) * 3 + static_cast<size_t>(c);
  const int32_t* const visible = visible_.data() + key * q_blocks;
  const auto from = static_cast<size_t>(visible_first_[key]);
  ColumnTotals totals;
  sweep(diff + from, visible + from, static_cast<int64_t>(q_blocks - from), 1, block_k_shift_, item_shift_, totals);
  diff[q_blocks] = 0;
  totals.add_to(counts);
}

void WorkCounter::count_columns(int32_t q_rank, int32_t kv_rank, WorkCounts& counts) {
  const std::vector<KeyBlockColumns>& blocks = key_columns_[static_cast<size_t>(kv_rank)];
  const int c = visibility_case(q_rank, kv_rank);
  // Columns become visible in order, so if the first key block's columns are seen by no query of
  // this rank, no column is.
  if (blocks.empty() || blocks.front().begin[c] == blocks.front().end[c]) return;
  if (count_columns_sparse(c, kv_rank, counts)) return;
  const bool any_direct = !geo_.irregular_q_blocks.empty() || !geo_.irregular_k_blocks.empty();
  if (!strided_classes_ && !any_direct && block_k_shift_ >= 0 && item_shift_ >= 0) {
    count_columns_regular(c, kv_rank, counts);
    return;
  }
  if (every_class_strided_ && !any_direct && block_k_shift_ >= 0 && item_shift_ >= 0) {
    count_columns_strided(c, kv_rank, counts);
    return;
  }
  covered_clean_ = false;
  const int64_t q_blocks = geo_.q_blocks;
  const int64_t block_k = geo_.block_k;
  block_diff_.assign(static_cast<size_t>(q_blocks) + 1, 0);
  if (strided_classes_) covered_diff_.assign(covered_diff_.size(), 0);
  if (any_direct) covered_direct_.assign(static_cast<size_t>(q_blocks), 0);
  // Visible columns go into block_diff_ from their first visible block on. Covered columns: with
  // every query class one block apart straight into block_diff_ (cover_flat); strided classes
  // group by group (cover_regular); irregular blocks tile by tile.
  for (const KeyBlockColumns& block : blocks) {
    for (size_t g = block.begin[c]; g < block.end[c]; ++g) {
      const ColumnGroup& group = group_store_[g];
      block_diff_[static_cast<size_t>(group.first_block)] += group.count;
      if (block.k_class >= 0 && strided_classes_) {
        cover_regular(block.k_class, block.member, group_class_min_.data() + g * geo_.q_classes.size(), group.count);
      }
      if (block.k_class < 0 || !geo_.irregular_q_blocks.empty()) {
        cover_direct(q_rank, kv_rank, block.block, group.first_block, block.k_class >= 0, group.count);
      }
    }
  }
  if (!strided_classes_) cover_flat(c, kv_rank, block_diff_.data());
  for (size_t k = 1; k < block_diff_.size(); ++k) block_diff_[k] += block_diff_[k - 1];
  if (any_direct) {
    for (size_t i = 0; i < covered_direct_.size(); ++i) block_diff_[i] -= covered_direct_[i];
  }
  if (strided_classes_) {
    for (size_t a = 0; a < geo_.q_classes.size(); ++a) {
      const BlockClass& qc = geo_.q_classes[a];
      if (qc.block_stride == 1 || qc.members == 1) continue;
      const int64_t* diff = covered_diff_.data() + class_offset_[a];
      int64_t covered = 0;
      int64_t i = qc.first_block;
      for (int64_t m = 0; m < qc.members; ++m, i += qc.block_stride) {
        covered += diff[m];
        block_diff_[static_cast<size_t>(i)] += covered;
      }
    }
  }
  ColumnTotals totals;
  if (block_k_shift_ >= 0 && item_shift_ >= 0) {
    for (int64_t i = 0; i < q_blocks; ++i) {
      totals.add_shifted(block_diff_[static_cast<size_t>(i)], block_k_shift_, item_shift_);
    }
  } else {
    for (int64_t i = 0; i < q_blocks; ++i) totals.add(block_diff_[static_cast<size_t>(i)], block_k, geo_.column_item);
  }
  totals.add_to(counts);
}

WorkCounts WorkCounter::count_pair(int32_t q_rank, int32_t kv_rank) {
  WorkCounts counts;
  const size_t segments = geo_.segments.size();
  const size_t rank_pair = static_cast<size_t>(q_rank) * static_cast<size_t>(geo_.layout.ranks()) + static_cast<size_t>(kv_rank);
  for (size_t p = 0; p < geo_.pairs.size(); ++p) {
    const ClassPair& pair = geo_.pairs[p];
    const int64_t x0 = segment_start_[static_cast<size_t>(q_rank) * segments + static_cast<size_t>(pair.q_segment)] -
                       segment_start_[static_cast<size_t>(kv_rank) * segments + static_cast<size_t>(pair.k_segment)];
    const Presence& found = presence(rank_pair, p, x0);
    counts.tiles += found.tiles;
    counts.masked_tiles += found.masked;
    pair_presence_[p] = &found;
  }
  const int c = visibility_case(q_rank, kv_rank);
  const int64_t first_with_columns = visible_first_[static_cast<size_t>(kv_rank) * 3 + static_cast<size_t>(c)];
  irregular_key_hits_.clear();
  for (const int64_t i : geo_.irregular_q_blocks) {
    bool listed = false;
    for (int64_t j = 0; j < geo_.k_blocks; ++j) {
      const auto [present, masked] = tile_direct(q_rank, i, kv_rank, j);
      counts.tiles += present ? 1 : 0;
      counts.masked_tiles += masked ? 1 : 0;
      listed = listed || present;
      if (present) irregular_key_hits_.push_back(j);
    }
    counts.lists += listed && i < first_with_columns ? 1 : 0;  // later blocks are counted with the columns
  }
  for (const int64_t j : geo_.irregular_k_blocks) {
    for (int64_t i = 0; i < geo_.q_blocks; ++i) {
      if (geo_.q_block_class[static_cast<size_t>(i)] < 0) continue;  // counted above
      const auto [present, masked] = tile_direct(q_rank, i, kv_rank, j);
      counts.tiles += present ? 1 : 0;
      counts.masked_tiles += masked ? 1 : 0;
      if (present) irregular_key_hits_.push_back(j);
    }
  }
  count_columns(q_rank, kv_rank, counts);
  counts.lists += count_lists(q_rank, kv_rank, first_with_columns);
  add_key_block_tiles(q_rank, kv_rank);
  return counts;
}

size_t WorkCounter::memoized_key_tiles() {
  presence_key_.assign(pair_presence_.begin(), pair_presence_.end());
  const auto [it, inserted] = key_tiles_index_.try_emplace(presence_key_, key_tiles_range_.size());
  if (inserted) {
    const auto k_blocks = static_cast<size_t>(geo_.k_blocks);
    key_tiles_store_.resize(key_tiles_store_.size() + k_blocks, 0);
    key_tiles_range_.push_back(regular_key_tiles(key_tiles_store_.data() + it->second * k_blocks));
  }
  return it->second;
}

void WorkCounter::start_key_head() {
  if (!shared_key_tiles_) return;
  const auto pairs = static_cast<size_t>(geo_.layout.ranks()) * static_cast<size_t>(geo_.layout.ranks());
  key_head_offset_ = key_ids_.size();
  key_ids_.resize(key_head_offset_ + pairs);
}

void WorkCounter::add_key_block_tiles(int32_t q_rank, int32_t kv_rank) {
  const auto ranks = static_cast<size_t>(geo_.layout.ranks());
  const auto k_blocks = static_cast<size_t>(geo_.k_blocks);
  const size_t rank_pair = static_cast<size_t>(q_rank) * ranks + static_cast<size_t>(kv_rank);
  if (shared_key_tiles_) {
    key_ids_[key_head_offset_ + rank_pair] = static_cast<int32_t>(memoized_key_tiles());
    return;
  }
  int32_t* tiles = key_tiles_.data() + rank_pair * k_blocks;
  BlockRange& touched = key_range_[rank_pair];
  for (const int64_t j : irregular_key_hits_) {
    ++tiles[static_cast<size_t>(j)];
    touched.add(j, j);
  }
  // The regular blocks' counts are a function of the rank pair's presence sets alone, which are
  // memoized: with one segment per rank (contiguous, striped) the rank pairs at the same offset
  // share them; with two (zigzag) hardly any pair does, and they are computed each time.
  if (!memoize_ || geo_.segments.size() != 1) {
    const BlockRange added = regular_key_tiles(tiles);
    touched.add(added.lo, added.hi);
    return;
  }
  const BlockRange added = add_memoized_key_tiles(memoized_key_tiles(), tiles);
  touched.add(added.lo, added.hi);
}

WorkCounter::BlockRange WorkCounter::add_memoized_key_tiles(size_t id, int32_t* tiles) const {
  const BlockRange added = key_tiles_range_[id];
  const int32_t* cached = key_tiles_store_.data() + id * static_cast<size_t>(geo_.k_blocks);
  for (int64_t j = added.lo; j <= added.hi; ++j) tiles[j] += cached[j];
  return added;
}

std::pair<int64_t, int32_t> WorkCounter::take_key_tiles(int32_t* tiles, BlockRange range) {
  int64_t listed = 0;
  int32_t longest = 0;
  for (int64_t j = range.lo; j <= range.hi; ++j) {
    listed += tiles[j] != 0 ? 1 : 0;
    longest = std::max(longest, tiles[j]);
    tiles[j] = 0;
  }
  return {listed, longest};
}

WorkCounter::BlockRange WorkCounter::regular_key_tiles(int32_t* tiles) {
  // Key member b of class B meets query member a of class A iff a - b is a present offset of
  // (A, B). A run [lo, hi] of them gives b the members a in [max(0, b + lo), min(count_a - 1, b + hi)]:
  // the sum over a of the indicator of b in [a - hi, a - lo], a trapezoid in b. Its first
  // difference is +1 on [-hi, count_a - 1 - hi] and -1 on [1 - lo, count_a - lo], so four points
  // of a second-order difference array per run; points past the last member change nothing, and
  // points below member 0 fold into members 0 and 1 (an impulse v at p < 0 adds v x (b - p + 1)
  // to member b >= 0). Only the members from the first point to the last are swept: the counts
  // are 0 before the first and after the last in range (each run's trapezoid is back to 0 there).
  // Irregular blocks are counted tile by tile (count_pair).
  for (size_t p = 0; p < geo_.pairs.size(); ++p) {
    const ClassPair& pair = geo_.pairs[p];
    const RunSet& mu = pair_presence_[p]->mu;
    if (mu.empty()) continue;
    const int64_t count_a = geo_.q_classes[static_cast<size_t>(pair.q_class)].members;
    const auto k_class = static_cast<size_t>(pair.k_class);
    const int64_t members = geo_.k_classes[k_class].members;
    int64_t* const diff = key_member_diff_.data() + key_class_offset_[k_class];
    BlockRange& swept = key_member_range_[k_class];
    const auto add = [&](int64_t at, int64_t v) {
      if (at >= members) {
        swept.hi = std::max(swept.hi, members - 1);  // the trapezoid ends past the last member
        return;
      }
      if (at >= 0) {
        diff[at] += v;
        swept.add(at, at);
        return;
      }
      diff[0] += v * (1 - at);
      diff[1] += v * at;
      swept.add(0, 1);
    };
    for (const Interval& run : mu.runs()) {
      add(-run.hi, 1);
      add(count_a - run.hi, -1);
      add(1 - run.lo, -1);
      add(count_a - run.lo + 1, 1);
    }
  }
  BlockRange touched;
  for (size_t k = 0; k < geo_.k_classes.size(); ++k) {
    BlockRange& swept = key_member_range_[k];
    if (swept.empty()) continue;
    const BlockClass& kc = geo_.k_classes[k];
    int64_t* const diff = key_member_diff_.data() + key_class_offset_[k];
    const int64_t last = std::min(swept.hi, kc.members - 1);
    int64_t slope = 0;
    int64_t value = 0;
    int64_t block = kc.first_block + swept.lo * kc.block_stride;
    if (kc.block_stride == 1) {
      int32_t* const at = tiles + kc.first_block;
      for (int64_t b = swept.lo; b <= last; ++b) {
        slope += diff[b];
        value += slope;
        at[b] += static_cast<int32_t>(value);
      }
    } else {
      for (int64_t b = swept.lo; b <= last; ++b, block += kc.block_stride) {
        slope += diff[b];
        value += slope;
        tiles[block] += static_cast<int32_t>(value);
      }
    }
    // Zeroed apart from the sweep (one store less per member); up to a fold's point 1, which may
    // lie past a single member.
    std::fill(diff + swept.lo, diff + swept.hi + 1, 0);
    if (swept.lo <= last) touched.add(kc.first_block + swept.lo * kc.block_stride, kc.first_block + last * kc.block_stride);
    swept = BlockRange{};
  }
  return touched;
}

void WorkCounter::begin_key_group() {
  const auto pairs = static_cast<size_t>(geo_.layout.ranks()) * static_cast<size_t>(geo_.layout.ranks());
  const auto k_blocks = static_cast<size_t>(geo_.k_blocks);
  key_group_begun_ = true;
  key_tiles_index_.clear();
  key_tiles_store_.clear();
  key_tiles_range_.clear();
  key_ids_.clear();
  if (shared_key_tiles_) return;
  if (key_tiles_.size() != pairs * k_blocks) {
    key_tiles_.assign(pairs * k_blocks, 0);
    key_range_.assign(pairs, BlockRange{});
    return;
  }
  // end_key_group leaves the counts zeroed; a group left unfinished (an error) is cleared here.
  for (size_t rp = 0; rp < pairs; ++rp) {
    BlockRange& touched = key_range_[rp];
    if (touched.empty()) continue;
    std::fill(key_tiles_.begin() + static_cast<std::ptrdiff_t>(rp * k_blocks + static_cast<size_t>(touched.lo)),
              key_tiles_.begin() + static_cast<std::ptrdiff_t>(rp * k_blocks + static_cast<size_t>(touched.hi) + 1), 0);
    touched = BlockRange{};
  }
}

void WorkCounter::end_shared_key_group(WorkMatrix& out) {
  // A rank pair's group counts are the sum of its heads' memoized counts: rank pairs with the same
  // memo entry for every head (with one segment per rank, those at the same offset) share them,
  // so each distinct tuple of entries is summed once.
  const int32_t ranks = geo_.layout.ranks();
  const auto pairs = static_cast<size_t>(ranks) * static_cast<size_t>(ranks);
  const auto k_blocks = static_cast<size_t>(geo_.k_blocks);
  const size_t heads = pairs == 0 ? 0 : key_ids_.size() / pairs;
  key_sum_.assign(k_blocks, 0);
  key_group_results_.clear();
  std::vector<int32_t> tuple(heads);
  size_t rank_pair = 0;
  for (int32_t q = 0; q < ranks; ++q) {
    for (int32_t kv = 0; kv < ranks; ++kv, ++rank_pair) {
      for (size_t h = 0; h < heads; ++h) tuple[h] = key_ids_[h * pairs + rank_pair];
      auto [it, inserted] = key_group_results_.try_emplace(tuple, std::pair<int64_t, int32_t>{0, 0});
      if (inserted) {
        BlockRange range;
        for (const int32_t id : tuple) {
          const BlockRange added = add_memoized_key_tiles(static_cast<size_t>(id), key_sum_.data());
          if (!added.empty()) range.add(added.lo, added.hi);
        }
        it->second = take_key_tiles(key_sum_.data(), range);
      }
      WorkCounts& cell = out.at(q, kv);
      cell.key_lists += it->second.first;
      cell.longest_key_list = std::max<int64_t>(cell.longest_key_list, it->second.second);
    }
  }
  key_ids_.clear();
}

void WorkCounter::end_key_group(WorkMatrix& out) {
  key_group_begun_ = false;
  if (shared_key_tiles_) {
    end_shared_key_group(out);
    return;
  }
  const int32_t ranks = geo_.layout.ranks();
  const auto k_blocks = static_cast<size_t>(geo_.k_blocks);
  size_t rank_pair = 0;
  for (int32_t q = 0; q < ranks; ++q) {
    for (int32_t kv = 0; kv < ranks; ++kv, ++rank_pair) {
      BlockRange& touched = key_range_[rank_pair];
      if (touched.empty()) continue;
      // Zeroed for the next group.
      const auto [listed, longest] = take_key_tiles(key_tiles_.data() + rank_pair * k_blocks, touched);
      touched = BlockRange{};
      WorkCounts& cell = out.at(q, kv);
      cell.key_lists += listed;
      cell.longest_key_list = std::max<int64_t>(cell.longest_key_list, longest);
    }
  }
}

void WorkCounter::accumulate_head(const KeptPattern& pattern, WorkMatrix& out) {
  begin_key_group();
  accumulate_group_head(pattern, out);
  end_key_group(out);
}

void WorkCounter::accumulate_group_head(const KeptPattern& pattern, WorkMatrix& out) {
  const int32_t ranks = geo_.layout.ranks();
  require(out.ranks() == ranks, "work matrix has ", out.ranks(), " ranks, the geometry ", ranks);
  require(key_group_begun_, "accumulate_group_head outside begin_key_group / end_key_group");
  prepare(pattern);
  start_key_head();
  for (int32_t q = 0; q < ranks; ++q) {
    for (int32_t kv = 0; kv < ranks; ++kv) out.at(q, kv) += count_pair(q, kv);
  }
}

void WorkCounter::count_dense_head(WorkMatrix& out) {
  const int32_t ranks = geo_.layout.ranks();
  out = WorkMatrix(ranks);
  RunSet all;
  all.append(0, geo_.layout.seq_len_tokens() - 1);
  prepare_runs(std::move(all), {});
  begin_key_group();
  start_key_head();
  for (int32_t q = 0; q < ranks; ++q) {
    for (int32_t kv = 0; kv < ranks; ++kv) out.at(q, kv) += count_pair(q, kv);
  }
  end_key_group(out);
}

void WorkCounter::count_head(const KeptPattern& pattern, WorkMatrix& out) {
  out = WorkMatrix(geo_.layout.ranks());
  accumulate_head(pattern, out);
}

WorkMatrix count_head_work(const BlockGeometry& geometry, const KeptPattern& pattern) {
  WorkCounter counter(geometry);
  WorkMatrix out;
  counter.count_head(pattern, out);
  return out;
}

}  // namespace sparsering
