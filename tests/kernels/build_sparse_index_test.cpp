// Tests of the index builder (kernels/index/build_sparse_index.hpp) against the brute-force
// oracles (kernels/reference/brute_force_mask.hpp), and of the oracles against hand-derived
// indexes. The sweep covers contiguous, zigzag and striped layouts (granularity 1, 3, 16, 64, 100,
// block_q and 2 x block_q: smaller than, equal to, larger than and not dividing the blocks),
// ring sizes 1, 2, 3, 4, 8, every (query rank, ring step), several rows with different random
// kept sets, partial last blocks and block_q != block_k.
#include "kernels/index/build_sparse_index.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "kernels/reference/brute_force_mask.hpp"
#include "kernel_test_support.hpp"

namespace sparsering {
namespace {

using testing_support::uniform;

SparseIndex expected_index(int32_t q_blocks, int64_t len, int32_t block_q, int32_t block_k,
                           const std::vector<std::vector<std::pair<int32_t, uint8_t>>>& tiles,
                           const std::vector<std::vector<int32_t>>& columns) {
  SparseIndex index;
  index.rows = static_cast<int32_t>(tiles.size()) / q_blocks;
  index.q_len = len;
  index.kv_len = len;
  index.block_q = block_q;
  index.block_k = block_k;
  index.q_blocks = q_blocks;
  index.tile_offsets = {0};
  index.column_offsets = {0};
  for (size_t list = 0; list < tiles.size(); ++list) {
    for (const auto& [block, masked] : tiles[list]) {
      index.tile_block.push_back(block);
      index.tile_masked.push_back(masked);
    }
    for (const int32_t column : columns[list]) index.column_index.push_back(column);
    index.tile_offsets.push_back(static_cast<int32_t>(index.tile_block.size()));
    index.column_offsets.push_back(static_cast<int32_t>(index.column_index.size()));
  }
  return index;
}

void expect_same_index(const SparseIndex& actual, const SparseIndex& expected, const std::string& where) {
  EXPECT_EQ(actual.rows, expected.rows) << where;
  EXPECT_EQ(actual.q_len, expected.q_len) << where;
  EXPECT_EQ(actual.kv_len, expected.kv_len) << where;
  EXPECT_EQ(actual.q_blocks, expected.q_blocks) << where;
  EXPECT_EQ(actual.tile_offsets, expected.tile_offsets) << where;
  EXPECT_EQ(actual.tile_block, expected.tile_block) << where;
  EXPECT_EQ(actual.tile_masked, expected.tile_masked) << where;
  EXPECT_EQ(actual.column_offsets, expected.column_offsets) << where;
  EXPECT_EQ(actual.column_index, expected.column_index) << where;
}

// Hand-derived: N = 8, W = 2, contiguous, blocks of 2. Rank 1 (queries 4..7) holds rank 0's keys
// 0..3 at step 1. Offset 3 pairs (4,1) (5,2) (6,3): tiles (0,0), (0,1), (1,1); no key is later
// than a query, so nothing is masked. Vertical 0: a tile covers block 0 for query block 0; for
// query block 1 it becomes a column.
TEST(BuildSparseIndex, HandDerivedContiguousOffDiagonal) {
  const TokenLayout layout = make_token_layout(LayoutKind::contiguous, 8, 2);
  const IndexGeometry geometry{RingPosition{layout, 1, kv_source_rank(1, 1, 2)}, 2, 2};
  const std::vector<RowPattern> rows = {RowPattern{{3}, {0}}};
  const SparseIndex expected = expected_index(2, 4, 2, 2, {{{0, 0}, {1, 0}}, {{1, 0}}}, {{}, {0}});
  expect_same_index(brute_force_sparse_index(geometry, rows), expected, "brute force");
  expect_same_index(build_sparse_index(geometry, rows), expected, "builder");
}

// Hand-derived: the diagonal step with no kept sets keeps offset 0 only: the two diagonal tiles,
// both masked (query 0 precedes key 1).
TEST(BuildSparseIndex, HandDerivedDiagonalStepKeepsSelf) {
  const TokenLayout layout = make_token_layout(LayoutKind::contiguous, 8, 2);
  const IndexGeometry geometry{RingPosition{layout, 0, 0}, 2, 2};
  const std::vector<RowPattern> rows = {RowPattern{}};
  const SparseIndex expected = expected_index(2, 4, 2, 2, {{{0, 1}}, {{1, 1}}}, {{}, {}});
  expect_same_index(brute_force_sparse_index(geometry, rows), expected, "brute force");
  expect_same_index(build_sparse_index(geometry, rows), expected, "builder");
}

// Hand-derived: striped G = 1, W = 2. Rank 1 holds odd tokens (1,3 | 5,7), rank 0 even ones
// (0,2 | 4,6). Offset 1 pairs (1,0) (3,2) (5,4) (7,6) touch tiles (0,0) and (1,1); both hold a key
// later than a query (2 > 1, 6 > 5), so both are masked even though this is not the diagonal step.
// Vertical 6: in block 1, a tile for query block 1; query block 0 (1, 3) never sees it.
TEST(BuildSparseIndex, HandDerivedStripedNeedsMasksOffDiagonal) {
  const TokenLayout layout = make_token_layout(LayoutKind::striped, 8, 2, 1);
  const IndexGeometry geometry{RingPosition{layout, 1, 0}, 2, 2};
  const std::vector<RowPattern> rows = {RowPattern{{1}, {6, 2}}};
  // Vertical 2 (local 1, block 0): a tile for query block 0, a column for query block 1.
  const SparseIndex expected = expected_index(2, 4, 2, 2, {{{0, 1}}, {{1, 1}}}, {{}, {1}});
  expect_same_index(brute_force_sparse_index(geometry, rows), expected, "brute force");
  expect_same_index(build_sparse_index(geometry, rows), expected, "builder");
}

// Hand-derived: zigzag W = 2, N = 8: rank 0 holds chunks 0 and 3 (tokens 0,1 | 6,7), rank 1
// chunks 1 and 2 (2,3 | 4,5). Blocks of 3 queries / 1 key, a partial last query block. Rank 0 at
// step 1 holds rank 1's keys. Offset 4 pairs (6,2) (7,3): query block 0 = (0,1,6) reaches key 2
// (local 0); query block 1 = (7) reaches key 3 (local 1). Query block 0 holds query 0, earlier
// than key 2: masked. Query block 1 (7) is later than every key: unmasked.
TEST(BuildSparseIndex, HandDerivedZigzagPartialBlocks) {
  const TokenLayout layout = make_token_layout(LayoutKind::zigzag, 8, 2);
  const IndexGeometry geometry{RingPosition{layout, 0, 1}, 3, 1};
  const std::vector<RowPattern> rows = {RowPattern{{4}, {5}}};
  // Vertical 5 (local 3): query block 0 sees it through query 6; query block 1 through query 7.
  const SparseIndex expected = expected_index(2, 4, 3, 1, {{{0, 1}}, {{1, 0}}}, {{3}, {3}});
  expect_same_index(brute_force_sparse_index(geometry, rows), expected, "brute force");
  expect_same_index(build_sparse_index(geometry, rows), expected, "builder");
}

struct BlockShape {
  int32_t block_q;
  int32_t block_k;
};

// Builds every (query rank, step) index of one layout and compares it with the oracles.
void check_layout(std::mt19937_64& rng, const TokenLayout& layout, BlockShape shape, int32_t rows_count) {
  std::vector<RowPattern> rows;
  for (int32_t r = 0; r < rows_count; ++r) rows.push_back(testing_support::random_row_pattern(rng, layout.seq_len_tokens()));
  const std::vector<PreparedRowPattern> prepared = prepare_row_patterns(rows, layout.seq_len_tokens());
  for (int32_t q_rank = 0; q_rank < layout.ranks(); ++q_rank) {
    for (int32_t step = 0; step < layout.ranks(); ++step) {
      const RingPosition position{layout, q_rank, kv_source_rank(q_rank, step, layout.ranks())};
      const IndexGeometry geometry{position, shape.block_q, shape.block_k};
      const std::string where = str(to_string(layout.kind()), " N=", layout.seq_len_tokens(), " W=", layout.ranks(),
                                    " G=", layout.granularity_tokens(), " blocks ", shape.block_q, "x", shape.block_k,
                                    " rank ", q_rank, " step ", step);
      const SparseIndex built = build_sparse_index(StepGeometry(geometry), prepared);
      ASSERT_NO_THROW(validate_sparse_index(built)) << where;
      expect_same_index(built, brute_force_sparse_index(geometry, rows), where);
      for (int32_t r = 0; r < rows_count; ++r) {
        const std::vector<uint8_t> computed = index_pair_mask(built, position, r);
        ASSERT_EQ(computed, contract_pair_mask(geometry, rows[static_cast<size_t>(r)])) << where << " row " << r;
        const std::vector<uint8_t> named = pattern_pair_mask(geometry, rows[static_cast<size_t>(r)]);
        for (size_t pair = 0; pair < named.size(); ++pair) {
          ASSERT_TRUE(named[pair] == 0 || computed[pair] != 0) << where << " row " << r << ": kept pair " << pair
                                                               << " not computed";
        }
      }
      if (::testing::Test::HasFailure()) return;
    }
  }
}

const BlockShape kShapes[] = {{16, 16}, {16, 8}, {8, 24}, {32, 32}, {12, 20}, {64, 64}};

BlockShape random_shape(std::mt19937_64& rng) {
  return kShapes[static_cast<size_t>(uniform(rng, 0, static_cast<int64_t>(std::size(kShapes)) - 1))];
}

TEST(BuildSparseIndex, ContiguousEqualsBruteForce) {
  std::mt19937_64 rng = testing_support::test_rng();
  for (const int32_t w : {1, 2, 3, 4, 8}) {
    for (int trial = 0; trial < 3; ++trial) {
      const int64_t local = uniform(rng, 1, 90);
      check_layout(rng, make_token_layout(LayoutKind::contiguous, w * local, w), random_shape(rng), 3);
    }
  }
}

TEST(BuildSparseIndex, ZigzagEqualsBruteForce) {
  std::mt19937_64 rng = testing_support::test_rng();
  for (const int32_t w : {1, 2, 3, 4, 8}) {
    for (int trial = 0; trial < 3; ++trial) {
      const int64_t half = uniform(rng, 1, 45);
      check_layout(rng, make_token_layout(LayoutKind::zigzag, 2 * w * half, w), random_shape(rng), 3);
    }
  }
}

TEST(BuildSparseIndex, StripedEqualsBruteForce) {
  std::mt19937_64 rng = testing_support::test_rng();
  for (const int32_t w : {1, 2, 3, 4, 8}) {
    for (const BlockShape shape : {BlockShape{16, 16}, BlockShape{24, 10}}) {
      for (const int64_t g : {int64_t{1}, int64_t{3}, int64_t{16}, int64_t{64}, int64_t{100}, int64_t{shape.block_q},
                              int64_t{2} * shape.block_q}) {
        const int64_t max_stripes = std::max<int64_t>(1, (w >= 4 ? 160 : 260) / g);
        const int64_t stripes = uniform(rng, 1, std::min<int64_t>(3, max_stripes));
        check_layout(rng, make_token_layout(LayoutKind::striped, g * w * stripes, w, g), shape, 2);
      }
    }
  }
}

TEST(BuildSparseIndex, DenseAndEmptyPatterns) {
  std::mt19937_64 rng = testing_support::test_rng();
  for (const LayoutKind kind : {LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped}) {
    const TokenLayout layout = make_token_layout(kind, 96, 3, kind == LayoutKind::striped ? 4 : 0);
    RowPattern dense;
    for (int64_t d = 0; d < layout.seq_len_tokens(); ++d) dense.slash_offsets.push_back(d);
    const std::vector<RowPattern> rows = {dense, RowPattern{}, RowPattern{{}, {0, 5, 95}}};
    for (int32_t q_rank = 0; q_rank < 3; ++q_rank) {
      for (int32_t kv_rank = 0; kv_rank < 3; ++kv_rank) {
        const IndexGeometry geometry{RingPosition{layout, q_rank, kv_rank}, 8, 8};
        const SparseIndex built = build_sparse_index(geometry, rows);
        expect_same_index(built, brute_force_sparse_index(geometry, rows), str(to_string(kind), " ", q_rank, kv_rank));
        // Dense: every tile holding at least one causal pair, and no column.
        const std::vector<uint8_t> computed = index_pair_mask(built, geometry.position, 0);
        for (int64_t q = 0; q < layout.local_len(); ++q) {
          for (int64_t k = 0; k < layout.local_len(); ++k) {
            const bool causal = layout.global_token(q_rank, q) >= layout.global_token(kv_rank, k);
            ASSERT_EQ(computed[static_cast<size_t>(q * layout.local_len() + k)] != 0, causal);
          }
        }
      }
    }
  }
  (void)rng;
}

TEST(BuildSparseIndex, RejectsBadInput) {
  const TokenLayout layout = make_token_layout(LayoutKind::contiguous, 64, 2);
  const IndexGeometry geometry{RingPosition{layout, 0, 1}, 16, 16};
  EXPECT_THROW(build_sparse_index(geometry, std::vector<RowPattern>{RowPattern{{64}, {}}}), InputError);
  EXPECT_THROW(build_sparse_index(geometry, std::vector<RowPattern>{RowPattern{{}, {-1}}}), InputError);
  EXPECT_THROW(build_sparse_index(IndexGeometry{RingPosition{layout, 2, 0}, 16, 16}, std::vector<RowPattern>{}),
               InputError);
  // A row prepared for a longer sequence must not index outside this layout.
  const PreparedRowPattern long_row = prepare_row_pattern(std::vector<int64_t>{}, std::vector<int64_t>{100}, 128);
  EXPECT_THROW(build_sparse_index(StepGeometry(geometry), std::span<const PreparedRowPattern>(&long_row, 1)),
               InputError);
}

TEST(SparseIndexValidation, CatchesBrokenIndexes) {
  const TokenLayout layout = make_token_layout(LayoutKind::contiguous, 64, 2);
  const IndexGeometry geometry{RingPosition{layout, 1, 0}, 8, 8};
  const SparseIndex good = build_sparse_index(geometry, std::vector<RowPattern>{RowPattern{{3, 20}, {1, 2, 30}}});
  ASSERT_NO_THROW(validate_sparse_index(good));
  ASSERT_GT(good.columns(), 1);
  auto broken = [&](auto&& edit) {
    SparseIndex copy = good;
    edit(copy);
    return copy;
  };
  EXPECT_THROW(validate_sparse_index(broken([](SparseIndex& i) { i.tile_block.back() = 4; })), InputError);
  EXPECT_THROW(validate_sparse_index(broken([](SparseIndex& i) { i.tile_offsets.back() += 1; })), InputError);
  EXPECT_THROW(validate_sparse_index(broken([](SparseIndex& i) { i.tile_offsets[1] = 1000; })), InputError);
  EXPECT_THROW(validate_sparse_index(broken([](SparseIndex& i) { i.tile_masked.pop_back(); })), InputError);
  EXPECT_THROW(validate_sparse_index(broken([](SparseIndex& i) { i.column_index.back() = 32; })), InputError);
  EXPECT_THROW(validate_sparse_index(broken([](SparseIndex& i) { i.q_blocks += 1; })), InputError);
  EXPECT_THROW(validate_sparse_index(broken([](SparseIndex& i) {
                 std::swap(i.column_index[0], i.column_index[1]);
               })),
               InputError);
}

}  // namespace
}  // namespace sparsering
