// The simulator's analytic work counter equals the kernels' index builder (kernels/index/) for
// every layout, stripe granularity, block shape and ring pair, on fresh random patterns: the
// design rule that the simulator and the kernels agree exactly (docs/architecture.md, Units and invariants). Sizes here
// are larger than the token-level brute force of work_counter_test.cpp can reach.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/error.hpp"
#include "kernels/index/count_sparse_index.hpp"
#include "kernels/index/row_pattern.hpp"
#include "kernels/index/step_geometry.hpp"
#include "sim/work/work_counter.hpp"
#include "tests/sim/work_oracle.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

KeptPattern random_pattern(std::mt19937_64& rng, int64_t n) {
  KeptPattern p;
  std::uniform_int_distribution<int64_t> any(0, n - 1);
  const int64_t window = static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(1, n / 8)));
  for (int64_t d = 0; d < window; ++d) p.slash_offsets.push_back(d);
  const auto far = static_cast<int64_t>(rng() % 64);
  for (int64_t k = 0; k < far; ++k) p.slash_offsets.push_back(static_cast<int64_t>(std::pow(static_cast<double>(n), static_cast<double>(rng() % 1000) / 1000.0)) % n);
  const auto sinks = static_cast<int64_t>(rng() % 70);
  for (int64_t v = 0; v < std::min(sinks, n); ++v) p.vertical_positions.push_back(v);
  const auto verticals = static_cast<int64_t>(rng() % 200);
  for (int64_t k = 0; k < verticals; ++k) p.vertical_positions.push_back(any(rng));
  return p;
}

TEST(WorkCounterIndexTest, EqualsIndexBuilderCounts) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  const int32_t blocks[] = {16, 32, 48, 64, 128};
  for (int trial = 0; trial < 60; ++trial) {
    const int32_t w = 1 + static_cast<int32_t>(rng() % 8);
    const auto kind = static_cast<LayoutKind>(rng() % 3);
    const int32_t block_q = blocks[rng() % 5];
    const int32_t block_k = blocks[rng() % 5];
    int64_t g = 0;
    int64_t unit = kind == LayoutKind::zigzag ? 2 * w : w;
    if (kind == LayoutKind::striped) {
      const int64_t gs[] = {1, 8, 16, 24, 64, 128, 256};
      g = gs[rng() % 7];
      unit = g * w;
    }
    const int64_t n = unit * (1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(1, 6000 / unit))));
    const TokenLayout layout = make_token_layout(kind, n, w, g);
    const KeptPattern pattern = random_pattern(rng, n);
    const BlockGeometry geo = make_block_geometry(layout, block_q, block_k);
    const WorkMatrix fast = count_head_work(geo, pattern);
    const PreparedRowPattern row = prepare_row_pattern(pattern.slash_offsets, pattern.vertical_positions, n);
    for (int32_t r = 0; r < w; ++r) {
      for (int32_t src = 0; src < w; ++src) {
        const StepGeometry step(IndexGeometry{RingPosition{layout, r, src}, block_q, block_k});
        const IndexWork expected = count_sparse_index(step, row);
        const WorkCounts& got = fast.at(r, src);
        const std::string where = str(to_string(kind), " N=", n, " W=", w, " G=", g, " bq=", block_q, " bk=", block_k,
                                      " r=", r, " src=", src);
        if (!(got.tiles == expected.tiles && got.masked_tiles == expected.masked_tiles && got.columns == expected.columns &&
              got.column_chunks == expected.column_chunks)) {
          // Say which side the token-level brute force agrees with.
          const WorkCounts truth = testing::brute_force_work(layout, block_q, block_k, pattern).at(r, src);
          ADD_FAILURE() << where << ": brute force tiles " << truth.tiles << " masked " << truth.masked_tiles << " columns "
                        << truth.columns << " chunks " << truth.column_chunks;
        }
        ASSERT_EQ(got.tiles, expected.tiles) << where;
        ASSERT_EQ(got.masked_tiles, expected.masked_tiles) << where;
        ASSERT_EQ(got.columns, expected.columns) << where;
        ASSERT_EQ(got.column_chunks, expected.column_chunks) << where;
      }
    }
  }
}

}  // namespace
}  // namespace sparsering
