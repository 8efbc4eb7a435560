// Block geometry: run decomposition, first visible local position, and the periodic classes of
// regular blocks, checked against token-by-token enumeration (sim/work/block_geometry.hpp).
#include "sim/work/block_geometry.hpp"

#include <gtest/gtest.h>

#include <random>

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

TEST(BlockGeometryTest, RejectsBadBlockSizes) {
  const auto layout = make_token_layout(LayoutKind::contiguous, 64, 2);
  EXPECT_THROW(make_block_geometry(layout, 0, 64), InputError);
  EXPECT_THROW(make_block_geometry(layout, 64, -1), InputError);
  // 63 tokens over 2 ranks: such a layout cannot be built, so none reaches make_block_geometry.
  EXPECT_THROW(make_token_layout(LayoutKind::contiguous, 63, 2), InputError);
}

}  // namespace
}  // namespace sparsering
