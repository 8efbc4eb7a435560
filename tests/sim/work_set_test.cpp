// Work sets: per-layer, per-head-group sums of head work matrices, dense counting, micro batch
// scaling, counting on several threads, and trace-based pattern selection (sim/work/work_set.hpp,
// sim/work/pattern_set.hpp).
#include "sim/work/work_set.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "sim/work/work_counter.hpp"
#include "tests/sim/sim_test_inputs.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

TEST(WorkSetTest, GroupsSumTheirHeads) {
  const Trace trace = testing::small_trace(2, 4, 2048, 9);
  RecallSettings settings;
  settings.recall = 0.9;
  const PatternSet patterns = select_patterns(trace, 0, settings);
  ASSERT_EQ(patterns.patterns.size(), 8U);
  const BlockGeometry geo = make_block_geometry(make_token_layout(LayoutKind::striped, 2048, 4, 64), 64, 64);
  const WorkSet set = count_work_set(geo, patterns, 2, 3);
  for (int64_t l = 0; l < 2; ++l) {
    for (int64_t g = 0; g < 2; ++g) {
      WorkMatrix expected(4);
      for (int64_t h = 2 * g; h < 2 * g + 2; ++h) expected += count_head_work(geo, patterns.at(l, h));
      for (int32_t q = 0; q < 4; ++q) {
        for (int32_t kv = 0; kv < 4; ++kv) {
          EXPECT_EQ(set.at(l, g).at(q, kv).tiles, 3 * expected.at(q, kv).tiles);
          EXPECT_EQ(set.at(l, g).at(q, kv).column_chunks, 3 * expected.at(q, kv).column_chunks);
          EXPECT_EQ(set.at(l, g).at(q, kv).lists, 3 * expected.at(q, kv).lists);
        }
      }
    }
  }
  EXPECT_THROW(count_work_set(geo, patterns, 3, 1), InputError);
  EXPECT_THROW(select_patterns(trace, 1, settings), InputError);
}

TEST(WorkSetTest, KeyListsAreCountedOncePerKvHead) {
  // GQA: the heads sharing a K/V head share the backward's key lists (a union), the other counts
  // stay sums; a dense set scales one head's key lists by the K/V heads of the group.
  const Trace trace = testing::small_trace(1, 4, 2048, 9);
  RecallSettings settings;
  settings.recall = 0.9;
  PatternSet patterns = select_patterns(trace, 0, settings);
  const BlockGeometry geo = make_block_geometry(make_token_layout(LayoutKind::zigzag, 2048, 4), 64, 64);
  patterns.kv_group = 2;
  const WorkSet grouped = count_work_set(geo, patterns, 1, 1);
  const WorkSet alone = count_work_set(geo, patterns, 1, 1, 1, 1);
  WorkMatrix expected(4);
  for (int64_t kv = 0; kv < 2; ++kv) {
    WorkCounter counter(geo);
    WorkMatrix pair(4);
    counter.begin_key_group();
    for (int64_t h = 2 * kv; h < 2 * kv + 2; ++h) counter.accumulate_group_head(patterns.at(0, h), pair);
    counter.end_key_group(pair);
    expected += pair;
  }
  EXPECT_EQ(grouped.at(0, 0), expected);
  int64_t fewer = 0;
  for (int32_t q = 0; q < 4; ++q) {
    for (int32_t kv = 0; kv < 4; ++kv) {
      const WorkCounts& a = alone.at(0, 0).at(q, kv);
      const WorkCounts& g = grouped.at(0, 0).at(q, kv);
      EXPECT_EQ(a.tiles, g.tiles);
      EXPECT_EQ(a.lists, g.lists);
      EXPECT_LE(g.key_lists, a.key_lists);
      EXPECT_GE(2 * g.key_lists, a.key_lists);
      // A segment holds both heads' tiles: at least the longest of one head, at most twice.
      EXPECT_GE(g.longest_key_list, a.longest_key_list);
      EXPECT_LE(g.longest_key_list, 2 * a.longest_key_list);
      fewer += a.key_lists - g.key_lists;
    }
  }
  EXPECT_GT(fewer, 0) << "heads of a group list some key blocks in common";
  EXPECT_THROW(count_work_set(geo, patterns, 1, 1, 1, 3), InputError);

  const PatternSet dense = dense_patterns(1, 8, 2048);
  const WorkSet one_kv = count_work_set(geo, dense, 2, 1, 1, 8);   // both head groups inside one K/V head
  const WorkSet four_kv = count_work_set(geo, dense, 2, 1, 1, 2);  // two K/V heads per head group
  WorkMatrix head;
  WorkCounter(geo).count_dense_head(head);
  for (int64_t g = 0; g < 2; ++g) {
    EXPECT_EQ(one_kv.at(0, g).total().key_lists, head.total().key_lists);
    EXPECT_EQ(four_kv.at(0, g).total().key_lists, 2 * head.total().key_lists);
    EXPECT_EQ(four_kv.at(0, g).total().tiles, 4 * head.total().tiles);
    for (int32_t q = 0; q < 4; ++q) {
      for (int32_t kv = 0; kv < 4; ++kv) {
        // The 4 heads of a head group in one K/V head's segments; 2 heads in each of two.
        EXPECT_EQ(one_kv.at(0, g).at(q, kv).longest_key_list, 4 * head.at(q, kv).longest_key_list);
        EXPECT_EQ(four_kv.at(0, g).at(q, kv).longest_key_list, 2 * head.at(q, kv).longest_key_list);
      }
    }
  }
}

TEST(WorkSetTest, DenseShortcutCountsAsEveryHeadOfTheGroup) {
  // The dense shortcut (one head counted, then scaled) equals counting every head's every-offset
  // pattern in its K/V group, also where head groups cut K/V groups (6 heads, 3 per K/V head, head
  // groups of 2: the middle group holds one head of each of two K/V heads) and with a micro batch
  // (its sequences are separate segments: the longest is not multiplied).
  const int64_t n = 1024;
  for (const TokenLayout& layout : {make_token_layout(LayoutKind::zigzag, n, 2), make_token_layout(LayoutKind::striped, n, 4, 16),
                                    make_token_layout(LayoutKind::contiguous, n, 4)}) {
    const BlockGeometry geo = make_block_geometry(layout, 64, 32);
    PatternSet every = dense_patterns(1, 6, n);
    every.dense = false;
    KeptPattern all;
    for (int64_t d = 0; d < n; ++d) all.slash_offsets.push_back(d);
    every.patterns.assign(6, all);
    const WorkSet shortcut = count_work_set(geo, dense_patterns(1, 6, n), 3, 2, 1, 3);
    const WorkSet counted = count_work_set(geo, every, 3, 2, 1, 3);
    for (int64_t g = 0; g < 3; ++g) EXPECT_EQ(shortcut.at(0, g), counted.at(0, g)) << to_string(layout.kind()) << " " << g;
    WorkMatrix head;
    WorkCounter(geo).count_dense_head(head);
    EXPECT_EQ(shortcut.at(0, 1).total().longest_key_list, head.total().longest_key_list);
    EXPECT_EQ(shortcut.at(0, 0).total().longest_key_list, 2 * head.total().longest_key_list);
  }
}

TEST(WorkSetTest, OneHeadGroupWithAReusedCounter) {
  // count_head_group over head ranges that cut K/V groups (2 heads of a group of 4) and align with
  // them, one counter reused across layers and ranges, against key groups built by hand.
  const Trace trace = testing::small_trace(2, 8, 2048, 11);
  RecallSettings settings;
  settings.recall = 0.9;
  const PatternSet patterns = select_patterns(trace, 0, settings);
  const BlockGeometry geo = make_block_geometry(make_token_layout(LayoutKind::striped, 2048, 4, 64), 64, 64);
  WorkCounter reused(geo);
  for (int64_t l = 0; l < 2; ++l) {
    for (const auto& [first, heads] : std::vector<std::pair<int64_t, int64_t>>{{2, 2}, {0, 8}, {4, 4}, {6, 2}}) {
      WorkMatrix got(4);
      count_head_group(reused, patterns, l, first, heads, 4, 3, got);
      WorkMatrix expected(4);
      WorkCounter fresh(geo);
      for (int64_t kv_first = first; kv_first < first + heads;) {
        const int64_t kv_end = std::min(first + heads, (kv_first / 4 + 1) * 4);  // to the K/V group's end
        WorkMatrix part(4);
        fresh.begin_key_group();
        for (int64_t h = kv_first; h < kv_end; ++h) fresh.accumulate_group_head(patterns.at(l, h), part);
        fresh.end_key_group(part);
        expected += part;
        kv_first = kv_end;
      }
      for (int32_t q = 0; q < 4; ++q) {
        for (int32_t kv = 0; kv < 4; ++kv) {
          EXPECT_EQ(got.at(q, kv).tiles, 3 * expected.at(q, kv).tiles) << l << " " << first;
          EXPECT_EQ(got.at(q, kv).key_lists, 3 * expected.at(q, kv).key_lists) << l << " " << first;
          EXPECT_EQ(got.at(q, kv).longest_key_list, expected.at(q, kv).longest_key_list) << l << " " << first;
          EXPECT_EQ(got.at(q, kv).column_chunks, 3 * expected.at(q, kv).column_chunks) << l << " " << first;
        }
      }
    }
  }
}

TEST(WorkSetTest, DenseIsEveryCausalTile) {
  const BlockGeometry geo = make_block_geometry(make_token_layout(LayoutKind::zigzag, 1024, 2), 64, 64);
  const WorkSet set = count_work_set(geo, dense_patterns(1, 4, 1024), 1, 1);
  // 16 blocks of 64: the causal block triangle 16 x 17 / 2 = 136 tiles per head, 16 of them masked.
  EXPECT_EQ(set.at(0, 0).total().tiles, 4 * 136);
  EXPECT_EQ(set.at(0, 0).total().masked_tiles, 4 * 16);
  EXPECT_EQ(set.at(0, 0).total().columns, 0);
}

TEST(WorkSetTest, ThreadsChangeNothing) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  const int64_t n = 4096;
  PatternSet patterns;
  patterns.layers = 7;
  patterns.heads = 4;
  patterns.seq_len_tokens = n;
  std::uniform_int_distribution<int64_t> any(0, n - 1);
  for (int64_t k = 0; k < patterns.layers * patterns.heads; ++k) {
    KeptPattern p;
    for (int64_t d = 0; d < 40; ++d) p.slash_offsets.push_back(d);
    for (int j = 0; j < 30; ++j) p.slash_offsets.push_back(any(rng));
    for (int j = 0; j < 200; ++j) p.vertical_positions.push_back(any(rng));
    patterns.patterns.push_back(std::move(p));
  }
  for (const LayoutKind kind : {LayoutKind::striped, LayoutKind::zigzag}) {
    const BlockGeometry geo = make_block_geometry(make_token_layout(kind, n, 4, kind == LayoutKind::striped ? 32 : 0), 64, 64);
    const WorkSet one = count_work_set(geo, patterns, 2, 2);
    for (const int threads : {1, 2, 3, 16}) {
      const WorkSet many = count_work_set(geo, patterns, 2, 2, threads);
      ASSERT_EQ(many.matrices.size(), one.matrices.size());
      for (size_t k = 0; k < one.matrices.size(); ++k) EXPECT_EQ(many.matrices[k], one.matrices[k]) << threads;
    }
  }
  // A bad pattern in any layer fails the whole count, whichever thread met it.
  patterns.patterns[static_cast<size_t>(5 * 4 + 1)].vertical_positions.push_back(n + 3);
  const BlockGeometry geo = make_block_geometry(make_token_layout(LayoutKind::contiguous, n, 4), 64, 64);
  for (const int threads : {1, 3}) EXPECT_THROW(count_work_set(geo, patterns, 1, 1, threads), InputError);
  EXPECT_THROW(count_work_set(geo, patterns, 1, 1, 0), InputError);
}

}  // namespace
}  // namespace sparsering
