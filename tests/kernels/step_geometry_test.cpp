// Tests of kernels/index/step_geometry.hpp against direct enumeration: the layouts' monotone
// local -> global order the geometry relies on, the global runs of every query block, keys_below,
// the first masked key block and the visible key limit, for every layout and many granularities.
#include "kernels/index/step_geometry.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "kernel_test_support.hpp"

namespace sparsering {
namespace {

std::vector<TokenLayout> sample_layouts() {
  std::vector<TokenLayout> layouts;
  for (const int32_t w : {1, 2, 3, 4, 8}) {
    layouts.push_back(make_token_layout(LayoutKind::contiguous, w * 37, w));
    layouts.push_back(make_token_layout(LayoutKind::zigzag, 2 * w * 19, w));
    for (const int64_t g : {1, 3, 16, 64, 100}) layouts.push_back(make_token_layout(LayoutKind::striped, g * w * 2, w, g));
  }
  return layouts;
}

TEST(StepGeometry, LayoutsAreMonotoneInTheLocalIndex) {
  for (const TokenLayout& layout : sample_layouts()) {
    for (int32_t r = 0; r < layout.ranks(); ++r) {
      for (int64_t x = 1; x < layout.local_len(); ++x) {
        ASSERT_LT(layout.global_token(r, x - 1), layout.global_token(r, x))
            << to_string(layout.kind()) << " W=" << layout.ranks() << " G=" << layout.granularity_tokens();
      }
    }
  }
}

TEST(StepGeometry, MatchesEnumeration) {
  for (const TokenLayout& layout : sample_layouts()) {
    for (const auto& [block_q, block_k] : {std::pair{16, 16}, {7, 5}, {32, 64}, {64, 8}}) {
      for (int32_t q_rank = 0; q_rank < layout.ranks(); ++q_rank) {
        for (int32_t kv_rank = 0; kv_rank < layout.ranks(); ++kv_rank) {
          const StepGeometry geometry(IndexGeometry{RingPosition{layout, q_rank, kv_rank}, block_q, block_k});
          const int64_t len = layout.local_len();
          ASSERT_EQ(geometry.q_blocks(), (len + block_q - 1) / block_q);
          ASSERT_EQ(geometry.kv_blocks(), (len + block_k - 1) / block_k);
          std::vector<uint8_t> owned(static_cast<size_t>(layout.seq_len_tokens()), 0);
          for (int64_t k = 0; k < len; ++k) owned[static_cast<size_t>(layout.global_token(kv_rank, k))] = 1;
          int64_t below = 0;  // keys of kv_rank with global position < g, counted by walking g
          for (int64_t g = -2; g <= layout.seq_len_tokens() + 2; ++g) {
            ASSERT_EQ(geometry.keys_below(g), below) << "g=" << g;
            if (g >= 0 && g < layout.seq_len_tokens()) below += owned[static_cast<size_t>(g)];
          }
          for (int32_t i = 0; i < geometry.q_blocks(); ++i) {
            // The runs, expanded, are exactly the block's global positions in order.
            std::vector<int64_t> expanded;
            int64_t previous_end = -2;
            for (const GlobalRun& run : geometry.query_runs(i)) {
              ASSERT_LE(run.lo, run.hi);
              ASSERT_GT(run.lo, previous_end + 1) << "runs are maximal";
              previous_end = run.hi;
              for (int64_t g = run.lo; g <= run.hi; ++g) expanded.push_back(g);
            }
            std::vector<int64_t> expected;
            for (int64_t q = int64_t{i} * block_q; q < std::min(int64_t{i + 1} * block_q, len); ++q) {
              expected.push_back(layout.global_token(q_rank, q));
            }
            ASSERT_EQ(expanded, expected);
            int32_t first_masked = geometry.kv_blocks();
            int64_t visible = 0;
            for (int64_t k = 0; k < len; ++k) {
              const int64_t key = layout.global_token(kv_rank, k);
              bool later = false;
              for (const int64_t q : expected) later = later || key > q;
              if (later) first_masked = std::min(first_masked, static_cast<int32_t>(k / block_k));
              if (key <= expected.back()) visible = k + 1;
            }
            ASSERT_EQ(geometry.first_masked_key_block(i), first_masked);
            ASSERT_EQ(geometry.visible_key_limit(i), visible);
          }
        }
      }
    }
  }
}

TEST(StepGeometry, RejectsBadSettings) {
  const TokenLayout layout = make_token_layout(LayoutKind::contiguous, 64, 4);
  EXPECT_THROW(StepGeometry(IndexGeometry{RingPosition{layout, 4, 0}, 16, 16}), InputError);
  EXPECT_THROW(StepGeometry(IndexGeometry{RingPosition{layout, 0, -1}, 16, 16}), InputError);
  EXPECT_THROW(StepGeometry(IndexGeometry{RingPosition{layout, 0, 0}, 0, 16}), InputError);
  EXPECT_THROW(StepGeometry(IndexGeometry{RingPosition{layout, 0, 0}, 16, -3}), InputError);
  // 65 tokens are not divisible by W = 4: such a layout cannot be built, so none reaches StepGeometry.
  EXPECT_THROW(make_token_layout(LayoutKind::contiguous, 65, 4), InputError);
}

}  // namespace
}  // namespace sparsering
