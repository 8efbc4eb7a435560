// Token layouts: every layout is a bijection, matches its closed form, and striped layouts give
// every rank the same block diagonals at every ring step (docs/algorithm.md section 4).
#include "core/token_layout.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "common/error.hpp"

namespace sparsering {
namespace {

void expect_bijection(const TokenLayout& layout) {
  std::vector<int64_t> seen;
  for (int32_t r = 0; r < layout.ranks(); ++r) {
    for (int64_t i = 0; i < layout.local_len(); ++i) {
      const int64_t g = layout.global_token(r, i);
      ASSERT_GE(g, 0);
      ASSERT_LT(g, layout.seq_len_tokens());
      const TokenOwner owner = layout.owner(g);
      ASSERT_EQ(owner.ring_rank, r) << "global " << g;
      ASSERT_EQ(owner.local_index, i) << "global " << g;
      seen.push_back(g);
    }
  }
  std::sort(seen.begin(), seen.end());
  std::vector<int64_t> all(static_cast<size_t>(layout.seq_len_tokens()));
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(seen, all);
}

TEST(TokenLayoutTest, EveryLayoutIsABijection) {
  for (int32_t w : {1, 2, 3, 4, 8}) {
    expect_bijection(make_token_layout(LayoutKind::contiguous, 48L * w, w));
    expect_bijection(make_token_layout(LayoutKind::zigzag, 48L * w, w));
    for (int64_t g : {1, 3, 8, 16}) expect_bijection(make_token_layout(LayoutKind::striped, 48L * w, w, g));
  }
}

TEST(TokenLayoutTest, ClosedForms) {
  const auto contiguous = make_token_layout(LayoutKind::contiguous, 32, 4);
  EXPECT_EQ(contiguous.global_token(2, 3), 19);
  const auto zigzag = make_token_layout(LayoutKind::zigzag, 32, 4);  // chunks of 4: rank 1 holds 1 and 6
  EXPECT_EQ(zigzag.global_token(1, 0), 4);
  EXPECT_EQ(zigzag.global_token(1, 4), 24);
  EXPECT_EQ(zigzag.global_token(1, 7), 27);
  const auto striped = make_token_layout(LayoutKind::striped, 32, 4, 2);  // stripes of 2, dealt round robin
  EXPECT_EQ(striped.global_token(0, 0), 0);
  EXPECT_EQ(striped.global_token(1, 1), 3);
  EXPECT_EQ(striped.global_token(3, 2), 14);  // second stripe of rank 3 = stripe 7
}

TEST(TokenLayoutTest, PermutationListsRankMajorLocalOrder) {
  const auto zigzag = make_token_layout(LayoutKind::zigzag, 8, 2);
  EXPECT_EQ(layout_permutation(zigzag), (std::vector<int64_t>{0, 1, 6, 7, 2, 3, 4, 5}));
}

// At ring step s every rank of a striped layout (G = block size) meets exactly the block
// diagonals congruent to s mod W, which is why striping balances slash work.
TEST(TokenLayoutTest, StripedStepCoversBlockDiagonalsCongruentToStep) {
  const int32_t w = 4;
  const int64_t block = 4;
  const auto layout = make_token_layout(LayoutKind::striped, 64 * block, w, block);
  for (int32_t step = 0; step < w; ++step) {
    std::set<int64_t> first_rank;
    for (int32_t r = 0; r < w; ++r) {
      const int32_t src = kv_source_rank(r, step, w);
      std::set<int64_t> diagonals;
      for (int64_t i = 0; i < layout.local_len() / block; ++i) {
        for (int64_t j = 0; j < layout.local_len() / block; ++j) {
          const int64_t delta = layout.global_token(r, i * block) / block - layout.global_token(src, j * block) / block;
          EXPECT_EQ(((delta % w) + w) % w, step);
          if (delta >= 0) diagonals.insert(delta);
        }
      }
      if (r == 0) first_rank = diagonals;
    }
  }
}

TEST(TokenLayoutTest, KvSourceRankWrapsAround) {
  EXPECT_EQ(kv_source_rank(0, 1, 4), 3);
  EXPECT_EQ(kv_source_rank(2, 3, 4), 3);
  EXPECT_EQ(kv_source_rank(3, 0, 4), 3);
}

TEST(TokenLayoutTest, RejectsIndivisibleLengthsWithAMessage) {
  EXPECT_THROW(make_token_layout(LayoutKind::contiguous, 10, 3), InputError);
  EXPECT_THROW(make_token_layout(LayoutKind::zigzag, 12, 4), InputError);
  EXPECT_THROW(make_token_layout(LayoutKind::striped, 64, 4, 0), InputError);
  EXPECT_THROW(make_token_layout(LayoutKind::striped, 64, 4, 32), InputError);
  EXPECT_THROW(make_token_layout(LayoutKind::contiguous, 0, 1), InputError);
  try {
    make_token_layout(LayoutKind::zigzag, 12, 4);
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("divisible by 2 x ring size (8)"), std::string::npos) << e.what();
  }
}

TEST(TokenLayoutTest, DefaultIsTheTrivialValidLayout) {
  const TokenLayout layout;
  EXPECT_EQ(layout.kind(), LayoutKind::contiguous);
  EXPECT_EQ(layout.seq_len_tokens(), 1);
  EXPECT_EQ(layout.ranks(), 1);
  EXPECT_EQ(layout.granularity_tokens(), 0);
  EXPECT_EQ(layout.local_len(), 1);
  EXPECT_EQ(layout.global_token(0, 0), 0);
  EXPECT_EQ(layout, make_token_layout(LayoutKind::contiguous, 1, 1));
}

TEST(TokenLayoutTest, GranularityIsKeptForStripedOnly) {
  EXPECT_EQ(make_token_layout(LayoutKind::striped, 256, 4, 16).granularity_tokens(), 16);
  EXPECT_EQ(make_token_layout(LayoutKind::zigzag, 256, 4, 16).granularity_tokens(), 0);
  EXPECT_EQ(make_token_layout(LayoutKind::contiguous, 256, 4, 16).granularity_tokens(), 0);
}

TEST(TokenLayoutTest, StripedCheckDoesNotOverflowOnHugeStripes) {
  // G x W overflows int64; the rule must still be decided correctly, not by a wrapped product.
  const int64_t n = int64_t{1} << 62;
  EXPECT_THROW(make_token_layout(LayoutKind::striped, n, 1 << 20, int64_t{1} << 60), InputError);
  const TokenLayout ok = make_token_layout(LayoutKind::striped, n, 4, int64_t{1} << 60);
  EXPECT_EQ(ok.owner(ok.global_token(3, 5)).ring_rank, 3);
}

TEST(TokenLayoutTest, ParsesNamesAndRejectsUnknown) {
  EXPECT_EQ(parse_layout_kind("striped"), LayoutKind::striped);
  EXPECT_EQ(to_string(LayoutKind::zigzag), "zigzag");
  EXPECT_THROW(parse_layout_kind("diagonal"), InputError);
}

}  // namespace
}  // namespace sparsering
