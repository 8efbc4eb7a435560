// The simulator's analytic work counter equals the kernels' index builder (kernels/index/) for
// every layout, stripe granularity, block shape and ring pair, on fresh random patterns: the
// design rule that the simulator and the kernels agree exactly (docs/architecture.md, Units and invariants). Sizes here
// are larger than the token-level brute force of work_counter_test.cpp can reach. Non-empty lists
// are compared with the lists of the materialised index (build_sparse_index), on random patterns
// and on the odd ones: nothing kept, columns only, slashes only, every offset kept (dense). The
// backward's key-block segments (key_lists, longest_key_list) are compared with the index's tiles
// regrouped by (K/V row, key block), as its transposition regroups them, also for GQA groups.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "kernels/index/build_sparse_index.hpp"
#include "kernels/index/count_sparse_index.hpp"
#include "kernels/index/row_pattern.hpp"
#include "kernels/index/step_geometry.hpp"
#include "sim/work/work_counter.hpp"
#include "tests/sim/work_oracle.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

KeptPattern random_pattern(std::mt19937_64& rng, int64_t n) {
  KeptPattern p;
  std::uniform_int_distribution<int64_t> any(0, n - 1);
  const int64_t window = static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(1, n / 8)));
  for (int64_t d = 0; d < window; ++d) p.slash_offsets.push_back(d);
  const auto far = static_cast<int64_t>(rng() % 64);
  for (int64_t k = 0; k < far; ++k) p.slash_offsets.push_back(static_cast<int64_t>(std::pow(static_cast<double>(n), static_cast<double>(rng() % 1000) / 1000.0)) % n);
  const auto sinks = static_cast<int64_t>(rng() % 70);
  for (int64_t v = 0; v < std::min(sinks, n); ++v) p.vertical_positions.push_back(v);
  const auto verticals = static_cast<int64_t>(rng() % 200);
  for (int64_t k = 0; k < verticals; ++k) p.vertical_positions.push_back(any(rng));
  return p;
}

/// (row, query block) lists of a materialised index with at least one tile or column.
int64_t non_empty_lists(const SparseIndex& index) {
  int64_t lists = 0;
  for (size_t list = 0; list + 1 < index.tile_offsets.size(); ++list) {
    const bool tiles = index.tile_offsets[list + 1] > index.tile_offsets[list];
    const bool columns = index.column_offsets[list + 1] > index.column_offsets[list];
    lists += (tiles || columns) ? 1 : 0;
  }
  return lists;
}

/// A random layout of about `max_tokens` tokens: kind, ring size and stripe from the given choices.
TokenLayout random_layout(std::mt19937_64& rng, int32_t max_ranks, std::span<const int64_t> granularities,
                          int64_t max_tokens) {
  const int32_t w = 1 + static_cast<int32_t>(rng() % static_cast<uint64_t>(max_ranks));
  const auto kind = static_cast<LayoutKind>(rng() % 3);
  int64_t g = 0;
  int64_t unit = kind == LayoutKind::zigzag ? 2 * w : w;
  if (kind == LayoutKind::striped) {
    g = granularities[rng() % granularities.size()];
    unit = g * w;
  }
  const int64_t n = unit * (1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(1, max_tokens / unit))));
  return make_token_layout(kind, n, w, g);
}

std::string describe(const TokenLayout& layout, int32_t block_q, int32_t block_k) {
  return str(to_string(layout.kind()), " N=", layout.seq_len_tokens(), " W=", layout.ranks(), " G=",
             layout.granularity_tokens(), " bq=", block_q, " bk=", block_k);
}

/// Asserts that every cell's lists equal the non-empty lists of the index the builder makes for
/// that (rank, K/V chunk) from `pattern`.
void expect_lists_equal_index(const TokenLayout& layout, int32_t block_q, int32_t block_k, const KeptPattern& pattern,
                              const WorkMatrix& counted) {
  const PreparedRowPattern row =
      prepare_row_pattern(pattern.slash_offsets, pattern.vertical_positions, layout.seq_len_tokens());
  for (int32_t r = 0; r < layout.ranks(); ++r) {
    for (int32_t src = 0; src < layout.ranks(); ++src) {
      const StepGeometry step(IndexGeometry{RingPosition{layout, r, src}, block_q, block_k});
      const SparseIndex index = build_sparse_index(step, std::span<const PreparedRowPattern>(&row, 1));
      ASSERT_EQ(counted.at(r, src).lists, non_empty_lists(index))
          << describe(layout, block_q, block_k) << " r=" << r << " src=" << src << " slashes "
          << pattern.slash_offsets.size() << " verticals " << pattern.vertical_positions.size();
      // The backward's units of the same index (one head: its own GQA group).
      const BackwardUnits units = backward_units(index, 1);
      ASSERT_EQ(counted.at(r, src).key_lists, units.key_lists) << describe(layout, block_q, block_k) << " r=" << r << " src=" << src;
      ASSERT_EQ(counted.at(r, src).column_lists, units.column_lists) << describe(layout, block_q, block_k) << " r=" << r;
      ASSERT_EQ(counted.at(r, src).column_items, units.column_items) << describe(layout, block_q, block_k) << " r=" << r;
      ASSERT_EQ(counted.at(r, src).longest_key_list, units.longest_key_list)
          << describe(layout, block_q, block_k) << " r=" << r << " src=" << src;
    }
  }
}

TEST(WorkCounterIndexTest, EqualsIndexBuilderCounts) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  const int32_t blocks[] = {16, 32, 48, 64, 128};
  const int64_t granularities[] = {1, 8, 16, 24, 64, 128, 256};
  for (int trial = 0; trial < 60; ++trial) {
    const TokenLayout layout = random_layout(rng, 8, granularities, 6000);
    const int32_t w = layout.ranks();
    const int64_t n = layout.seq_len_tokens();
    const int32_t block_q = blocks[rng() % 5];
    const int32_t block_k = blocks[rng() % 5];
    const KeptPattern pattern = random_pattern(rng, n);
    const BlockGeometry geo = make_block_geometry(layout, block_q, block_k);
    const WorkMatrix fast = count_head_work(geo, pattern);
    const PreparedRowPattern row = prepare_row_pattern(pattern.slash_offsets, pattern.vertical_positions, n);
    for (int32_t r = 0; r < w; ++r) {
      for (int32_t src = 0; src < w; ++src) {
        const StepGeometry step(IndexGeometry{RingPosition{layout, r, src}, block_q, block_k});
        const IndexWork expected = count_sparse_index(step, row);
        const WorkCounts& got = fast.at(r, src);
        const std::string where = str(describe(layout, block_q, block_k), " r=", r, " src=", src);
        if (!(got.tiles == expected.tiles && got.masked_tiles == expected.masked_tiles && got.columns == expected.columns &&
              got.column_chunks == expected.column_chunks)) {
          // Say which side the token-level brute force agrees with.
          const WorkCounts truth = testing::brute_force_work(layout, block_q, block_k, pattern).at(r, src);
          ADD_FAILURE() << where << ": brute force tiles " << truth.tiles << " masked " << truth.masked_tiles << " columns "
                        << truth.columns << " chunks " << truth.column_chunks;
        }
        ASSERT_EQ(got.tiles, expected.tiles) << where;
        ASSERT_EQ(got.masked_tiles, expected.masked_tiles) << where;
        ASSERT_EQ(got.columns, expected.columns) << where;
        ASSERT_EQ(got.column_chunks, expected.column_chunks) << where;
      }
    }
    expect_lists_equal_index(layout, block_q, block_k, pattern, fast);
    if (HasFatalFailure()) return;
  }
}

TEST(WorkCounterIndexTest, ListsEqualIndexBuilderOnOddPatterns) {
  // Kernel block sizes (64 and 128) on every layout, stripes of one token up to several blocks,
  // rings of 1 to 8, with patterns that leave whole query blocks empty in different ways.
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  const int64_t granularities[] = {1, 16, 64, 128, 192, 256};
  for (int trial = 0; trial < 40; ++trial) {
    const TokenLayout layout = random_layout(rng, 8, granularities, 8192);
    const int64_t n = layout.seq_len_tokens();
    const int32_t block_q = (rng() % 2) ? 64 : 128;
    const int32_t block_k = (rng() % 2) ? 64 : 128;
    const BlockGeometry geo = make_block_geometry(layout, block_q, block_k);
    std::uniform_int_distribution<int64_t> any(0, n - 1);
    KeptPattern nothing;  // offset 0 only: the diagonal of the own chunk
    KeptPattern columns_only;
    KeptPattern slashes_only;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 6); ++k) columns_only.vertical_positions.push_back(any(rng));
    for (int k = 0; k < 1 + static_cast<int>(rng() % 6); ++k) slashes_only.slash_offsets.push_back(any(rng));
    for (const KeptPattern* pattern : {&nothing, &columns_only, &slashes_only}) {
      expect_lists_equal_index(layout, block_q, block_k, *pattern, count_head_work(geo, *pattern));
      if (HasFatalFailure()) return;
    }
    KeptPattern every_offset;
    for (int64_t d = 0; d < n; ++d) every_offset.slash_offsets.push_back(d);
    WorkMatrix dense;
    WorkCounter(geo).count_dense_head(dense);
    expect_lists_equal_index(layout, block_q, block_k, every_offset, dense);
    if (HasFatalFailure()) return;
  }
}

TEST(WorkCounterIndexTest, KeySegmentsOfGqaGroupsEqualIndexBuilder) {
  // The query heads of one K/V head are consecutive rows of the index; the backward's key-block
  // pass has one segment per (K/V row, key block) holding every tile of the group's rows there.
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  const int32_t blocks[] = {16, 32, 48, 64, 128};
  const int64_t granularities[] = {1, 8, 16, 24, 64, 128, 256};
  for (int trial = 0; trial < 40; ++trial) {
    const TokenLayout layout = random_layout(rng, 8, granularities, 6000);
    const int64_t n = layout.seq_len_tokens();
    const int32_t block_q = blocks[rng() % 5];
    const int32_t block_k = blocks[rng() % 5];
    const int32_t group = 1 + static_cast<int32_t>(rng() % 4);
    const BlockGeometry geo = make_block_geometry(layout, block_q, block_k);
    WorkCounter counter(geo);
    WorkMatrix counted(layout.ranks());
    std::vector<PreparedRowPattern> rows;
    counter.begin_key_group();
    for (int32_t h = 0; h < group; ++h) {
      KeptPattern pattern;
      if (rng() % 4 == 0) {
        for (int64_t d = 0; d < n; ++d) pattern.slash_offsets.push_back(d);  // a dense head in the group
      } else {
        pattern = random_pattern(rng, n);
      }
      counter.accumulate_group_head(pattern, counted);
      rows.push_back(prepare_row_pattern(pattern.slash_offsets, pattern.vertical_positions, n));
    }
    counter.end_key_group(counted);
    for (int32_t r = 0; r < layout.ranks(); ++r) {
      for (int32_t src = 0; src < layout.ranks(); ++src) {
        const StepGeometry step(IndexGeometry{RingPosition{layout, r, src}, block_q, block_k});
        const SparseIndex index = build_sparse_index(step, std::span<const PreparedRowPattern>(rows));
        const std::string where = str(describe(layout, block_q, block_k), " group=", group, " r=", r, " src=", src);
        const BackwardUnits units = backward_units(index, group);
        ASSERT_EQ(counted.at(r, src).key_lists, units.key_lists) << where;
        ASSERT_EQ(counted.at(r, src).longest_key_list, units.longest_key_list) << where;
        ASSERT_EQ(counted.at(r, src).tiles, index.tiles()) << where;
      }
    }
  }
}

}  // namespace
}  // namespace sparsering
