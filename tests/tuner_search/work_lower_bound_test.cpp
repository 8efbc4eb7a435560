// The work lower bound (tuner/search/work_lower_bound.hpp) against the simulator's exact work
// counter on fresh random patterns: tiles and lists equal where the bound says tiles are exact
// (tiles also through the rank-pair tables, which add up over heads and whose lists and keys
// never exceed the exact ones), key lists equal per head on contiguous layouts and fine stripes,
// and every cell's tiles, lists, key lists (per head, and of heads sharing a K/V head), chunks,
// columns and items never exceed the exact ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "common/error.hpp"
#include "sim/work/block_geometry.hpp"
#include "sim/work/work_counter.hpp"
#include "tuner/search/work_lower_bound.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

/// A random normalized pattern: a local window, scattered slashes, sinks, and columns that either
/// scatter or (heavy) crowd some ranks with more than a block of columns.
KeptPattern random_pattern(std::mt19937_64& rng, int64_t n, bool heavy) {
  KeptPattern p;
  std::uniform_int_distribution<int64_t> any(0, n - 1);
  const int64_t window = std::uniform_int_distribution<int64_t>(1, 200)(rng);
  for (int64_t d = 0; d < window && d < n; ++d) p.slash_offsets.push_back(d);
  const int64_t far = std::uniform_int_distribution<int64_t>(0, 40)(rng);
  for (int64_t k = 0; k < far; ++k) p.slash_offsets.push_back(any(rng));
  const int64_t sinks = std::uniform_int_distribution<int64_t>(0, 4)(rng);
  for (int64_t k = 0; k < sinks; ++k) p.vertical_positions.push_back(k);
  const int64_t columns = heavy ? std::uniform_int_distribution<int64_t>(100, 600)(rng)
                                : std::uniform_int_distribution<int64_t>(0, 60)(rng);
  for (int64_t k = 0; k < columns; ++k) p.vertical_positions.push_back(any(rng));
  return normalize_pattern(p, n);
}

std::vector<TokenLayout> layouts_for(int64_t n, int32_t w, int64_t block) {
  std::vector<TokenLayout> out;
  if (n % w == 0) out.push_back(make_token_layout(LayoutKind::contiguous, n, w));
  if (n % (2 * w) == 0) out.push_back(make_token_layout(LayoutKind::zigzag, n, w));
  for (const int64_t g : {block / 4, block / 2, block, 2 * block, 3 * block}) {
    if (g >= 1 && n % (g * w) == 0) out.push_back(make_token_layout(LayoutKind::striped, n, w, g));
  }
  return out;
}

TEST(WorkLowerBound, TouchedDiagonalsMatchBruteForce) {
  std::mt19937_64 rng(sparsering::testing_support::fixed_seed(7));
  for (int trial = 0; trial < 50; ++trial) {
    const KeptPattern p = random_pattern(rng, 3000, false);
    for (const int64_t unit : {1, 16, 64, 100}) {
      std::vector<int64_t> expected;
      for (int64_t d = 0; d * unit < 3000 + unit; ++d) {
        // Diagonal d of unit-blocks holds offsets (d-1) unit + 1 .. (d+1) unit - 1.
        bool touched = false;
        for (const int64_t off : p.slash_offsets) touched = touched || (off > (d - 1) * unit && off < (d + 1) * unit);
        if (touched) expected.push_back(d);
      }
      EXPECT_EQ(touched_diagonals(p, unit), expected) << "unit " << unit;
    }
  }
}

TEST(WorkLowerBound, NeverExceedsTheExactCountAndTilesAreExactWhenClaimed) {
  std::mt19937_64 rng(sparsering::testing_support::fixed_seed(2024));
  int64_t exact_layouts = 0;
  int64_t lists_bounded = 0;
  int64_t table_lists = 0;
  int64_t table_keys = 0;
  int64_t shared_keys = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int32_t w = std::uniform_int_distribution<int32_t>(1, 6)(rng);
    const int64_t block = std::vector<int64_t>{16, 32, 64}[static_cast<size_t>(trial % 3)];
    const int64_t n = int64_t{48} * block * w * std::uniform_int_distribution<int64_t>(1, 2)(rng);
    const bool heavy = trial % 2 == 1;
    std::vector<KeptPattern> patterns;
    for (int h = 0; h < 3; ++h) patterns.push_back(random_pattern(rng, n, heavy));
    std::vector<const KeptPattern*> heads;
    for (const KeptPattern& p : patterns) heads.push_back(&p);
    for (const TokenLayout& layout : layouts_for(n, w, block)) {
      const BlockGeometry geometry = make_block_geometry(layout, block, block);
      WorkCounter counter(geometry);
      WorkMatrix exact(w);
      for (const KeptPattern& p : patterns) counter.accumulate_head(p, exact);
      // The same heads sharing one K/V head: their key lists are the union of theirs.
      WorkMatrix shared(w);
      counter.begin_key_group();
      for (const KeptPattern& p : patterns) counter.accumulate_group_head(p, shared);
      counter.end_key_group(shared);
      const bool exact_tiles = exact_tile_count(layout, block);
      // Key lists are exact per head where a unit diagonal lists as many keys as rows.
      const bool exact_keys = exact_tiles && (layout.kind() == LayoutKind::contiguous ||
                                              (layout.kind() == LayoutKind::striped && layout.granularity_tokens() < block));
      exact_layouts += exact_tiles ? 1 : 0;
      const RankPairTiles table = rank_pair_tiles(heads, layout, block);
      EXPECT_EQ(table.form != RankPairTiles::Form::none, exact_tiles) << to_string(layout.kind());
      EXPECT_EQ(table.form == RankPairTiles::Form::zigzag, exact_tiles && layout.kind() == LayoutKind::zigzag);
      if (table.form != RankPairTiles::Form::none) {
        // The group's table is the sum of its heads' tables.
        RankPairTiles summed = rank_pair_tiles({heads[0]}, layout, block);
        for (size_t h = 1; h < heads.size(); ++h) summed += rank_pair_tiles({heads[h]}, layout, block);
        EXPECT_EQ(summed.table, table.table);
        EXPECT_EQ(summed.lists, table.lists);
        for (int32_t q = 0; q < w; ++q) {
          for (int32_t kv = 0; kv < w; ++kv) {
            ASSERT_EQ(table.at(q, kv), exact.at(q, kv).tiles) << to_string(layout.kind());
            // The table's lists count rows with a tile: never above the exact lists, and only
            // where the cell has tiles (its kernel time is 0 without them).
            ASSERT_LE(table.lists_at(q, kv), exact.at(q, kv).lists)
                << to_string(layout.kind()) << " G=" << layout.granularity_tokens() << " W=" << w << " cell " << q << "," << kv;
            ASSERT_TRUE(table.lists_at(q, kv) == 0 || table.at(q, kv) > 0);
            table_lists += table.lists_at(q, kv);
            ASSERT_LE(table.keys_at(q, kv), exact.at(q, kv).key_lists)
                << to_string(layout.kind()) << " G=" << layout.granularity_tokens() << " W=" << w << " cell " << q << "," << kv;
            ASSERT_TRUE(table.keys_at(q, kv) == 0 || table.at(q, kv) > 0);
            if (exact_keys) {
              ASSERT_EQ(table.keys_at(q, kv), exact.at(q, kv).key_lists) << to_string(layout.kind());
            }
            table_keys += table.keys_at(q, kv);
          }
        }
      }
      for (const ColumnBound columns : {ColumnBound::none, ColumnBound::representative, ColumnBound::dense}) {
        const bool dense = columns == ColumnBound::dense;
        const WorkMatrix bound = work_lower_bound(heads, layout, block, {}, columns);
        ASSERT_EQ(bound.ranks(), w);
        for (int32_t q = 0; q < w; ++q) {
          for (int32_t kv = 0; kv < w; ++kv) {
            const WorkCounts& e = exact.at(q, kv);
            const WorkCounts& b = bound.at(q, kv);
            ASSERT_LE(b.tiles, e.tiles) << to_string(layout.kind()) << " G=" << layout.granularity_tokens() << " W=" << w;
            ASSERT_LE(b.column_chunks, e.column_chunks)
                << to_string(layout.kind()) << " G=" << layout.granularity_tokens() << " W=" << w << " b=" << block
                << " cell " << q << "," << kv << " dense " << dense;
            ASSERT_GE(b.column_chunks, 0);
            ASSERT_LE(b.lists, e.lists) << to_string(layout.kind()) << " G=" << layout.granularity_tokens() << " W=" << w
                                        << " cell " << q << "," << kv;
            lists_bounded += b.lists;
            ASSERT_LE(b.lists, e.lists) << "a list bound above the exact count would charge lists never run";
            ASSERT_LE(b.key_lists, e.key_lists) << to_string(layout.kind()) << " G=" << layout.granularity_tokens()
                                                << " W=" << w << " cell " << q << "," << kv;
            ASSERT_LE(b.columns, e.columns);
            ASSERT_LE(b.column_items, e.column_items);
            ASSERT_LE(b.longest_key_list, e.longest_key_list);
            if (exact_keys) {
              ASSERT_EQ(b.key_lists, e.key_lists) << to_string(layout.kind());
            }
            if (exact_tiles) {
              ASSERT_EQ(b.tiles, e.tiles) << to_string(layout.kind()) << " G=" << layout.granularity_tokens();
              ASSERT_EQ(b.lists, e.lists) << to_string(layout.kind()) << " G=" << layout.granularity_tokens()
                                          << " W=" << w << " b=" << block << " cell " << q << "," << kv;
            }
          }
        }
        // The three heads as one K/V head: at least the most any of them lists, at most the union.
        const WorkMatrix grouped = work_lower_bound(heads, layout, block, {}, columns, BackwardTerms{.key_group = 3});
        for (int32_t q = 0; q < w; ++q) {
          for (int32_t kv = 0; kv < w; ++kv) {
            ASSERT_LE(grouped.at(q, kv).key_lists, shared.at(q, kv).key_lists)
                << to_string(layout.kind()) << " G=" << layout.granularity_tokens() << " W=" << w << " cell " << q << "," << kv;
            shared_keys += grouped.at(q, kv).key_lists;
          }
        }
      }
    }
  }
  EXPECT_GT(exact_layouts, 100);
  EXPECT_GT(lists_bounded, 0);
  EXPECT_GT(table_lists, 0);
  EXPECT_GT(table_keys, 0);
  EXPECT_GT(shared_keys, 0);
}

TEST(WorkLowerBound, TheDenseColumnPartOnlyAdds) {
  std::mt19937_64 rng(sparsering::testing_support::fixed_seed(99));
  const int64_t n = 64 * 64 * 4;
  std::vector<KeptPattern> patterns;
  for (int h = 0; h < 4; ++h) patterns.push_back(random_pattern(rng, n, true));
  std::vector<const KeptPattern*> heads;
  for (const KeptPattern& p : patterns) heads.push_back(&p);
  for (const TokenLayout& layout : layouts_for(n, 4, 64)) {
    const WorkMatrix weak = work_lower_bound(heads, layout, 64, {}, ColumnBound::representative);
    const WorkMatrix strong = work_lower_bound(heads, layout, 64, {}, ColumnBound::dense);
    int64_t gained = 0;
    for (int32_t q = 0; q < 4; ++q) {
      for (int32_t kv = 0; kv < 4; ++kv) {
        EXPECT_GE(strong.at(q, kv).column_chunks, weak.at(q, kv).column_chunks);
        gained += strong.at(q, kv).column_chunks - weak.at(q, kv).column_chunks;
      }
    }
    if (layout.kind() == LayoutKind::contiguous) {
      EXPECT_GT(gained, 0);
    }
  }
}

TEST(WorkLowerBound, ExactTileCasesAndRejects) {
  EXPECT_TRUE(exact_tile_count(make_token_layout(LayoutKind::contiguous, 4096, 4), 64));
  EXPECT_FALSE(exact_tile_count(make_token_layout(LayoutKind::contiguous, 4096 + 64 * 4 * 0 + 96 * 4, 4), 64));
  EXPECT_TRUE(exact_tile_count(make_token_layout(LayoutKind::zigzag, 4096, 4), 64));
  EXPECT_TRUE(exact_tile_count(make_token_layout(LayoutKind::striped, 4096, 4, 128), 64));
  EXPECT_TRUE(exact_tile_count(make_token_layout(LayoutKind::striped, 4096, 4, 32), 64));
  EXPECT_FALSE(exact_tile_count(make_token_layout(LayoutKind::striped, 4096 * 3, 4, 96), 64));
  const KeptPattern p = normalize_pattern(KeptPattern{{0, 5}, {1}}, 4096);
  EXPECT_THROW(work_lower_bound({&p}, make_token_layout(LayoutKind::contiguous, 4096, 4), 0), InputError);
  EXPECT_THROW(work_lower_bound({&p}, make_token_layout(LayoutKind::contiguous, 4096, 4), 64, {nullptr, nullptr}),
               InputError);
}

}  // namespace
}  // namespace sparsering

namespace sparsering {
namespace {

TEST(WorkLowerBound, RowSumsEqualTheCellsSummed) {
  // Random tables of both closed forms, including zeros (cells without tiles).
  std::mt19937_64 rng = testing_support::test_rng();
  std::uniform_int_distribution<int64_t> value(0, 50);
  std::bernoulli_distribution zero(0.3);
  for (const RankPairTiles::Form form : {RankPairTiles::Form::offset, RankPairTiles::Form::zigzag}) {
    for (const int32_t w : {1, 2, 3, 8, 17}) {
      RankPairTiles t;
      t.form = form;
      t.ranks = w;
      const size_t entries = form == RankPairTiles::Form::zigzag ? static_cast<size_t>(2 * w) : static_cast<size_t>(2 * w - 1);
      for (std::vector<int64_t>* v : {&t.table, &t.lists, &t.keys}) {
        v->resize(entries);
        for (int64_t& x : *v) x = zero(rng) ? 0 : value(rng);
      }
      for (int32_t q = 0; q < w; ++q) {
        RankPairTiles::RowSums expected;
        for (int32_t kv = 0; kv < w; ++kv) {
          expected.tiles += t.at(q, kv);
          expected.cells_with_tiles += t.at(q, kv) > 0 ? 1 : 0;
          expected.lists += t.lists_at(q, kv);
          expected.keys += t.keys_at(q, kv);
        }
        const RankPairTiles::RowSums got = t.row_sums(q);
        EXPECT_EQ(got.tiles, expected.tiles) << "W " << w << " q " << q;
        EXPECT_EQ(got.cells_with_tiles, expected.cells_with_tiles) << "W " << w << " q " << q;
        EXPECT_EQ(got.lists, expected.lists) << "W " << w << " q " << q;
        EXPECT_EQ(got.keys, expected.keys) << "W " << w << " q " << q;
      }
    }
  }
}

}  // namespace
}  // namespace sparsering
