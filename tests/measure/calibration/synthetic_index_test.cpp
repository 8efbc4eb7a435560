// Tests of measure/calibration/synthetic_index.hpp: exact counts, structural validity, columns
// outside the tile blocks, determinism, and refusal of counts that do not fit.
#include <gtest/gtest.h>

#include <random>
#include <set>

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
}

}  // namespace
}  // namespace sparsering
