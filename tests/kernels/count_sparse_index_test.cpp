// Tests of the counting entry point (kernels/index/count_sparse_index.hpp): per row, per query
// block and in total it equals the work of the materialised index, for every layout, on sizes
// beyond brute force (thousands of tokens, realistic window + scattered + sink patterns).
#include "kernels/index/count_sparse_index.hpp"

#include <gtest/gtest.h>

#include <set>

#include "common/error.hpp"
#include "kernels/index/build_sparse_index.hpp"
#include "kernel_test_support.hpp"

namespace sparsering {
namespace {

using testing_support::uniform;

// Work of list (row, block) of a materialised index.
IndexWork list_work(const SparseIndex& index, int32_t row, int32_t block) {
  const auto list = static_cast<size_t>(int64_t{row} * index.q_blocks + block);
  IndexWork work;
  for (int32_t t = index.tile_offsets[list]; t < index.tile_offsets[list + 1]; ++t) {
    work.tiles += 1;
    work.masked_tiles += index.tile_masked[static_cast<size_t>(t)];
  }
  work.columns = index.column_offsets[list + 1] - index.column_offsets[list];
  work.column_chunks = (work.columns + index.block_k - 1) / index.block_k;
  return work;
}

// A pattern shaped like the published budgets: a local window, a few distant slashes, sinks and
// scattered heavy keys.
RowPattern realistic_pattern(std::mt19937_64& rng, int64_t n) {
  RowPattern row;
  const int64_t window = uniform(rng, 1, std::min<int64_t>(n, 600));
  for (int64_t d = 0; d < window; ++d) row.slash_offsets.push_back(d);
  for (int64_t s = uniform(rng, 0, 40); s > 0; --s) row.slash_offsets.push_back(uniform(rng, 0, n - 1));
  for (int64_t v = 0; v < uniform(rng, 0, 4); ++v) row.vertical_tokens.push_back(v);
  for (int64_t v = uniform(rng, 0, 300); v > 0; --v) row.vertical_tokens.push_back(uniform(rng, 0, n - 1));
  return row;
}

TEST(CountSparseIndex, EqualsMaterialisedIndex) {
  std::mt19937_64 rng = testing_support::test_rng();
  struct Case {
    LayoutKind kind;
    int32_t ranks;
    int64_t granularity;
  };
  const Case cases[] = {{LayoutKind::contiguous, 4, 0}, {LayoutKind::zigzag, 4, 0},  {LayoutKind::striped, 4, 64},
                        {LayoutKind::striped, 8, 1},    {LayoutKind::striped, 3, 100}, {LayoutKind::zigzag, 3, 0},
                        {LayoutKind::striped, 2, 40},   {LayoutKind::contiguous, 1, 0}};
  for (const Case& c : cases) {
    const int64_t unit = c.kind == LayoutKind::striped ? c.granularity * c.ranks
                         : c.kind == LayoutKind::zigzag ? 2 * int64_t{c.ranks}
                                                        : c.ranks;
    const int64_t n = unit * std::max<int64_t>(1, uniform(rng, 4000, 9000) / unit);
    const TokenLayout layout = make_token_layout(c.kind, n, c.ranks, c.granularity);
    std::vector<RowPattern> rows;
    for (int r = 0; r < 3; ++r) rows.push_back(realistic_pattern(rng, n));
    const std::vector<PreparedRowPattern> prepared = prepare_row_patterns(rows, n);
    const int32_t block_q = uniform(rng, 0, 1) == 0 ? 64 : 128;
    const int32_t block_k = uniform(rng, 0, 2) == 0 ? 32 : 64;
    for (int32_t q_rank = 0; q_rank < c.ranks; ++q_rank) {
      for (int32_t step = 0; step < c.ranks; ++step) {
        const StepGeometry geometry(IndexGeometry{RingPosition{layout, q_rank, kv_source_rank(q_rank, step, c.ranks)},
                                                   block_q, block_k});
        const SparseIndex index = build_sparse_index(geometry, prepared);
        const std::string where = str(to_string(c.kind), " W=", c.ranks, " G=", c.granularity, " N=", n, " rank ",
                                      q_rank, " step ", step);
        std::vector<IndexWork> per_block(static_cast<size_t>(geometry.q_blocks()));
        IndexWork rows_total;
        for (int32_t r = 0; r < 3; ++r) {
          const IndexWork row_work = count_sparse_index(geometry, prepared[static_cast<size_t>(r)], per_block);
          IndexWork expected;
          for (int32_t i = 0; i < geometry.q_blocks(); ++i) expected += list_work(index, r, i);
          ASSERT_EQ(row_work, expected) << where << " row " << r;
          rows_total += row_work;
        }
        for (int32_t i = 0; i < geometry.q_blocks(); ++i) {
          IndexWork expected;
          for (int32_t r = 0; r < 3; ++r) expected += list_work(index, r, i);
          ASSERT_EQ(per_block[static_cast<size_t>(i)], expected) << where << " block " << i;
        }
        ASSERT_EQ(rows_total, index_work(index)) << where;
        ASSERT_EQ(count_sparse_index(geometry, prepared), index_work(index)) << where;
      }
    }
  }
}

// Striped at G = block size (docs/algorithm.md section 4): query block i of rank r is global block
// iW + r, so at step s every rank computes exactly the global block diagonals D = s (mod W). A
// kept offset d touches diagonals floor(d/B) and ceil(d/B). On a kept diagonal D = mW + s a rank
// r >= s has 32 - m tiles (i - j = m) and a rank r < s has 31 - m (i - j = m + 1): ranks differ by
// at most one tile per kept diagonal of the step.
TEST(CountSparseIndex, StripedSlashWorkIsBalancedAcrossRanks) {
  std::mt19937_64 rng = testing_support::test_rng();
  const int32_t w = 8;
  const int32_t block = 64;
  const int64_t blocks_per_rank = 32;
  const TokenLayout layout = make_token_layout(LayoutKind::striped, block * w * blocks_per_rank, w, block);
  RowPattern row;
  for (int64_t d = 0; d < uniform(rng, 1, 400); ++d) row.slash_offsets.push_back(d);
  for (int s = 0; s < 10; ++s) row.slash_offsets.push_back(uniform(rng, 0, layout.seq_len_tokens() - 1));
  const PreparedRowPattern prepared = prepare_row_pattern(row, layout.seq_len_tokens());
  std::set<int64_t> diagonals;
  for (const OffsetInterval& interval : prepared.slash_intervals) {
    for (int64_t d = interval.lo; d <= interval.hi; ++d) {
      diagonals.insert(d / block);
      if (d % block != 0) diagonals.insert(d / block + 1);
    }
  }
  for (int32_t step = 0; step < w; ++step) {
    int64_t expected_total = 0;
    int64_t kept_diagonals = 0;
    for (const int64_t diagonal : diagonals) {
      if (diagonal % w != step || diagonal / w >= blocks_per_rank) continue;
      const int64_t m = diagonal / w;
      kept_diagonals += 1;
      expected_total += (w - step) * (blocks_per_rank - m) + step * std::max<int64_t>(0, blocks_per_rank - 1 - m);
    }
    int64_t low = INT64_MAX, high = 0, total = 0;
    for (int32_t rank = 0; rank < w; ++rank) {
      const StepGeometry geometry(IndexGeometry{RingPosition{layout, rank, kv_source_rank(rank, step, w)}, block, block});
      const int64_t tiles = count_sparse_index(geometry, prepared).tiles;
      low = std::min(low, tiles);
      high = std::max(high, tiles);
      total += tiles;
    }
    EXPECT_EQ(total, expected_total) << "step " << step;
    EXPECT_LE(high - low, kept_diagonals) << "step " << step;
  }
}

TEST(CountSparseIndex, BackwardUnitsOfAHandBuiltIndex) {
  // 4 rows (2 GQA groups of 2) x 2 query blocks over 3 key blocks of 64 keys:
  //   group 0: row 0 lists {0, 2} and {2}, row 1 lists {2} and {}  -> key block 2 holds 3 entries
  //   group 1: row 2 lists {1} and {0, 1}, row 3 lists {} and {1}  -> key block 1 holds 3 entries
  // and 130 columns in list (0, 0), 1 in list (3, 1).
  SparseIndex index;
  index.rows = 4;
  index.q_len = 128;
  index.kv_len = 192;
  index.q_blocks = 2;
  index.tile_offsets = {0, 2, 3, 4, 4, 5, 7, 7, 8};
  index.tile_block = {0, 2, 2, 2, 1, 0, 1, 1};
  index.tile_masked.assign(8, 0);
  index.column_offsets = {0, 130, 130, 130, 130, 130, 130, 130, 131};
  for (int32_t c = 0; c < 130; ++c) index.column_index.push_back(c);
  index.column_index.push_back(5);
  validate_sparse_index(index);
  const BackwardUnits grouped = backward_units(index, 2);
  EXPECT_EQ(grouped.key_lists, 4);  // group 0: blocks 0 and 2; group 1: blocks 0 and 1
  EXPECT_EQ(grouped.longest_key_list, 3);
  EXPECT_EQ(grouped.column_lists, 2);
  EXPECT_EQ(grouped.column_items, 3 + 1);  // ceil(130 / 64) + ceil(1 / 64)
  const BackwardUnits single = backward_units(index, 1);
  EXPECT_EQ(single.key_lists, 2 + 1 + 2 + 1);
  EXPECT_EQ(single.longest_key_list, 2);  // row 0's block 2, row 2's block 1
  EXPECT_EQ(backward_units(index, 4).longest_key_list, 3);
  EXPECT_THROW(backward_units(index, 3), InputError);
}

TEST(CountSparseIndex, RejectsWrongPerBlockSize) {
  const TokenLayout layout = make_token_layout(LayoutKind::contiguous, 256, 2);
  const StepGeometry geometry(IndexGeometry{RingPosition{layout, 0, 0}, 64, 64});
  const PreparedRowPattern row = prepare_row_pattern(std::vector<int64_t>{1}, {}, 256);
  std::vector<IndexWork> wrong(3);
  EXPECT_THROW(count_sparse_index(geometry, row, wrong), InputError);
}

}  // namespace
}  // namespace sparsering
