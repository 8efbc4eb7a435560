// GPU tests of the index build (kernels/cuda/sparse_index_build.cu): for random kept patterns
// (kernel_test_support.hpp; seed printed, SPARSERING_TEST_SEED repeats it), every layout
// (contiguous, zigzag, striped with stripes smaller than, equal to and larger than the blocks),
// ring sizes 1-4, every (query rank, K/V rank) and several block shapes (including partial last
// blocks), the GPU index must equal the CPU builder's (build_sparse_index) array for array, built
// three ways: with exact arrays (launch_build_sparse_index), into arrays of the capacity bound
// without host synchronization (launch_build_sparse_index_into, the count pass's bitmaps reused),
// and the same with the bitmaps marked again in the fill pass. Also: a capacity too small is
// reported by read_sparse_index_counts while the cut index stays within its arrays; an index is
// rebuilt in place with other kept sets; the densest pattern fits the capacity bound. The
// SparseIndexBuildGpu suite keeps to a few cases (compute-sanitizer runs it); the Sweep suite has
// them all.
#include "kernels/cuda/sparse_index_build.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

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

/// Kept sets as the GPU selection writes them: unique, ascending, padded to a capacity (at least
/// the longest list), in device memory.
class DeviceKeptSets {
 public:
  explicit DeviceKeptSets(const std::vector<RowPattern>& patterns, int32_t min_capacity = 1) {
    rows_ = static_cast<int32_t>(patterns.size());
    capacity_ = min_capacity;
    std::vector<std::vector<int32_t>> verticals, slashes;
    for (const RowPattern& p : patterns) {
      std::vector<int32_t> v(p.vertical_tokens.begin(), p.vertical_tokens.end());
      std::vector<int32_t> s(p.slash_offsets.begin(), p.slash_offsets.end());
      for (auto* list : {&v, &s}) {
        std::sort(list->begin(), list->end());
        list->erase(std::unique(list->begin(), list->end()), list->end());
        capacity_ = std::max(capacity_, static_cast<int32_t>(list->size()));
      }
      verticals.push_back(v);
      slashes.push_back(s);
    }
    std::vector<int32_t> v_count, s_count, v_keys(static_cast<size_t>(int64_t{rows_} * capacity_), -1),
        s_offsets(static_cast<size_t>(int64_t{rows_} * capacity_), -1);
    for (int32_t r = 0; r < rows_; ++r) {
      v_count.push_back(static_cast<int32_t>(verticals[static_cast<size_t>(r)].size()));
      s_count.push_back(static_cast<int32_t>(slashes[static_cast<size_t>(r)].size()));
      std::copy(verticals[static_cast<size_t>(r)].begin(), verticals[static_cast<size_t>(r)].end(),
                v_keys.begin() + int64_t{r} * capacity_);
      std::copy(slashes[static_cast<size_t>(r)].begin(), slashes[static_cast<size_t>(r)].end(),
                s_offsets.begin() + int64_t{r} * capacity_);
    }
    vertical_count_ = DeviceBuffer<int32_t>(v_count);
    vertical_keys_ = DeviceBuffer<int32_t>(v_keys);
    slash_count_ = DeviceBuffer<int32_t>(s_count);
    slash_offsets_ = DeviceBuffer<int32_t>(s_offsets);
    SPARSERING_CUDA_CHECK(cudaDeviceSynchronize());  // uploads done before a non-blocking stream reads them
  }
  KeptSetsView view() const {
    return KeptSetsView{rows_, capacity_, vertical_count_.data(), vertical_keys_.data(), slash_count_.data(),
                        slash_offsets_.data()};
  }

 private:
  int32_t rows_ = 0;
  int32_t capacity_ = 1;
  DeviceBuffer<int32_t> vertical_count_, vertical_keys_, slash_count_, slash_offsets_;
};

/// The device index equals the CPU one array for array (entries past the totals ignored).
void expect_equal(const DeviceSparseIndex& got, const SparseIndex& expected, const std::string& where) {
  ASSERT_EQ(got.q_blocks, expected.q_blocks) << where;
  ASSERT_EQ(got.tiles, expected.tiles()) << where;
  ASSERT_EQ(got.columns, expected.columns()) << where;
  EXPECT_EQ(got.tile_offsets.download(), expected.tile_offsets) << where;
  EXPECT_EQ(download(got.tile_block, got.tiles), expected.tile_block) << where;
  EXPECT_EQ(download(got.tile_masked, got.tiles), expected.tile_masked) << where;
  EXPECT_EQ(got.column_offsets.download(), expected.column_offsets) << where;
  EXPECT_EQ(download(got.column_index, got.columns), expected.column_index) << where;
}

struct BuildCase {
  LayoutKind kind;
  int32_t ranks;
  int64_t granularity;
  int64_t n;
  int32_t block_q, block_k;
};

/// One case, every (query rank, K/V rank): the three ways of building equal the CPU builder.
void check_build_case(const BuildCase& c, std::mt19937_64& rng, cudaStream_t stream) {
  const TokenLayout layout = make_token_layout(c.kind, c.n, c.ranks, c.granularity);
  const int32_t rows = 5;
  std::vector<RowPattern> patterns;
  for (int32_t r = 0; r < rows; ++r) patterns.push_back(random_row_pattern(rng, c.n));
  patterns[0] = RowPattern{};  // keeps only itself
  DeviceKeptSets sets(patterns);
  const KeptSetsView kept = sets.view();
  const int32_t capacity = kept.capacity;
  for (int32_t q_rank = 0; q_rank < c.ranks; ++q_rank) {
    for (int32_t kv_rank = 0; kv_rank < c.ranks; ++kv_rank) {
      const RingPosition position{layout, q_rank, kv_rank};
      const SparseIndex expected = build_sparse_index(IndexGeometry{position, c.block_q, c.block_k}, patterns);
      const std::string where = str(to_string(c.kind), " W=", c.ranks, " G=", c.granularity, " N=", c.n, " blocks ",
                                    c.block_q, "x", c.block_k, " q_rank ", q_rank, " kv_rank ", kv_rank);
      const DeviceSparseIndex exact = launch_build_sparse_index(kept, position, c.block_q, c.block_k, stream);
      SPARSERING_CUDA_CHECK(cudaStreamSynchronize(stream));
      expect_equal(exact, expected, where + " (exact arrays)");
      const SparseIndexCapacity bound =
          sparse_index_capacity_bound(position, rows, c.block_q, c.block_k, capacity, capacity);
      ASSERT_GE(bound.tiles, expected.tiles()) << where;
      ASSERT_GE(bound.columns, expected.columns()) << where;
      // Bitmaps kept for the fill pass or marked again; with the per-row tables (the diagonal
      // table on aligned geometries, the keys per key block) or without.
      for (const SparseIndexBuildOptions options :
           {SparseIndexBuildOptions{}, SparseIndexBuildOptions{0, int64_t{64} << 20}, SparseIndexBuildOptions{0, 0}}) {
        DeviceSparseIndex into = allocate_sparse_index(position, rows, c.block_q, c.block_k, bound);
        launch_build_sparse_index_into(kept, position, into, stream, options);
        EXPECT_EQ(into.tiles, -1);
        read_sparse_index_counts(into, stream);
        expect_equal(into, expected,
                     where + str(" (capacity bound, bitmap scratch limit ", options.max_bitmap_bytes,
                                 ", row table limit ", options.max_row_table_bytes, ")"));
        // The view bounds the tiles by the arrays, not by this build's count: a later build into
        // the same arrays (or a graph captured with this view) may hold more.
        EXPECT_EQ(into.view().max_tiles, std::max<int64_t>(1, bound.tiles)) << where;
      }
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// A few cases (also run under compute-sanitizer): one rank, zigzag with key blocks larger than
// query blocks, stripes equal to the blocks, and aligned geometries (the diagonal table): zigzag
// halves of several blocks, stripes of three blocks that straddle bitmap words.
TEST(SparseIndexBuildGpu, EqualsCpuBuilder) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  CudaStream stream;
  for (const BuildCase& c : {BuildCase{LayoutKind::contiguous, 1, 0, 1000, 64, 64},
                             BuildCase{LayoutKind::zigzag, 2, 0, 1200, 64, 128},
                             BuildCase{LayoutKind::striped, 2, 64, 1280, 128, 128},
                             BuildCase{LayoutKind::zigzag, 2, 0, 1024, 64, 64},
                             BuildCase{LayoutKind::striped, 3, 48, 4608, 16, 16}}) {
    check_build_case(c, rng, stream.get());
    if (HasFailure()) return;
  }
}

// Every layout, ring sizes 1-4, stripes smaller than, equal to and larger than the blocks,
// blocks that are not multiples of 64, partial last blocks, and aligned geometries (runs of 1 to
// 128 blocks, runs that straddle bitmap words).
TEST(SparseIndexBuildGpuSweep, EqualsCpuBuilder) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  CudaStream stream;
  for (const BuildCase& c :
       {BuildCase{LayoutKind::contiguous, 1, 0, 1000, 64, 64}, BuildCase{LayoutKind::contiguous, 3, 0, 900, 128, 64},
        BuildCase{LayoutKind::zigzag, 2, 0, 1200, 64, 128}, BuildCase{LayoutKind::zigzag, 4, 0, 1040, 48, 16},
        BuildCase{LayoutKind::striped, 4, 16, 2048, 64, 64}, BuildCase{LayoutKind::striped, 2, 64, 1280, 128, 128},
        BuildCase{LayoutKind::striped, 3, 100, 1800, 64, 64}, BuildCase{LayoutKind::striped, 2, 1, 512, 64, 32},
        BuildCase{LayoutKind::contiguous, 1, 0, 5000, 1024, 64},
        // Aligned (block_q = block_k, runs of whole blocks): the diagonal table.
        BuildCase{LayoutKind::contiguous, 1, 0, 1024, 64, 64}, BuildCase{LayoutKind::contiguous, 2, 0, 4096, 16, 16},
        BuildCase{LayoutKind::contiguous, 3, 0, 1536, 64, 64}, BuildCase{LayoutKind::zigzag, 4, 0, 2048, 32, 32},
        BuildCase{LayoutKind::striped, 4, 64, 2048, 64, 64}, BuildCase{LayoutKind::striped, 2, 256, 4096, 128, 128},
        BuildCase{LayoutKind::striped, 3, 96, 1728, 32, 32}}) {
    check_build_case(c, rng, stream.get());
    if (HasFailure()) return;
  }
}

// An index allocated too small: the totals are reported, the offsets stay within the arrays and
// never decrease, and the entries that fit are the expected ones.
TEST(SparseIndexBuildGpu, ReportsTooSmallCapacity) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  CudaStream stream;
  const TokenLayout layout = make_token_layout(LayoutKind::striped, 2048, 2, 64);
  const RingPosition position{layout, 1, 0};
  const int32_t rows = 3;
  std::vector<RowPattern> patterns;
  for (int32_t r = 0; r < rows; ++r) patterns.push_back(random_row_pattern(rng, layout.seq_len_tokens()));
  patterns[1].vertical_tokens.push_back(5);  // at least one column somewhere
  patterns[1].vertical_tokens.push_back(1500);
  const SparseIndex expected = build_sparse_index(IndexGeometry{position, 64, 64}, patterns);
  ASSERT_GT(expected.tiles(), 1);
  DeviceKeptSets sets(patterns);
  const SparseIndexCapacity small{expected.tiles() / 2, expected.columns() / 2};
  DeviceSparseIndex index = allocate_sparse_index(position, rows, 64, 64, small);
  launch_build_sparse_index_into(sets.view(), position, index, stream.get());
  EXPECT_THROW(read_sparse_index_counts(index, stream.get()), InputError);
  const std::vector<int64_t> needed = index.needed.download();
  EXPECT_EQ(needed[0], expected.tiles());
  EXPECT_EQ(needed[1], expected.columns());
  // Offsets clamped to the capacity, and the entries that fit equal to the full index's first ones.
  auto check_cut = [](const std::vector<int32_t>& offsets, const std::vector<int32_t>& entries,
                      const std::vector<int32_t>& want_offsets, const std::vector<int32_t>& want_entries,
                      int64_t limit, const char* what) {
    ASSERT_EQ(offsets.size(), want_offsets.size()) << what;
    for (size_t i = 0; i < offsets.size(); ++i) {
      ASSERT_EQ(offsets[i], std::min<int64_t>(want_offsets[i], limit)) << what << " offset " << i;
    }
    for (int64_t e = 0; e < limit; ++e) {
      ASSERT_EQ(entries[static_cast<size_t>(e)], want_entries[static_cast<size_t>(e)]) << what << " entry " << e;
    }
  };
  check_cut(index.tile_offsets.download(), download(index.tile_block, small.tiles), expected.tile_offsets,
            expected.tile_block, small.tiles, "tiles");
  check_cut(index.column_offsets.download(), download(index.column_index, small.columns), expected.column_offsets,
            expected.column_index, small.columns, "columns");
}

// One allocation, two builds with different kept sets: nothing of the first survives.
TEST(SparseIndexBuildGpu, RebuildsInPlace) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  CudaStream stream;
  const TokenLayout layout = make_token_layout(LayoutKind::zigzag, 1536, 2);
  const RingPosition position{layout, 0, 1};
  const int32_t rows = 4;
  const int32_t capacity = 1536;
  DeviceSparseIndex index = allocate_sparse_index(
      position, rows, 64, 64, sparse_index_capacity_bound(position, rows, 64, 64, capacity, capacity));
  for (int round = 0; round < 2; ++round) {
    std::vector<RowPattern> patterns;
    for (int32_t r = 0; r < rows; ++r) patterns.push_back(random_row_pattern(rng, layout.seq_len_tokens()));
    const SparseIndex expected = build_sparse_index(IndexGeometry{position, 64, 64}, patterns);
    DeviceKeptSets sets(patterns, capacity);
    launch_build_sparse_index_into(sets.view(), position, index, stream.get());
    read_sparse_index_counts(index, stream.get());
    expect_equal(index, expected, str("round ", round));
    if (HasFailure()) return;
  }
}

// Every offset and every key kept: the most tiles a geometry can have, within the bound.
TEST(SparseIndexBuildGpu, DensestPatternFitsTheBound) {
  SPARSERING_REQUIRE_GPU();
  CudaStream stream;
  for (const TokenLayout& layout : {make_token_layout(LayoutKind::contiguous, 1000, 1),
                                    make_token_layout(LayoutKind::striped, 1024, 2, 16),
                                    make_token_layout(LayoutKind::zigzag, 1200, 3)}) {
    const int64_t n = layout.seq_len_tokens();
    RowPattern all;
    for (int64_t t = 0; t < n; ++t) {
      all.slash_offsets.push_back(t);
      all.vertical_tokens.push_back(t);
    }
    RowPattern verticals_only;
    verticals_only.vertical_tokens = all.vertical_tokens;
    const std::vector<RowPattern> patterns = {all, verticals_only};
    DeviceKeptSets sets(patterns);
    for (int32_t q_rank = 0; q_rank < layout.ranks(); ++q_rank) {
      for (int32_t kv_rank = 0; kv_rank < layout.ranks(); ++kv_rank) {
        const RingPosition position{layout, q_rank, kv_rank};
        const SparseIndex expected = build_sparse_index(IndexGeometry{position, 64, 32}, patterns);
        const int32_t cap = static_cast<int32_t>(n);
        DeviceSparseIndex index =
            allocate_sparse_index(position, 2, 64, 32, sparse_index_capacity_bound(position, 2, 64, 32, cap, cap));
        launch_build_sparse_index_into(sets.view(), position, index, stream.get());
        read_sparse_index_counts(index, stream.get());
        expect_equal(index, expected, str(to_string(layout.kind()), " q_rank ", q_rank, " kv_rank ", kv_rank));
        if (HasFailure()) return;
      }
    }
  }
}

TEST(SparseIndexBuildGpu, RejectsBadGeometry) {
  const KeptSetsView kept{1, 1, nullptr, nullptr, nullptr, nullptr};
  const RingPosition position{make_token_layout(LayoutKind::contiguous, 64, 2), 0, 2};
  EXPECT_THROW(launch_build_sparse_index(kept, position, 64, 64, nullptr), InputError);
  EXPECT_THROW(sparse_index_capacity_bound(position, 1, 64, 64, 8, 8), InputError);
  const RingPosition ok{make_token_layout(LayoutKind::contiguous, 64, 2), 0, 1};
  EXPECT_THROW(launch_build_sparse_index(kept, ok, 0, 64, nullptr), InputError);
  EXPECT_THROW(sparse_index_capacity_bound(ok, 1, 64, 64, -1, 8), InputError);
  // An index allocated for another geometry is refused before anything is queued.
  DeviceSparseIndex other;
  other.rows = 2;
  EXPECT_THROW(launch_build_sparse_index_into(kept, ok, other, nullptr), InputError);
  EXPECT_THROW(read_sparse_index_counts(other, nullptr), InputError);
}

}  // namespace
}  // namespace sparsering
