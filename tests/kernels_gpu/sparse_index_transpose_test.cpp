// GPU test of launch_sparse_index_transpose (kernels/cuda/sparse_index_transpose.cu) against a
// plain host transposition of random indexes from build_sparse_index: every (batch, KV head,
// key block) segment must list exactly the (head in group, query block, masked) entries whose
// tile list holds that key block, in ascending (head, query block) order, whether the view bounds
// its tiles exactly, loosely or not at all; and the key-block pass's order must hold every segment
// once, longest first, equal lengths in ascending segment order (also for a segment that holds
// every list of its group, and for 16384 segments).
#include "kernels/cuda/sparse_index_transpose.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "gpu_test_support.hpp"
#include "ring_harness.hpp"

namespace sparsering {
namespace {

using namespace testing_support;
using namespace gpu_testing;

TEST(SparseIndexTransposeGpu, EqualsHostTransposition) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  struct Case {
    LayoutKind kind;
    int32_t ranks;
    int64_t granularity;
    int64_t n;
    int32_t batch, q_heads, kv_heads, block_q, block_k;
    bool dense = false;  ///< every causal pair kept: key block 0's segment holds every list of its group
  };
  for (const Case& c : {Case{LayoutKind::contiguous, 1, 0, 1000, 2, 8, 2, 64, 64},
                        Case{LayoutKind::striped, 4, 64, 2048, 1, 4, 1, 128, 64},
                        Case{LayoutKind::zigzag, 2, 0, 600, 1, 3, 3, 64, 128},
                        // 8 x 128 lists per KV group: many list chunks, and chunk edges inside a head.
                        Case{LayoutKind::contiguous, 1, 0, 8192, 1, 8, 1, 64, 64},
                        // A segment as long as its group's 64 lists: the order's sort needs every bit
                        // of a power-of-two length.
                        Case{LayoutKind::contiguous, 1, 0, 1024, 1, 4, 1, 64, 64, true},
                        // 16384 segments of up to 256 entries: the sort's multi-pass path.
                        Case{LayoutKind::contiguous, 1, 0, 16384, 16, 4, 4, 64, 64}}) {
    const TokenLayout layout = make_token_layout(c.kind, c.n, c.ranks, c.granularity);
    AttentionShape shape;
    shape.batch = c.batch;
    shape.q_heads = c.q_heads;
    shape.kv_heads = c.kv_heads;
    shape.head_dim = 64;
    shape.q_len = layout.local_len();
    shape.kv_len = layout.local_len();
    std::vector<RowPattern> rows;
    for (int r = 0; r < c.batch * c.q_heads; ++r) {
      if (!c.dense) {
        rows.push_back(random_row_pattern(rng, c.n));
        continue;
      }
      RowPattern all;
      for (int64_t d = 0; d < c.n; ++d) all.slash_offsets.push_back(d);
      rows.push_back(all);
    }
    const int32_t kv_rank = static_cast<int32_t>(uniform(rng, 0, c.ranks - 1));
    const SparseIndex index =
        build_sparse_index(IndexGeometry{RingPosition{layout, c.ranks - 1, kv_rank}, c.block_q, c.block_k}, rows);

    const int32_t group = c.q_heads / c.kv_heads;
    const int64_t key_blocks = (shape.kv_len + c.block_k - 1) / c.block_k;
    std::vector<std::vector<int32_t>> expected(static_cast<size_t>(c.batch * c.kv_heads * key_blocks));
    for (int32_t row = 0; row < index.rows; ++row) {
      const int32_t b = row / c.q_heads;
      const int32_t h = row % c.q_heads;
      for (int32_t i = 0; i < index.q_blocks; ++i) {
        const size_t list = static_cast<size_t>(row * index.q_blocks + i);
        for (int32_t t = index.tile_offsets[list]; t < index.tile_offsets[list + 1]; ++t) {
          const size_t segment = static_cast<size_t>((b * c.kv_heads + h / group) * key_blocks + index.tile_block[static_cast<size_t>(t)]);
          expected[segment].push_back(((h % group) * index.q_blocks + i) * 2 + index.tile_masked[static_cast<size_t>(t)]);
        }
      }
    }
    for (auto& entries : expected) std::sort(entries.begin(), entries.end());

    const DeviceIndex d_index(index);
    CudaStream stream;
    // The exact tile count, a loose bound, and no bound (the count is read from the device).
    for (const int64_t max_tiles : {std::max<int64_t>(1, index.tiles()), 3 * index.tiles() + 7, int64_t{0}}) {
      SparseIndexView view = d_index.view();
      view.max_tiles = max_tiles;
      const TransposedIndex transposed = launch_sparse_index_transpose(view, shape, stream.get());
      stream.synchronize();
      ASSERT_EQ(transposed.view.segments, static_cast<int32_t>(expected.size()));
      std::vector<int32_t> offsets(expected.size() + 1);
      std::vector<int32_t> entries(static_cast<size_t>(std::max<int64_t>(1, index.tiles())));
      SPARSERING_CUDA_CHECK(cudaMemcpy(offsets.data(), transposed.view.offsets, offsets.size() * 4, cudaMemcpyDeviceToHost));
      SPARSERING_CUDA_CHECK(cudaMemcpy(entries.data(), transposed.view.entries, static_cast<size_t>(index.tiles()) * 4,
                                       cudaMemcpyDeviceToHost));
      ASSERT_EQ(offsets.front(), 0);
      ASSERT_EQ(offsets.back(), index.tiles()) << "max_tiles " << max_tiles;
      for (size_t s = 0; s < expected.size(); ++s) {
        const std::vector<int32_t> got(entries.begin() + offsets[s], entries.begin() + offsets[s + 1]);
        ASSERT_EQ(got, expected[s]) << "segment " << s << ", max_tiles " << max_tiles;
      }
      std::vector<int32_t> expected_order(expected.size());
      std::iota(expected_order.begin(), expected_order.end(), 0);
      std::stable_sort(expected_order.begin(), expected_order.end(),
                       [&](int32_t a, int32_t b) { return expected[static_cast<size_t>(a)].size() > expected[static_cast<size_t>(b)].size(); });
      std::vector<int32_t> order(expected.size());
      SPARSERING_CUDA_CHECK(cudaMemcpy(order.data(), transposed.view.order, order.size() * 4, cudaMemcpyDeviceToHost));
      ASSERT_EQ(order, expected_order) << "max_tiles " << max_tiles;
    }
  }
}

}  // namespace
}  // namespace sparsering
