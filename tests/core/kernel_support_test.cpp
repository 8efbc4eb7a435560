// The kernels' support rules: whole 64-token blocks, head dims 64 and 128, whole GQA groups,
// int32 token counts and at most 65535 query tiles per launch; every reason names the field it
// was given and the value.
#include "core/kernel_support.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace sparsering {
namespace {

/// The reason, or "" when supported.
std::string reason(const std::optional<std::string>& why) { return why.value_or(""); }

TEST(KernelSupport, BlockSizesAreWholeTiles) {
  for (const int64_t block : {64, 128, 192, 256, 512, 1024}) {
    EXPECT_TRUE(is_supported_block_size(block)) << block;
    EXPECT_EQ(block_size_unsupported(block, "block_q"), std::nullopt) << block;
  }
  for (const int64_t block : {-64, 0, 1, 16, 32, 48, 97, 100}) {
    EXPECT_FALSE(is_supported_block_size(block)) << block;
  }
  EXPECT_EQ(reason(block_size_unsupported(32, "sparse.block_q")),
            "sparse.block_q must be a positive multiple of 64, got 32");
  EXPECT_EQ(reason(block_size_unsupported(0, "index.block_k")),
            "index.block_k must be a positive multiple of 64, got 0");
}

TEST(KernelSupport, HeadDimsAndGroups) {
  EXPECT_EQ(head_dim_unsupported(64, "head_dim"), std::nullopt);
  EXPECT_EQ(head_dim_unsupported(128, "head_dim"), std::nullopt);
  EXPECT_EQ(reason(head_dim_unsupported(96, "shape.head_dim")),
            "shape.head_dim must be 64 or 128 for the CUDA kernels, got 96");
  EXPECT_NE(head_dim_unsupported(256, "head_dim"), std::nullopt);

  EXPECT_EQ(head_ratio_unsupported(32, 8, "q_heads", "kv_heads"), std::nullopt);  // groups of 4
  EXPECT_EQ(head_ratio_unsupported(16, 16, "q_heads", "kv_heads"), std::nullopt);  // MHA
  EXPECT_EQ(head_ratio_unsupported(16, 1, "q_heads", "kv_heads"), std::nullopt);   // MQA
  EXPECT_EQ(reason(head_ratio_unsupported(3, 2, "shape.q_heads", "shape.kv_heads")),
            "shape.kv_heads must divide shape.q_heads (3), got 2");
  EXPECT_EQ(reason(head_ratio_unsupported(4, 0, "q_heads", "kv_heads")), "kv_heads must divide q_heads (4), got 0");
  EXPECT_EQ(reason(head_ratio_unsupported(0, 1, "q_heads", "kv_heads")), "q_heads must be >= 1, got 0");
  EXPECT_NE(head_ratio_unsupported(8, 16, "q_heads", "kv_heads"), std::nullopt);  // more KV than query heads
}

TEST(KernelSupport, TokenCountsAndQueryTiles) {
  EXPECT_EQ(token_count_unsupported(0, "kv_len"), std::nullopt);
  EXPECT_EQ(token_count_unsupported((int64_t{1} << 31) - 1, "kv_len"), std::nullopt);
  EXPECT_EQ(reason(token_count_unsupported(int64_t{1} << 31, "shape.kv_len")).rfind("shape.kv_len must be < 2^31", 0),
            0u);

  // 65535 tiles of 64 rows is the most one launch covers, whatever the block size.
  EXPECT_EQ(query_tiles_unsupported(65535 * 64, 64, "q_len"), std::nullopt);
  EXPECT_EQ(reason(query_tiles_unsupported(65535 * 64 + 1, 64, "shape.q_len")),
            "shape.q_len 4194241 in blocks of 64 needs more than 65535 64-row query tiles");
  EXPECT_EQ(query_tiles_unsupported(65535 * 64 - 128, 128, "q_len"), std::nullopt);
  // A partial last block launches all its tiles: 32767 blocks of 128 plus one more is 65536 tiles.
  EXPECT_NE(query_tiles_unsupported(65535 * 64 - 64 + 1, 128, "q_len"), std::nullopt);
  EXPECT_EQ(query_tiles_unsupported(0, 64, "q_len"), std::nullopt);
}

TEST(KernelSupport, WholeProblem) {
  KernelProblem problem;
  problem.block_q = 64;
  problem.block_k = 128;
  problem.head_dim = 128;
  problem.q_heads = 32;
  problem.kv_heads = 8;
  problem.q_len_tokens = 8192;
  problem.kv_len_tokens = 8192;
  problem.seq_len_tokens = 65536;
  EXPECT_EQ(kernel_problem_unsupported(problem), std::nullopt);

  const auto with = [&](auto change) {
    KernelProblem changed = problem;
    change(changed);
    return reason(kernel_problem_unsupported(changed));
  };
  EXPECT_EQ(with([](KernelProblem& p) { p.block_q = 32; }), "block_q must be a positive multiple of 64, got 32");
  EXPECT_EQ(with([](KernelProblem& p) { p.block_k = 16; }), "block_k must be a positive multiple of 64, got 16");
  EXPECT_EQ(with([](KernelProblem& p) { p.head_dim = 80; }), "head_dim must be 64 or 128 for the CUDA kernels, got 80");
  EXPECT_EQ(with([](KernelProblem& p) { p.kv_heads = 5; }), "kv_heads must divide q_heads (32), got 5");
  EXPECT_EQ(with([](KernelProblem& p) { p.q_len_tokens = -1; }), "q_len_tokens must be >= 0, got -1");
  EXPECT_NE(with([](KernelProblem& p) { p.seq_len_tokens = int64_t{1} << 32; }).find("seq_len_tokens must be < 2^31"),
            std::string::npos);
  EXPECT_NE(with([](KernelProblem& p) { p.q_len_tokens = int64_t{1} << 23; }).find("query tiles"), std::string::npos);
  // The first problem is reported: block_q before head_dim.
  EXPECT_EQ(with([](KernelProblem& p) {
              p.block_q = 32;
              p.head_dim = 80;
            }).rfind("block_q", 0),
            0u);
}

}  // namespace
}  // namespace sparsering
