// The analytic work counter equals token-level brute force (tests/sim/work_oracle.hpp) on fresh
// random patterns for every layout, stripe granularity, ring pair, block shape (including
// partial blocks and blocks straddling zigzag halves), on patterns that leave lists empty
// (nothing kept, columns only, slashes only) and dense heads, and on hand-derived closed forms.
#include "sim/work/work_counter.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "common/error.hpp"
#include "tests/sim/work_oracle.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

KeptPattern random_pattern(std::mt19937_64& rng, int64_t n) {
  KeptPattern p;
  std::uniform_int_distribution<int64_t> any(0, n - 1);
  const int style = static_cast<int>(rng() % 4);
  const uint64_t window_cap = (rng() % 5 == 0) ? static_cast<uint64_t>(n) : 12;
  const int64_t window = static_cast<int64_t>(rng() % window_cap);
  for (int64_t d = 0; d < std::min(window, n); ++d) p.slash_offsets.push_back(d);  // local window
  const int64_t far = style == 0 ? 0 : static_cast<int64_t>(rng() % static_cast<uint64_t>(style == 3 ? n : 6));
  for (int64_t k = 0; k < far; ++k) p.slash_offsets.push_back(any(rng));
  const int64_t sinks = static_cast<int64_t>(rng() % 5);
  for (int64_t v = 0; v < sinks && v < n; ++v) p.vertical_positions.push_back(v);
  const int64_t verticals = static_cast<int64_t>(rng() % static_cast<uint64_t>(style == 2 ? n : 10));
  for (int64_t k = 0; k < verticals; ++k) p.vertical_positions.push_back(any(rng));
  std::shuffle(p.slash_offsets.begin(), p.slash_offsets.end(), rng);  // the counter must not rely on order
  return p;
}

std::string describe(const TokenLayout& layout, int64_t bq, int64_t bk) {
  return str(to_string(layout.kind()), " N=", layout.seq_len_tokens(), " W=", layout.ranks(), " G=",
             layout.granularity_tokens(), " bq=", bq, " bk=", bk);
}

void expect_matches_brute_force(const TokenLayout& layout, int64_t bq, int64_t bk, const KeptPattern& pattern,
                                int64_t column_item = 64) {
  BlockGeometry geo = make_block_geometry(layout, bq, bk);
  geo.column_item = column_item;
  const WorkMatrix fast = count_head_work(geo, pattern);
  const WorkMatrix slow = testing::brute_force_work(layout, bq, bk, pattern, column_item);
  for (int32_t r = 0; r < layout.ranks(); ++r) {
    for (int32_t src = 0; src < layout.ranks(); ++src) {
      const WorkCounts& a = fast.at(r, src);
      const WorkCounts& b = slow.at(r, src);
      ASSERT_EQ(a.tiles, b.tiles) << describe(layout, bq, bk) << " r=" << r << " src=" << src;
      ASSERT_EQ(a.masked_tiles, b.masked_tiles) << describe(layout, bq, bk) << " r=" << r << " src=" << src;
      ASSERT_EQ(a.columns, b.columns) << describe(layout, bq, bk) << " r=" << r << " src=" << src;
      ASSERT_EQ(a.column_chunks, b.column_chunks) << describe(layout, bq, bk) << " r=" << r << " src=" << src;
      ASSERT_EQ(a.lists, b.lists) << describe(layout, bq, bk) << " r=" << r << " src=" << src;
      ASSERT_EQ(a.key_lists, b.key_lists) << describe(layout, bq, bk) << " r=" << r << " src=" << src;
      ASSERT_EQ(a.column_lists, b.column_lists) << describe(layout, bq, bk) << " r=" << r << " src=" << src;
      ASSERT_EQ(a.column_items, b.column_items)
          << describe(layout, bq, bk) << " item=" << column_item << " r=" << r << " src=" << src;
      ASSERT_EQ(a.longest_key_list, b.longest_key_list) << describe(layout, bq, bk) << " r=" << r << " src=" << src;
    }
  }
}

/// A random small layout (every kind, rings of 1 to 5, stripes of 1 to 16 tokens) of at most
/// about 160 tokens, so the token-level brute force stays cheap.
TokenLayout random_small_layout(std::mt19937_64& rng) {
  const int32_t w = 1 + static_cast<int32_t>(rng() % 5);
  const auto kind = static_cast<LayoutKind>(rng() % 3);
  int64_t g = 0;
  int64_t unit = kind == LayoutKind::zigzag ? 2 * w : w;
  if (kind == LayoutKind::striped) {
    const int64_t gs[] = {1, 2, 3, 4, 6, 8, 16};
    g = gs[rng() % 7];
    unit = g * w;
  }
  const int64_t n = unit * (1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(1, 160 / unit))));
  return make_token_layout(kind, n, w, g);
}

TEST(WorkCounterTest, MatchesBruteForceOnRandomLayoutsAndPatterns) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  const int64_t blocks[] = {1, 2, 3, 4, 5, 8, 16};
  for (int trial = 0; trial < 400; ++trial) {
    const TokenLayout layout = random_small_layout(rng);
    const int64_t bq = blocks[rng() % 7];
    const int64_t bk = blocks[rng() % 7];
    const int64_t items[] = {1, 2, 3, 4, 64};
    expect_matches_brute_force(layout, bq, bk, random_pattern(rng, layout.seq_len_tokens()), items[rng() % 5]);
    if (HasFatalFailure()) return;
  }
}

TEST(WorkCounterTest, MatchesBruteForceOnPatternsThatLeaveListsEmpty) {
  // Few kept items leave most (query block, chunk) lists empty, each kind in its own way; a dense
  // head lists every block with a causal pair.
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  const int64_t blocks[] = {1, 2, 3, 4, 5, 8, 16};
  for (int trial = 0; trial < 150; ++trial) {
    const TokenLayout layout = random_small_layout(rng);
    const int64_t n = layout.seq_len_tokens();
    const int64_t bq = blocks[rng() % 7];
    const int64_t bk = blocks[rng() % 7];
    std::uniform_int_distribution<int64_t> any(0, n - 1);
    KeptPattern nothing;  // offset 0 only
    KeptPattern columns_only;
    KeptPattern slashes_only;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) columns_only.vertical_positions.push_back(any(rng));
    for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) slashes_only.slash_offsets.push_back(any(rng));
    for (const KeptPattern* pattern : {&nothing, &columns_only, &slashes_only}) {
      expect_matches_brute_force(layout, bq, bk, *pattern);
      if (HasFatalFailure()) return;
    }
    KeptPattern every_offset;
    for (int64_t d = 0; d < n; ++d) every_offset.slash_offsets.push_back(d);
    WorkMatrix dense;
    WorkCounter(make_block_geometry(layout, bq, bk)).count_dense_head(dense);
    EXPECT_EQ(dense, testing::brute_force_work(layout, bq, bk, every_offset)) << describe(layout, bq, bk);
    if (HasFailure()) return;
  }
}

TEST(WorkCounterTest, MatchesBruteForceOnKernelShapes) {
  // Block sizes as the kernel uses them (64/128 rows, 64 columns) scaled down by 16 so the
  // brute force stays small, with stripes equal to, finer and coarser than the blocks.
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  for (int trial = 0; trial < 60; ++trial) {
    const int32_t w = 1 << (rng() % 3);
    const int64_t bq = (rng() % 2) ? 4 : 8;
    const int64_t bk = 4;
    const int64_t gs[] = {1, 2, 4, 8, 16};
    const int64_t g = gs[rng() % 5];
    const int64_t n = 256;
    for (const TokenLayout& layout : {make_token_layout(LayoutKind::contiguous, n, w),
                                      make_token_layout(LayoutKind::zigzag, n, w),
                                      make_token_layout(LayoutKind::striped, n, w, g)}) {
      expect_matches_brute_force(layout, bq, bk, random_pattern(rng, n), (rng() % 2) ? 4 : 2);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(WorkCounterTest, DenseCausalClosedForm) {
  // Every offset kept: each rank computes the causal part of every chunk. With B-token blocks,
  // a contiguous layout gives rank r on its own chunk nb(nb+1)/2 tiles (nb of them masked) and
  // nb^2 unmasked tiles on every earlier chunk; the diagonal tiles of later chunks never appear.
  const int64_t n = 512;
  const int32_t w = 4;
  const int64_t b = 16;
  const int64_t nb = n / w / b;
  KeptPattern dense;
  for (int64_t d = 0; d < n; ++d) dense.slash_offsets.push_back(d);
  const WorkMatrix work = count_head_work(make_block_geometry(make_token_layout(LayoutKind::contiguous, n, w), b, b), dense);
  for (int32_t r = 0; r < w; ++r) {
    for (int32_t src = 0; src < w; ++src) {
      const WorkCounts& c = work.at(r, src);
      if (src == r) {
        EXPECT_EQ(c.tiles, nb * (nb + 1) / 2);
        EXPECT_EQ(c.masked_tiles, nb);
        EXPECT_EQ(c.lists, nb);
      } else if (src < r) {
        EXPECT_EQ(c.tiles, nb * nb);
        EXPECT_EQ(c.masked_tiles, 0);
        EXPECT_EQ(c.lists, nb);
      } else {
        EXPECT_EQ(c.tiles, 0);
        EXPECT_EQ(c.lists, 0);
      }
    }
  }
}

TEST(WorkCounterTest, StripedBlockDiagonalIdentity) {
  // Striped with G = block size: at step s every rank computes exactly the block diagonals
  // Delta = s (mod W) (docs/algorithm.md section 4). One kept offset d = 5B + 3 crosses the block
  // diagonals floor(d/B) = 5 and ceil(d/B) = 6, which with W = 4 live at steps 1 and 2. At step s
  // rank r >= s holds chunk r - s and meets Delta as local diagonal i - j = (Delta - s) / W;
  // rank r < s holds chunk r - s + W and meets it as i - j = (Delta - s + W) / W. A local
  // diagonal i - j = m has nb - m tiles.
  const int64_t n = 1024;
  const int32_t w = 4;
  const int64_t b = 16;
  const int64_t nb = n / w / b;  // 16 local blocks
  KeptPattern p;
  p.slash_offsets = {5 * b + 3};
  const WorkMatrix work = count_head_work(make_block_geometry(make_token_layout(LayoutKind::striped, n, w, b), b, b), p);
  for (int32_t r = 0; r < w; ++r) {
    for (int32_t s = 0; s < w; ++s) {
      const int32_t src = kv_source_rank(r, s, w);
      int64_t expected = 0;
      if (s == 0) expected = nb;  // the diagonal (offset 0 is always kept)
      if (s == 1 || s == 2) expected = (r >= s) ? nb - 1 : nb - 2;
      EXPECT_EQ(work.at(r, src).tiles, expected) << "r=" << r << " s=" << s;
      // One tile per listed query block: the diagonal lists every block; a block diagonal m
      // lists the nb - m blocks i >= m.
      EXPECT_EQ(work.at(r, src).lists, expected) << "r=" << r << " s=" << s;
    }
  }
}

TEST(WorkCounterTest, ListsOfOneFarSlashAndOneColumnByHand) {
  // One rank of 4 blocks of 8 tokens (positions 0..31). Slash offset 17 reaches from query block
  // i to key blocks i - 2 and i - 3 (17 = 2 x 8 + 1), so blocks 2 and 3 list tiles there; the
  // diagonal lists every block anyway. Two ranks instead: the rank-1 queries (16..31) against the
  // rank-0 chunk (0..15) meet offset 17 from block 0 (16..23: keys 0..6) and block 1 (24..31:
  // keys 7..14), and the column at key 3 is seen by both; rank 0 never sees rank 1's chunk.
  KeptPattern far;
  far.slash_offsets = {17};
  const WorkMatrix one = count_head_work(make_block_geometry(make_token_layout(LayoutKind::contiguous, 32, 1), 8, 8), far);
  EXPECT_EQ(one.at(0, 0).lists, 4);
  const WorkMatrix two = count_head_work(make_block_geometry(make_token_layout(LayoutKind::contiguous, 32, 2), 8, 8), far);
  EXPECT_EQ(two.at(1, 0).lists, 2);
  EXPECT_EQ(two.at(0, 1).lists, 0);
  EXPECT_EQ(two.at(0, 0).lists, 2);
  KeptPattern column;
  column.vertical_positions = {3};
  const WorkMatrix seen = count_head_work(make_block_geometry(make_token_layout(LayoutKind::contiguous, 32, 2), 8, 8), column);
  EXPECT_EQ(seen.at(1, 0).lists, 2) << "both query blocks of rank 1 see key 3 and list no tile of rank 0";
  EXPECT_EQ(seen.at(0, 0).lists, 2) << "the diagonal";
  EXPECT_EQ(seen.at(1, 1).lists, 2) << "the diagonal";
  EXPECT_EQ(seen.at(0, 1).lists, 0);
}

TEST(WorkCounterTest, VerticalChunksRoundUpPerQueryBlock) {
  // One rank, 4 blocks of 8 tokens, only the diagonal tiles kept. Columns 0..9 kept: block 0
  // covers columns 0..7 with its own diagonal tile, so query block 0 gathers none; blocks 1..3
  // see all 10 columns except those in their own diagonal tile (block 1 loses 8, 9).
  const int64_t b = 8;
  KeptPattern p;
  for (int64_t v = 0; v < 10; ++v) p.vertical_positions.push_back(v);
  const WorkMatrix work = count_head_work(make_block_geometry(make_token_layout(LayoutKind::contiguous, 32, 1), b, b), p);
  const WorkCounts& c = work.at(0, 0);
  EXPECT_EQ(c.tiles, 4);
  EXPECT_EQ(c.masked_tiles, 4);
  EXPECT_EQ(c.columns, 0 + 8 + 10 + 10);
  EXPECT_EQ(c.column_chunks, 0 + 1 + 2 + 2);
  EXPECT_EQ(c.lists, 4);
}

TEST(WorkCounterTest, NormalizeSortsDeduplicatesAndAddsOffsetZero) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  for (const int64_t n : {int64_t{50}, int64_t{5000}, int64_t{1} << 20}) {
    for (const size_t count : {size_t{3}, size_t{100}, size_t{20000}}) {
      KeptPattern p;
      std::uniform_int_distribution<int64_t> any(1, n - 1);
      for (size_t k = 0; k < count; ++k) {
        p.slash_offsets.push_back(any(rng));
        p.vertical_positions.push_back(any(rng));
      }
      std::vector<int64_t> slashes = p.slash_offsets;
      slashes.push_back(0);
      std::sort(slashes.begin(), slashes.end());
      slashes.erase(std::unique(slashes.begin(), slashes.end()), slashes.end());
      std::vector<int64_t> verticals = p.vertical_positions;
      std::sort(verticals.begin(), verticals.end());
      verticals.erase(std::unique(verticals.begin(), verticals.end()), verticals.end());
      const KeptPattern norm = normalize_pattern(p, n);
      EXPECT_EQ(norm.slash_offsets, slashes);
      EXPECT_EQ(norm.vertical_positions, verticals);
    }
  }
}

TEST(WorkCounterTest, RejectsPatternsOutsideTheSequence) {
  const BlockGeometry geo = make_block_geometry(make_token_layout(LayoutKind::contiguous, 64, 2), 8, 8);
  KeptPattern p;
  p.slash_offsets = {64};
  EXPECT_THROW(count_head_work(geo, p), InputError);
  p.slash_offsets = {};
  p.vertical_positions = {-1};
  EXPECT_THROW(count_head_work(geo, p), InputError);
}

TEST(WorkCounterTest, KeyListsOfAGqaGroupAreTheUnionOverItsHeads) {
  // The backward's key-block pass has one segment per (K/V head, key block) that any query head
  // of the group lists: the counter's group count equals the brute-force union, for every layout.
  // A segment holds the tiles of every head of the group on that key block: the longest is the
  // maximum over key blocks of the heads' summed tiles.
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  const int64_t blocks[] = {1, 2, 3, 4, 5, 8, 16};
  for (int trial = 0; trial < 120; ++trial) {
    const TokenLayout layout = random_small_layout(rng);
    const int64_t bq = blocks[rng() % 7];
    const int64_t bk = blocks[rng() % 7];
    const BlockGeometry geo = make_block_geometry(layout, bq, bk);
    const int heads = 1 + static_cast<int>(rng() % 4);
    WorkCounter counter(geo);
    WorkMatrix group(layout.ranks());
    WorkMatrix expected(layout.ranks());
    std::vector<std::vector<int64_t>> hits;
    counter.begin_key_group();
    for (int h = 0; h < heads; ++h) {
      const KeptPattern p = random_pattern(rng, layout.seq_len_tokens());
      counter.accumulate_group_head(p, group);
      WorkMatrix one = testing::brute_force_work(layout, bq, bk, p, 64, &hits);
      for (int32_t q = 0; q < layout.ranks(); ++q) {
        for (int32_t kv = 0; kv < layout.ranks(); ++kv) one.at(q, kv).key_lists = one.at(q, kv).longest_key_list = 0;
      }
      expected += one;
    }
    counter.end_key_group(group);
    for (int32_t q = 0; q < layout.ranks(); ++q) {
      for (int32_t kv = 0; kv < layout.ranks(); ++kv) {
        const std::vector<int64_t>& listed = hits[static_cast<size_t>(q) * static_cast<size_t>(layout.ranks()) +
                                                  static_cast<size_t>(kv)];
        expected.at(q, kv).key_lists = std::count_if(listed.begin(), listed.end(), [](int64_t t) { return t > 0; });
        expected.at(q, kv).longest_key_list = listed.empty() ? 0 : *std::max_element(listed.begin(), listed.end());
      }
    }
    ASSERT_EQ(group, expected) << describe(layout, bq, bk) << " heads=" << heads;
  }
}

TEST(WorkCounterTest, SumsAndRepeatsKeepTheLongestSegment) {
  // Other K/V heads and repeated sequences are separate segments: sums take the longest, repeats
  // leave it; every other count adds up.
  WorkCounts a{.tiles = 10, .key_lists = 4, .longest_key_list = 7};
  const WorkCounts b{.tiles = 3, .key_lists = 2, .longest_key_list = 5};
  a += b;
  EXPECT_EQ(a.tiles, 13);
  EXPECT_EQ(a.key_lists, 6);
  EXPECT_EQ(a.longest_key_list, 7);
  a *= 3;
  EXPECT_EQ(a.tiles, 39);
  EXPECT_EQ(a.longest_key_list, 7);
  WorkMatrix m(2);
  m.at(0, 1).longest_key_list = 4;
  m.at(1, 0).longest_key_list = 9;
  EXPECT_EQ(m.total().longest_key_list, 9);
}

TEST(WorkCounterTest, HashedMemoCountsAsTheSlotTables) {
  // Rings too large for the rank-pair slot tables look their memo up by hash: same counts.
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  const int64_t blocks[] = {1, 2, 3, 4, 8};
  for (int trial = 0; trial < 200; ++trial) {
    const TokenLayout layout = random_small_layout(rng);
    const BlockGeometry geo = make_block_geometry(layout, blocks[rng() % 5], blocks[rng() % 5]);
    WorkCounter hashed(geo, 0);
    WorkCounter slotted(geo);
    for (int head = 0; head < 3; ++head) {
      const KeptPattern p = random_pattern(rng, layout.seq_len_tokens());
      WorkMatrix a;
      WorkMatrix b;
      hashed.count_head(p, a);
      slotted.count_head(p, b);
      ASSERT_EQ(a, b) << describe(layout, geo.block_q, geo.block_k) << " head " << head;
      ASSERT_EQ(b, testing::brute_force_work(layout, geo.block_q, geo.block_k, p)) << describe(layout, geo.block_q, geo.block_k);
    }
  }
}

TEST(WorkCounterTest, CounterIsReusableAcrossHeads) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  const TokenLayout layout = make_token_layout(LayoutKind::zigzag, 240, 3);
  const BlockGeometry geo = make_block_geometry(layout, 8, 4);
  WorkCounter counter(geo);
  WorkMatrix sum(3);
  WorkMatrix expected(3);
  for (int head = 0; head < 5; ++head) {
    const KeptPattern p = random_pattern(rng, 240);
    counter.accumulate_head(p, sum);
    expected += testing::brute_force_work(layout, 8, 4, p);
  }
  EXPECT_EQ(sum, expected);
}

}  // namespace
}  // namespace sparsering
