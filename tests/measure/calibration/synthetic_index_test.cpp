// Tests of measure/calibration/synthetic_index.hpp: exact counts, structural validity, columns
// outside the tile blocks, determinism, lists that meet a part of the key blocks (a key block
// stride: their backward key lists against brute force), and refusal of counts that do not fit.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "tests/config/config_test_util.hpp"
#include "kernels/index/count_sparse_index.hpp"
#include "measure/calibration/synthetic_index.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

TEST(SyntheticIndex, ExactCountsOnRandomSpecs) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  for (int trial = 0; trial < 40; ++trial) {
    SyntheticIndexSpec spec;
    spec.rows = static_cast<int32_t>(rng() % 4 + 1);
    spec.block_q = (rng() % 2 == 0) ? 64 : 128;
    spec.block_k = (rng() % 2 == 0) ? 64 : 32;
    spec.q_len_tokens = static_cast<int64_t>(rng() % 1000 + 1);
    spec.kv_len_tokens = static_cast<int64_t>(rng() % 1000 + 64);
    const int64_t full_blocks = spec.kv_len_tokens / spec.block_k;
    spec.tiles_per_list = static_cast<int32_t>(rng() % static_cast<uint64_t>(full_blocks + 1));
    spec.chunks_per_list = static_cast<int32_t>(rng() % static_cast<uint64_t>(full_blocks - spec.tiles_per_list + 1));
    spec.seed = rng();
    spec.banded = trial % 2 == 1;
    const SparseIndex index = make_synthetic_index(spec);
    SCOPED_TRACE(testing::Message() << "trial " << trial << (spec.banded ? " banded" : " random") << " tiles " << spec.tiles_per_list << " chunks "
                                    << spec.chunks_per_list << " kv " << spec.kv_len_tokens);
    EXPECT_NO_THROW(validate_sparse_index(index));
    const int64_t lists = int64_t{spec.rows} * index.q_blocks;
    EXPECT_EQ(index.q_blocks, (spec.q_len_tokens + spec.block_q - 1) / spec.block_q);
    EXPECT_EQ(index.tiles(), lists * spec.tiles_per_list);
    EXPECT_EQ(index.column_chunks(), lists * spec.chunks_per_list);
    EXPECT_EQ(index.columns(), lists * spec.chunks_per_list * spec.block_k);
    for (const uint8_t masked : index.tile_masked) EXPECT_EQ(masked, 0);
    // Brute force: no column falls in a key block of its own list's tiles.
    for (int64_t list = 0; list < lists; ++list) {
      const auto l = static_cast<size_t>(list);
      std::set<int32_t> blocks(index.tile_block.begin() + index.tile_offsets[l],
                               index.tile_block.begin() + index.tile_offsets[l + 1]);
      for (int32_t c = index.column_offsets[l]; c < index.column_offsets[l + 1]; ++c) {
        ASSERT_EQ(blocks.count(index.column_index[static_cast<size_t>(c)] / spec.block_k), 0u);
      }
    }
  }
}

TEST(SyntheticIndex, ColumnsPerListFillTheLastItemPartly) {
  // columns_per_list gives lists whose last chunk and 64-column item are partly filled.
  for (const bool banded : {false, true}) {
    SyntheticIndexSpec spec{2, 64 * 16, 64 * 16, 64, 64, 3, 2, 7, banded, 100};
    const SparseIndex index = make_synthetic_index(spec);
    EXPECT_NO_THROW(validate_sparse_index(index));
    const int64_t lists = 2 * 16;
    EXPECT_EQ(index.columns(), lists * 100);
    EXPECT_EQ(index.column_chunks(), lists * 2);
    const BackwardUnits units = backward_units(index, 2);
    EXPECT_EQ(units.column_lists, lists);
    EXPECT_EQ(units.column_items, lists * 2);
    spec.chunks_per_list = 1;
    EXPECT_THROW(make_synthetic_index(spec), InputError);
  }
}

TEST(SyntheticIndex, BandedListsShiftAlongDiagonalsAndShareAColumnPool) {
  SyntheticIndexSpec spec{3, 64 * 40, 64 * 32, 64, 64, 4, 3, sparsering::testing_support::test_seed(), true};
  const SparseIndex index = make_synthetic_index(spec);
  ASSERT_NO_THROW(validate_sparse_index(index));
  const auto tiles_of = [&](size_t list) {
    return std::set<int32_t>(index.tile_block.begin() + index.tile_offsets[list], index.tile_block.begin() + index.tile_offsets[list + 1]);
  };
  for (int32_t row = 0; row < spec.rows; ++row) {
    std::set<int32_t> pool;
    for (int32_t i = 0; i < index.q_blocks; ++i) {
      const size_t list = static_cast<size_t>(row) * static_cast<size_t>(index.q_blocks) + static_cast<size_t>(i);
      if (i > 0) {
        std::set<int32_t> shifted;
        for (const int32_t j : tiles_of(list - 1)) shifted.insert((j + 1) % 32);
        EXPECT_EQ(tiles_of(list), shifted) << "row " << row << " block " << i;
      }
      pool.insert(index.column_index.begin() + index.column_offsets[list], index.column_index.begin() + index.column_offsets[list + 1]);
    }
    // Every list takes its 3 x 64 columns from one pool of (4 + 3) x 64.
    EXPECT_LE(pool.size(), size_t{7 * 64});
  }
}

TEST(SyntheticIndex, AKeyBlockStrideKeepsTilesAndColumnsInEveryStridethBlock) {
  // Random and banded lists of a 1/stride part of the chunk: every tile and column lies in a
  // covered block (j mod stride = 0), the counts are exact, and the backward's key lists (brute
  // force: the distinct (K/V row, key block) pairs of the tiles) cover only those blocks; banded
  // diagonals meet every covered block, so their key lists are the K/V rows x covered blocks.
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  for (int trial = 0; trial < 24; ++trial) {
    SyntheticIndexSpec spec;
    spec.key_block_stride = static_cast<int32_t>(rng() % 8 + 1);
    spec.rows = 4;
    spec.block_q = (rng() % 2 == 0) ? 64 : 128;
    spec.block_k = (rng() % 2 == 0) ? 64 : 128;
    spec.kv_len_tokens = spec.block_k * static_cast<int64_t>(rng() % 40 + 8) + static_cast<int64_t>(rng() % 2) * 17;
    spec.q_len_tokens = spec.kv_len_tokens;
    const int64_t full_blocks = spec.kv_len_tokens / spec.block_k;
    const int64_t covered_full = (full_blocks + spec.key_block_stride - 1) / spec.key_block_stride;
    spec.tiles_per_list = static_cast<int32_t>(rng() % static_cast<uint64_t>(covered_full) + 1);
    spec.chunks_per_list = static_cast<int32_t>(rng() % static_cast<uint64_t>(covered_full - spec.tiles_per_list + 1));
    spec.seed = rng();
    spec.banded = trial % 2 == 1;
    SCOPED_TRACE(testing::Message() << "trial " << trial << (spec.banded ? " banded" : " random") << " stride "
                                    << spec.key_block_stride << " tiles " << spec.tiles_per_list << " chunks "
                                    << spec.chunks_per_list << " kv " << spec.kv_len_tokens << " block_k " << spec.block_k);
    const SparseIndex index = make_synthetic_index(spec);
    ASSERT_NO_THROW(validate_sparse_index(index));
    const int64_t lists = int64_t{spec.rows} * index.q_blocks;
    EXPECT_EQ(index.tiles(), lists * spec.tiles_per_list);
    EXPECT_EQ(index.column_chunks(), lists * spec.chunks_per_list);
    for (const int32_t j : index.tile_block) ASSERT_EQ(j % spec.key_block_stride, 0) << "tile in block " << j;
    for (const int32_t c : index.column_index) {
      ASSERT_EQ((c / spec.block_k) % spec.key_block_stride, 0) << "column " << c;
      // At stride 1 random columns may fall in a partial last block, as before strides existed.
      if (spec.key_block_stride > 1) {
        ASSERT_LT(c / spec.block_k, full_blocks) << "column " << c << " in the partial last block";
      }
    }
    for (int64_t list = 0; list < lists; ++list) {
      const auto l = static_cast<size_t>(list);
      std::set<int32_t> blocks(index.tile_block.begin() + index.tile_offsets[l], index.tile_block.begin() + index.tile_offsets[l + 1]);
      ASSERT_EQ(blocks.size(), static_cast<size_t>(spec.tiles_per_list));
      for (int32_t c = index.column_offsets[l]; c < index.column_offsets[l + 1]; ++c) {
        ASSERT_EQ(blocks.count(index.column_index[static_cast<size_t>(c)] / spec.block_k), 0u);
      }
    }
    const int32_t group = 2;  // rows 0-1 share K/V row 0, rows 2-3 K/V row 1
    std::set<std::pair<int32_t, int32_t>> pairs;
    for (int64_t list = 0; list < lists; ++list) {
      const auto row = static_cast<int32_t>(list / index.q_blocks);
      const auto l = static_cast<size_t>(list);
      for (int32_t t = index.tile_offsets[l]; t < index.tile_offsets[l + 1]; ++t) {
        pairs.insert({row / group, index.tile_block[static_cast<size_t>(t)]});
      }
    }
    EXPECT_EQ(backward_units(index, group).key_lists, static_cast<int64_t>(pairs.size()));
    const int64_t key_blocks = (spec.kv_len_tokens + spec.block_k - 1) / spec.block_k;
    const int64_t covered = (key_blocks + spec.key_block_stride - 1) / spec.key_block_stride;
    EXPECT_LE(static_cast<int64_t>(pairs.size()), 2 * covered);
    if (spec.banded && index.q_blocks >= covered && spec.tiles_per_list > 0) {
      EXPECT_EQ(static_cast<int64_t>(pairs.size()), 2 * covered);
    }
  }
}

TEST(SyntheticIndex, StrideOneDrawsWhatTheIndexDrewBeforeStrides) {
  // Recorded runs are rebuilt from their seeds (restore_backward_units), so stride 1 must draw
  // exactly what the drawing code drew before strides existed: the tiles and a weighted sum of the
  // columns (sum of (k + 1) x column k) it gave for this spec, seed 11.
  struct Expected {
    bool banded;
    std::vector<int32_t> tiles;
    int64_t column_sum;
  };
  for (const Expected& e : {Expected{false, {0, 3, 0, 2, 2, 3, 0, 1, 1, 2, 1, 3, 1, 3, 0, 3}, 15901567},
                            Expected{true, {0, 3, 0, 1, 1, 2, 2, 3, 0, 1, 1, 2, 2, 3, 0, 3}, 16033904}}) {
    const SparseIndex index = make_synthetic_index({2, 256, 256, 64, 64, 2, 1, 11, e.banded});
    EXPECT_EQ(index.tile_block, e.tiles) << (e.banded ? "banded" : "random");
    ASSERT_EQ(index.column_index.size(), 512u);
    int64_t sum = 0;
    for (size_t k = 0; k < index.column_index.size(); ++k) sum += static_cast<int64_t>(k + 1) * index.column_index[k];
    EXPECT_EQ(sum, e.column_sum) << (e.banded ? "banded" : "random");
  }
}

TEST(SyntheticIndex, UnsortedColumnsAreTheSameColumnsInDrawOrder) {
  // Counting units skips the sort; every list must hold the same columns, and the tiles must be
  // the same (the draws do not depend on the order).
  for (const bool banded : {false, true}) {
    SyntheticIndexSpec spec{4, 2048, 4096, 64, 64, 5, 6, 3, banded};
    spec.columns_per_list = 330;
    const SparseIndex sorted = make_synthetic_index(spec);
    spec.sorted_columns = false;
    const SparseIndex unsorted = make_synthetic_index(spec);
    EXPECT_EQ(unsorted.tile_block, sorted.tile_block);
    ASSERT_EQ(unsorted.column_offsets, sorted.column_offsets);
    bool any_out_of_order = false;
    for (size_t list = 0; list + 1 < sorted.column_offsets.size(); ++list) {
      const auto begin = static_cast<std::ptrdiff_t>(sorted.column_offsets[list]);
      const auto end = static_cast<std::ptrdiff_t>(sorted.column_offsets[list + 1]);
      std::vector<int32_t> columns(unsorted.column_index.begin() + begin, unsorted.column_index.begin() + end);
      any_out_of_order = any_out_of_order || !std::is_sorted(columns.begin(), columns.end());
      std::sort(columns.begin(), columns.end());
      EXPECT_TRUE(std::equal(columns.begin(), columns.end(), sorted.column_index.begin() + begin)) << "list " << list;
    }
    EXPECT_TRUE(any_out_of_order) << (banded ? "banded" : "random") << ": the test must see draw order";
  }
}

TEST(SyntheticIndex, SameSeedSameIndexOtherSeedOtherIndex) {
  SyntheticIndexSpec spec{2, 512, 1024, 64, 64, 3, 2, 7};
  const SparseIndex a = make_synthetic_index(spec);
  const SparseIndex b = make_synthetic_index(spec);
  EXPECT_EQ(a.tile_block, b.tile_block);
  EXPECT_EQ(a.column_index, b.column_index);
  spec.seed = 8;
  const SparseIndex c = make_synthetic_index(spec);
  EXPECT_NE(a.column_index, c.column_index);
}

TEST(SyntheticIndex, RefusesCountsThatDoNotFit) {
  test::expect_input_error([] { make_synthetic_index({1, 128, 256, 64, 64, 3, 2, 0}); }, {"3 tiles + 2 chunks", "4 full key blocks"});
  test::expect_input_error([] { make_synthetic_index({1, 128, 256, 64, 64, -1, 0, 0}); }, {"must be >= 0"});
  test::expect_input_error([] { make_synthetic_index({0, 128, 256, 64, 64, 1, 0, 0}); }, {"rows"});
  // The partial last block may hold a tile but no column chunk.
  EXPECT_NO_THROW(make_synthetic_index({1, 128, 200, 64, 64, 4, 0, 0}));
  test::expect_input_error([] { make_synthetic_index({1, 128, 200, 64, 64, 3, 1, 0}); }, {"full key blocks"});
  // A stride of 2 over 8 key blocks covers 4: 4 tiles fit, 3 tiles + 2 chunks do not.
  EXPECT_NO_THROW(make_synthetic_index({1, 512, 512, 64, 64, 4, 0, 0, false, -1, 2}));
  test::expect_input_error([] { make_synthetic_index({1, 512, 512, 64, 64, 3, 2, 0, false, -1, 2}); },
                           {"3 tiles + 2 chunks", "4 full key blocks", "every 2 of 8"});
  test::expect_input_error([] { make_synthetic_index({1, 512, 512, 64, 64, 5, 0, 0, false, -1, 2}); }, {"5 tiles"});
  test::expect_input_error([] { make_synthetic_index({1, 512, 512, 64, 64, 1, 0, 0, false, -1, 0}); }, {"stride must be >= 1"});
}

}  // namespace
}  // namespace sparsering
