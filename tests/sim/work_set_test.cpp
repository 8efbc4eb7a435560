// Work sets: per-layer, per-head-group sums of head work matrices, dense counting, micro batch
// scaling, and trace-based pattern selection (sim/work/work_set.hpp, sim/work/pattern_set.hpp).
#include "sim/work/work_set.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "sim/work/work_counter.hpp"
#include "tests/sim/sim_test_inputs.hpp"

namespace sparsering {
namespace {

TEST(WorkSetTest, GroupsSumTheirHeads) {
  const Trace trace = testing::small_trace(2, 4, 2048, 9);
  RecallSettings settings;
  settings.recall = 0.9;
  const PatternSet patterns = select_patterns(trace, 0, settings);
  ASSERT_EQ(patterns.patterns.size(), 8U);
  const BlockGeometry geo = make_block_geometry(make_token_layout(LayoutKind::striped, 2048, 4, 64), 64, 64);
  const WorkSet set = count_work_set(geo, patterns, 2, 3);
  for (int64_t l = 0; l < 2; ++l) {
    for (int64_t g = 0; g < 2; ++g) {
      WorkMatrix expected(4);
      for (int64_t h = 2 * g; h < 2 * g + 2; ++h) expected += count_head_work(geo, patterns.at(l, h));
      for (int32_t q = 0; q < 4; ++q) {
        for (int32_t kv = 0; kv < 4; ++kv) {
          EXPECT_EQ(set.at(l, g).at(q, kv).tiles, 3 * expected.at(q, kv).tiles);
          EXPECT_EQ(set.at(l, g).at(q, kv).column_chunks, 3 * expected.at(q, kv).column_chunks);
        }
      }
    }
  }
  EXPECT_THROW(count_work_set(geo, patterns, 3, 1), InputError);
  EXPECT_THROW(select_patterns(trace, 1, settings), InputError);
}

TEST(WorkSetTest, DenseIsEveryCausalTile) {
  const BlockGeometry geo = make_block_geometry(make_token_layout(LayoutKind::zigzag, 1024, 2), 64, 64);
  const WorkSet set = count_work_set(geo, dense_patterns(1, 4, 1024), 1, 1);
  // 16 blocks of 64: the causal block triangle 16 x 17 / 2 = 136 tiles per head, 16 of them masked.
  EXPECT_EQ(set.at(0, 0).total().tiles, 4 * 136);
  EXPECT_EQ(set.at(0, 0).total().masked_tiles, 4 * 16);
  EXPECT_EQ(set.at(0, 0).total().columns, 0);
}

}  // namespace
}  // namespace sparsering
