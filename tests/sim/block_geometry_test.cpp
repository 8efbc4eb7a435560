// Block geometry: run decomposition, first visible local position, and the periodic classes of
// regular blocks, checked against token-by-token enumeration (sim/work/block_geometry.hpp).
#include "sim/work/block_geometry.hpp"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "common/error.hpp"

namespace sparsering {
namespace {

std::vector<TokenLayout> small_layouts() {
  std::vector<TokenLayout> out;
  for (int32_t w : {1, 2, 3, 4}) {
    for (int64_t n : {24L * w, 48L * w}) {
      out.push_back(make_token_layout(LayoutKind::contiguous, n, w));
      out.push_back(make_token_layout(LayoutKind::zigzag, n, w));
      for (int64_t g : {1, 2, 3, 4, 6, 8, 12, 24}) {
        if (n % (g * w) == 0) out.push_back(make_token_layout(LayoutKind::striped, n, w, g));
      }
    }
  }
  return out;
}

TEST(BlockGeometryTest, RunsCoverExactlyTheLocalTokens) {
  for (const TokenLayout& layout : small_layouts()) {
    for (int32_t r = 0; r < layout.ranks(); ++r) {
      for (int64_t begin = 0; begin < layout.local_len(); begin += 5) {
        const int64_t end = std::min(layout.local_len(), begin + 7);
        std::vector<Interval> runs;
        append_global_runs(layout, r, begin, end, runs);
        std::vector<int64_t> from_runs;
        for (const Interval& run : runs) {
          for (int64_t g = run.lo; g <= run.hi; ++g) from_runs.push_back(g);
        }
        std::vector<int64_t> expected;
        for (int64_t l = begin; l < end; ++l) expected.push_back(layout.global_token(r, l));
        EXPECT_EQ(from_runs, expected);
        for (size_t k = 1; k < runs.size(); ++k) EXPECT_GT(runs[k].lo, runs[k - 1].hi) << "runs ascend";
      }
    }
  }
}

TEST(BlockGeometryTest, FirstLocalAtOrAfterMatchesScan) {
  for (const TokenLayout& layout : small_layouts()) {
    for (int32_t r = 0; r < layout.ranks(); ++r) {
      for (int64_t g = 0; g < layout.seq_len_tokens(); ++g) {
        int64_t expected = layout.local_len();
        for (int64_t l = 0; l < layout.local_len(); ++l) {
          if (layout.global_token(r, l) >= g) {
            expected = l;
            break;
          }
        }
        ASSERT_EQ(first_local_at_or_after(layout, r, g), expected)
            << to_string(layout.kind()) << " W=" << layout.ranks() << " G=" << layout.granularity_tokens() << " r=" << r
            << " g=" << g;
      }
    }
  }
}

TEST(BlockGeometryTest, FirstLocalAtOrAfterIsTheSameForAllRanksBelowAndAllAboveTheOwner) {
  // The work counter computes the first query block that sees a column once for the ranks below
  // the column's owner and once for those above; this is the layout property it relies on.
  for (const TokenLayout& layout : small_layouts()) {
    for (int64_t g = 0; g < layout.seq_len_tokens(); ++g) {
      const int32_t owner = layout.owner(g).ring_rank;
      for (int32_t r = 1; r < layout.ranks(); ++r) {
        if (r == owner || r - 1 == owner) continue;
        ASSERT_EQ(first_local_at_or_after(layout, r, g), first_local_at_or_after(layout, r - 1, g))
            << to_string(layout.kind()) << " W=" << layout.ranks() << " g=" << g << " ranks " << r - 1 << ", " << r;
      }
    }
  }
}

TEST(BlockGeometryTest, ClassMembersAreOnePeriodApartOnEveryRank) {
  for (const TokenLayout& layout : small_layouts()) {
    for (int64_t bq : {1, 2, 4, 5, 8}) {
      for (int64_t bk : {1, 3, 4, 8}) {
        const BlockGeometry geo = make_block_geometry(layout, bq, bk);
        int64_t regular = 0;
        for (const BlockClass& cls : geo.q_classes) {
          regular += cls.members;
          for (int32_t r = 0; r < layout.ranks(); ++r) {
            const auto& seg = geo.segments[static_cast<size_t>(cls.segment)];
            for (int64_t m = 0; m < cls.members; ++m) {
              const int64_t block = cls.first_block + m * cls.block_stride;
              ASSERT_GE(block * bq, seg.local_begin);
              ASSERT_LE((block + 1) * bq, seg.local_end);
              // Every token of the member sits exactly m shifts after the matching token of member 0.
              for (int64_t t = 0; t < bq; ++t) {
                ASSERT_EQ(layout.global_token(r, block * bq + t),
                          layout.global_token(r, cls.first_block * bq + t) + m * geo.period_shift);
              }
            }
          }
        }
        EXPECT_EQ(regular + static_cast<int64_t>(geo.irregular_q_blocks.size()), geo.q_blocks);
      }
    }
  }
}

TEST(BlockGeometryTest, ChunkPairsHoldTheDifferencesOfEveryMemberAgainstTheWholeSegment) {
  // For each query class member a on rank q and each segment s of rank kv's chunk, the pair's
  // items shifted by x0 + a x shift are exactly { global(query) - global(key) } over the block's
  // queries and the segment's keys.
  for (const TokenLayout& layout : small_layouts()) {
    for (int64_t bq : {1, 3, 4, 8}) {
      const BlockGeometry geo = make_block_geometry(layout, bq, 4);
      const auto segments = static_cast<int32_t>(geo.segments.size());
      ASSERT_EQ(geo.chunk_pairs.size(), geo.q_classes.size() * geo.segments.size());
      for (size_t index = 0; index < geo.chunk_pairs.size(); ++index) {
        const ClassPair& pair = geo.chunk_pairs[index];
        const BlockClass& cls = geo.q_classes[static_cast<size_t>(pair.q_class)];
        ASSERT_EQ(pair.q_class, static_cast<int32_t>(index) / segments);
        ASSERT_EQ(pair.k_segment, static_cast<int32_t>(index) % segments);
        ASSERT_EQ(pair.q_segment, cls.segment);
        const LayoutSegment& keys = geo.segments[static_cast<size_t>(pair.k_segment)];
        for (int32_t q = 0; q < layout.ranks(); ++q) {
          for (int32_t kv = 0; kv < layout.ranks(); ++kv) {
            const int64_t x0 = geo.segment_start_global(q, pair.q_segment) - geo.segment_start_global(kv, pair.k_segment);
            for (int64_t a = 0; a < cls.members; ++a) {
              const int64_t block = cls.first_block + a * cls.block_stride;
              std::set<int64_t> expected;
              for (int64_t t = block * bq; t < (block + 1) * bq; ++t) {
                for (int64_t k = keys.local_begin; k < keys.local_end; ++k) {
                  expected.insert(layout.global_token(q, t) - layout.global_token(kv, k));
                }
              }
              std::set<int64_t> from_items;
              for (const DifferenceItem& item : pair.items) {
                for (int64_t m = item.m_lo; m <= item.m_hi; ++m) {
                  for (int64_t d = item.lo; d <= item.hi; ++d) from_items.insert(d + m * item.stride + x0 + a * geo.period_shift);
                }
              }
              ASSERT_EQ(from_items, expected) << to_string(layout.kind()) << " N=" << layout.seq_len_tokens() << " W="
                                              << layout.ranks() << " G=" << layout.granularity_tokens() << " bq=" << bq
                                              << " class " << pair.q_class << " segment " << pair.k_segment << " q=" << q
                                              << " kv=" << kv << " a=" << a;
              ASSERT_EQ(pair.min_difference + x0 + a * geo.period_shift, *expected.begin());
              ASSERT_EQ(pair.max_difference + x0 + a * geo.period_shift, *expected.rbegin());
            }
          }
        }
      }
    }
  }
}

TEST(BlockGeometryTest, RejectsBadBlockSizes) {
  const auto layout = make_token_layout(LayoutKind::contiguous, 64, 2);
  EXPECT_THROW(make_block_geometry(layout, 0, 64), InputError);
  EXPECT_THROW(make_block_geometry(layout, 64, -1), InputError);
  // 63 tokens over 2 ranks: such a layout cannot be built, so none reaches make_block_geometry.
  EXPECT_THROW(make_token_layout(LayoutKind::contiguous, 63, 2), InputError);
}

}  // namespace
}  // namespace sparsering
