// GPU test of launch_build_sparse_index (kernels/cuda/sparse_index_build.cu): for random kept
// patterns (kernel_test_support.hpp), every layout (contiguous, zigzag, striped with stripes
// smaller than, equal to and larger than the blocks), ring sizes 1-4, every (query rank, K/V
// rank) and several block shapes (including partial last blocks), the GPU index must equal the
// CPU builder's (build_sparse_index) array for array.
#include "kernels/cuda/sparse_index_build.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/error.hpp"
#include "gpu_test_support.hpp"
#include "kernel_test_support.hpp"
#include "kernels/index/build_sparse_index.hpp"

namespace sparsering {
namespace {

using namespace testing_support;
using namespace gpu_testing;

template <typename T>
std::vector<T> download(const DeviceBuffer<T>& buffer, int64_t count) {
  std::vector<T> all = buffer.download();
  all.resize(static_cast<size_t>(count));
  return all;
}

TEST(SparseIndexBuildGpu, EqualsCpuBuilder) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  struct Case {
    LayoutKind kind;
    int32_t ranks;
    int64_t granularity;
    int64_t n;
    int32_t block_q, block_k;
  };
  CudaStream stream;
  for (const Case& c : {Case{LayoutKind::contiguous, 1, 0, 1000, 64, 64}, Case{LayoutKind::contiguous, 3, 0, 900, 128, 64},
                        Case{LayoutKind::zigzag, 2, 0, 1200, 64, 128}, Case{LayoutKind::zigzag, 4, 0, 1040, 48, 16},
                        Case{LayoutKind::striped, 4, 16, 2048, 64, 64}, Case{LayoutKind::striped, 2, 64, 1280, 128, 128},
                        Case{LayoutKind::striped, 3, 100, 1800, 64, 64}, Case{LayoutKind::striped, 2, 1, 512, 64, 32}}) {
    const TokenLayout layout = make_token_layout(c.kind, c.n, c.ranks, c.granularity);
    const int32_t rows = 5;
    std::vector<RowPattern> patterns;
    for (int32_t r = 0; r < rows; ++r) patterns.push_back(random_row_pattern(rng, c.n));
    patterns[0] = RowPattern{};  // keeps only itself
    // Kept sets as the GPU selection writes them: unique, ascending, padded to a capacity.
    int32_t capacity = 1;
    std::vector<std::vector<int32_t>> verticals, slashes;
    for (const RowPattern& p : patterns) {
      std::vector<int32_t> v(p.vertical_tokens.begin(), p.vertical_tokens.end());
      std::vector<int32_t> s(p.slash_offsets.begin(), p.slash_offsets.end());
      for (auto* list : {&v, &s}) {
        std::sort(list->begin(), list->end());
        list->erase(std::unique(list->begin(), list->end()), list->end());
        capacity = std::max(capacity, static_cast<int32_t>(list->size()));
      }
      verticals.push_back(v);
      slashes.push_back(s);
    }
    std::vector<int32_t> v_count, s_count, v_keys(static_cast<size_t>(rows * capacity), -1),
        s_offsets(static_cast<size_t>(rows * capacity), -1);
    for (int32_t r = 0; r < rows; ++r) {
      v_count.push_back(static_cast<int32_t>(verticals[static_cast<size_t>(r)].size()));
      s_count.push_back(static_cast<int32_t>(slashes[static_cast<size_t>(r)].size()));
      std::copy(verticals[static_cast<size_t>(r)].begin(), verticals[static_cast<size_t>(r)].end(),
                v_keys.begin() + r * capacity);
      std::copy(slashes[static_cast<size_t>(r)].begin(), slashes[static_cast<size_t>(r)].end(),
                s_offsets.begin() + r * capacity);
    }
    const DeviceBuffer<int32_t> d_vc(v_count), d_vk(v_keys), d_sc(s_count), d_so(s_offsets);
    const KeptSetsView kept{rows, capacity, d_vc.data(), d_vk.data(), d_sc.data(), d_so.data()};
    for (int32_t q_rank = 0; q_rank < c.ranks; ++q_rank) {
      for (int32_t kv_rank = 0; kv_rank < c.ranks; ++kv_rank) {
        const RingPosition position{layout, q_rank, kv_rank};
        const SparseIndex expected = build_sparse_index(IndexGeometry{position, c.block_q, c.block_k}, patterns);
        const DeviceSparseIndex got = launch_build_sparse_index(kept, position, c.block_q, c.block_k, stream.get());
        stream.synchronize();
        const std::string where = str(to_string(c.kind), " W=", c.ranks, " G=", c.granularity, " N=", c.n, " blocks ",
                                      c.block_q, "x", c.block_k, " q_rank ", q_rank, " kv_rank ", kv_rank);
        ASSERT_EQ(got.q_blocks, expected.q_blocks) << where;
        ASSERT_EQ(got.tiles, expected.tiles()) << where;
        ASSERT_EQ(got.columns, expected.columns()) << where;
        EXPECT_EQ(got.tile_offsets.download(), expected.tile_offsets) << where;
        EXPECT_EQ(download(got.tile_block, got.tiles), expected.tile_block) << where;
        EXPECT_EQ(download(got.tile_masked, got.tiles), expected.tile_masked) << where;
        EXPECT_EQ(got.column_offsets.download(), expected.column_offsets) << where;
        EXPECT_EQ(download(got.column_index, got.columns), expected.column_index) << where;
        if (HasFailure()) return;
      }
    }
  }
}

TEST(SparseIndexBuildGpu, RejectsBadGeometry) {
  const KeptSetsView kept{1, 1, nullptr, nullptr, nullptr, nullptr};
  const RingPosition position{make_token_layout(LayoutKind::contiguous, 64, 2), 0, 2};
  EXPECT_THROW(launch_build_sparse_index(kept, position, 64, 64, nullptr), InputError);
  const RingPosition ok{make_token_layout(LayoutKind::contiguous, 64, 2), 0, 1};
  EXPECT_THROW(launch_build_sparse_index(kept, ok, 0, 64, nullptr), InputError);
}

}  // namespace
}  // namespace sparsering
