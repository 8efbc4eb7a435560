// GPU tests of the single-rank index preparation (kernels/cuda/pattern_pipeline.hpp): estimation,
// batched recall selection and index build end to end, on inputs with the structure of
// long-context heads (tests below), with fresh random phases and noise (seed printed,
// SPARSERING_TEST_SEED repeats it).
//   - The kept sets agree with the CPU chain (fp64 estimation references, then the recall rule of
//     traces/recall.hpp): equal counts and sets up to entries whose masses tie within fp32
//     rounding (bounded), and the GPU index equals the CPU builder's on the GPU's own kept sets.
//   - The whole preparation into preallocated storage is captured into a CUDA graph (any host
//     synchronization inside would fail the capture), replayed twice, and checked the same way.
//   - With SPARSERING_PREP_TIMING=1 only: times estimation, selection and build at 128K and 256K
//     tokens (16 query / 2 K/V heads, head dim 128, last_q 64, recall 0.95, cap 4096, blocks
//     64x64 and 128x128) and prints them (docs/PERF.md, "Index preparation (H200)").
#include "kernels/cuda/pattern_pipeline.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <numbers>
#include <numeric>
#include <set>

#include "common/error.hpp"
#include "gpu_test_support.hpp"
#include "kernel_test_support.hpp"
#include "kernels/cuda/estimate_pattern.hpp"
#include "kernels/cuda/recall_select.hpp"
#include "kernels/index/build_sparse_index.hpp"
#include "kernels/reference/estimate_pattern_ref.hpp"
#include "traces/recall.hpp"

namespace sparsering {
namespace {

using namespace testing_support;
using namespace gpu_testing;

/// Q (last queries) and K with the structure of long-context heads: rotary terms over a band of
/// frequencies (each query attends most to keys a few hundred tokens back: slashes near 0, with
/// echoes where the cosines realign), a sink (pair 0: key 0 only, every query), and noise.
struct StructuredInputs {
  std::vector<bf16_bits> q_last;  // (1, Hq, last_q, D)
  std::vector<bf16_bits> k;       // (1, Hkv, N, D)
};

StructuredInputs structured_inputs(std::mt19937_64& rng, int64_t n, int32_t q_heads, int32_t kv_heads, int32_t dim,
                                   int64_t last_q) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const int pairs = dim / 2;
  const double amplitude = std::sqrt(20.0 / std::sqrt(static_cast<double>(dim)));  // peak score ~ 10
  StructuredInputs in;
  in.q_last.resize(static_cast<size_t>(int64_t{q_heads} * last_q * dim));
  in.k.resize(static_cast<size_t>(int64_t{kv_heads} * n * dim));
  const int32_t group = q_heads / kv_heads;
  for (int32_t hk = 0; hk < kv_heads; ++hk) {
    std::vector<double> theta(static_cast<size_t>(pairs));
    for (int i = 1; i < pairs; ++i) {
      const double period = std::pow(2.0, 3.0 + 9.0 * unit(rng));  // 8 .. 4096 tokens
      theta[static_cast<size_t>(i)] = 2.0 * std::numbers::pi / period;
    }
    const double sink = 8.0 + 3.0 * unit(rng);  // scaled score ~ 6-11 at key 0
    for (int64_t j = 0; j < n; ++j) {
      bf16_bits* row = in.k.data() + (int64_t{hk} * n + j) * dim;
      row[0] = float_to_bf16(j == 0 ? static_cast<float>(sink) : 0.0f);
      row[1] = float_to_bf16(static_cast<float>(0.3 * (unit(rng) - 0.5)));
      for (int i = 1; i < pairs; ++i) {
        const double angle = theta[static_cast<size_t>(i)] * static_cast<double>(j);
        row[2 * i] = float_to_bf16(static_cast<float>(amplitude * std::cos(angle) + 0.3 * (unit(rng) - 0.5)));
        row[2 * i + 1] = float_to_bf16(static_cast<float>(amplitude * std::sin(angle) + 0.3 * (unit(rng) - 0.5)));
      }
    }
    for (int32_t g = 0; g < group; ++g) {
      const int32_t h = hk * group + g;
      const double weight = 0.5 + unit(rng);  // heads of a group differ in sharpness
      for (int64_t t = 0; t < last_q; ++t) {
        const double position = static_cast<double>(n - last_q + t);
        bf16_bits* row = in.q_last.data() + (int64_t{h} * last_q + t) * dim;
        row[0] = float_to_bf16(static_cast<float>(sink * weight));
        row[1] = float_to_bf16(0.0f);
        for (int i = 1; i < pairs; ++i) {
          const double angle = theta[static_cast<size_t>(i)] * position;
          row[2 * i] = float_to_bf16(static_cast<float>(weight * amplitude * std::cos(angle)));
          row[2 * i + 1] = float_to_bf16(static_cast<float>(weight * amplitude * std::sin(angle)));
        }
      }
    }
  }
  return in;
}

/// Device-resident problem and kept-set outputs.
struct DeviceProblem {
  PatternPipelineParams params;
  DeviceBuffer<bf16_bits> q_last;
  DeviceBuffer<bf16_bits> k;
  DeviceBuffer<int32_t> vertical_count, vertical_keys, slash_count, slash_offsets;

  DeviceProblem(const StructuredInputs& in, int64_t n, int32_t q_heads, int32_t kv_heads, int32_t dim, int64_t last_q,
                double recall, int32_t capacity, int32_t block)
      : q_last(in.q_last),
        k(in.k),
        vertical_count(static_cast<size_t>(q_heads)),
        vertical_keys(static_cast<size_t>(q_heads) * static_cast<size_t>(capacity)),
        slash_count(static_cast<size_t>(q_heads)),
        slash_offsets(static_cast<size_t>(q_heads) * static_cast<size_t>(capacity)) {
    params.shape = AttentionShape{1, q_heads, kv_heads, dim, last_q, n};
    params.softmax_scale = 1.0f / std::sqrt(static_cast<float>(dim));
    params.q_last = q_last.data();
    params.k = k.data();
    params.recall = recall;
    params.capacity = capacity;
    params.block_q = block;
    params.block_k = block;
  }
  KeptSetsOutput kept() {
    return KeptSetsOutput{vertical_count.data(), vertical_keys.data(), slash_count.data(), slash_offsets.data()};
  }
  /// The kept sets as host RowPatterns.
  std::vector<RowPattern> download_patterns() const {
    const auto vc = vertical_count.download(), vk = vertical_keys.download(), sc = slash_count.download(),
               so = slash_offsets.download();
    std::vector<RowPattern> rows(vc.size());
    for (size_t r = 0; r < rows.size(); ++r) {
      const size_t base = r * static_cast<size_t>(params.capacity);
      rows[r].vertical_tokens.assign(vk.begin() + static_cast<std::ptrdiff_t>(base),
                                     vk.begin() + static_cast<std::ptrdiff_t>(base + static_cast<size_t>(vc[r])));
      rows[r].slash_offsets.assign(so.begin() + static_cast<std::ptrdiff_t>(base),
                                   so.begin() + static_cast<std::ptrdiff_t>(base + static_cast<size_t>(sc[r])));
    }
    return rows;
  }
};

template <typename T>
std::vector<T> download(const DeviceBuffer<T>& buffer, int64_t count) {
  std::vector<T> all = buffer.download();
  all.resize(static_cast<size_t>(count));
  return all;
}

/// The GPU index equals the CPU builder's on the same kept sets.
void expect_index_of(const DeviceSparseIndex& got, const std::vector<RowPattern>& rows, const RingPosition& position,
                     int32_t block, const std::string& where) {
  const SparseIndex expected = build_sparse_index(IndexGeometry{position, block, block}, rows);
  ASSERT_EQ(got.tiles, expected.tiles()) << where;
  ASSERT_EQ(got.columns, expected.columns()) << where;
  EXPECT_EQ(got.tile_offsets.download(), expected.tile_offsets) << where;
  EXPECT_EQ(download(got.tile_block, got.tiles), expected.tile_block) << where;
  EXPECT_EQ(download(got.tile_masked, got.tiles), expected.tile_masked) << where;
  EXPECT_EQ(got.column_offsets.download(), expected.column_offsets) << where;
  EXPECT_EQ(download(got.column_index, got.columns), expected.column_index) << where;
}

/// The CPU chain: fp64 estimation references, then the recall rule on each row's sorted masses.
std::vector<RowPattern> cpu_kept_sets(const StructuredInputs& in, const PatternPipelineParams& p) {
  const int64_t rows = int64_t{p.shape.batch} * p.shape.q_heads;
  const int64_t n = p.shape.kv_len;
  std::vector<float> row_max(static_cast<size_t>(rows * p.shape.q_len)), row_sum(row_max.size());
  std::vector<float> vertical(static_cast<size_t>(rows * n)), slash(static_cast<size_t>(rows * n), 0.0f);
  EstimateParams e;
  e.shape = p.shape;
  e.position = single_rank_position(p);
  e.softmax_scale = p.softmax_scale;
  e.q_last = in.q_last.data();
  e.k = in.k.data();
  e.row_max = row_max.data();
  e.row_sum = row_sum.data();
  e.vertical_mass = vertical.data();
  e.slash_mass = slash.data();
  estimate_pattern_pass1_ref(e);
  estimate_pattern_pass2_ref(e);
  auto select = [&](const float* mass) {
    std::vector<int32_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return mass[a] > mass[b]; });
    std::vector<float> sorted(order.size());
    for (size_t i = 0; i < order.size(); ++i) sorted[i] = mass[order[i]];
    const int64_t real = std::count_if(sorted.begin(), sorted.end(), [](float m) { return m > 0.0f; });
    const int64_t kept = recall_prefix_length(sorted, real, p.recall, 0, p.capacity);
    std::vector<int64_t> out(order.begin(), order.begin() + kept);
    std::sort(out.begin(), out.end());
    return out;
  };
  std::vector<RowPattern> out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    out[static_cast<size_t>(r)].vertical_tokens = select(vertical.data() + r * n);
    out[static_cast<size_t>(r)].slash_offsets = select(slash.data() + r * n);
  }
  return out;
}

/// GPU and CPU kept sets agree up to a few entries at the threshold (masses within fp32 rounding).
void expect_close_sets(const std::vector<int64_t>& gpu, const std::vector<int64_t>& cpu, const std::string& where) {
  const std::set<int64_t> a(gpu.begin(), gpu.end()), b(cpu.begin(), cpu.end());
  std::vector<int64_t> differ;
  std::set_symmetric_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(differ));
  const auto allowed = static_cast<size_t>(2 + b.size() / 100);
  EXPECT_LE(differ.size(), allowed) << where << ": GPU keeps " << a.size() << ", CPU " << b.size();
  EXPECT_GT(a.size(), 0u) << where;
}

TEST(PatternPipelineGpu, KeptSetsAndIndexMatchTheCpuChain) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  CudaStream stream;
  const int64_t n = 3000;
  const StructuredInputs in = structured_inputs(rng, n, 8, 2, 128, 64);
  DeviceProblem problem(in, n, 8, 2, 128, 64, 0.9, 512, 64);
  SPARSERING_CUDA_CHECK(cudaDeviceSynchronize());  // uploads done before the non-blocking stream runs
  const RingPosition position = single_rank_position(problem.params);
  DeviceSparseIndex index =
      allocate_sparse_index(position, 8, 64, 64, sparse_index_capacity_bound(position, 8, 64, 64, 512, 512));
  launch_single_rank_pattern_pipeline(problem.params, problem.kept(), index, stream.get());
  read_sparse_index_counts(index, stream.get());
  const std::vector<RowPattern> gpu = problem.download_patterns();
  const std::vector<RowPattern> cpu = cpu_kept_sets(in, problem.params);
  for (size_t r = 0; r < gpu.size(); ++r) {
    expect_close_sets(gpu[r].vertical_tokens, cpu[r].vertical_tokens, str("row ", r, " verticals"));
    expect_close_sets(gpu[r].slash_offsets, cpu[r].slash_offsets, str("row ", r, " slashes"));
  }
  expect_index_of(index, gpu, position, 64, "capacity path");

  // The synchronizing entry point (the same stages, then the exact-array build, which
  // tests/kernels_gpu/sparse_index_build_test.cpp checks against the CPU builder) gives a valid
  // index of the same geometry.
  const DeviceSparseIndex exact = run_single_rank_pattern_pipeline(problem.params, stream.get());
  stream.synchronize();
  EXPECT_EQ(exact.q_blocks, index.q_blocks);
  EXPECT_GT(exact.tiles, 0);
  SparseIndex host;
  host.rows = exact.rows;
  host.q_len = n;
  host.kv_len = n;
  host.block_q = exact.block_q;
  host.block_k = exact.block_k;
  host.q_blocks = exact.q_blocks;
  host.tile_offsets = exact.tile_offsets.download();
  host.tile_block = download(exact.tile_block, exact.tiles);
  host.tile_masked = download(exact.tile_masked, exact.tiles);
  host.column_offsets = exact.column_offsets.download();
  host.column_index = download(exact.column_index, exact.columns);
  EXPECT_NO_THROW(validate_sparse_index(host));
}

TEST(PatternPipelineGpu, CapturesIntoACudaGraph) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  CudaStream stream;
  const int64_t n = 2500;
  const StructuredInputs in = structured_inputs(rng, n, 4, 1, 64, 40);
  DeviceProblem problem(in, n, 4, 1, 64, 40, 0.95, 300, 128);
  SPARSERING_CUDA_CHECK(cudaDeviceSynchronize());
  const RingPosition position = single_rank_position(problem.params);
  DeviceSparseIndex index =
      allocate_sparse_index(position, 4, 128, 128, sparse_index_capacity_bound(position, 4, 128, 128, 300, 300));
  cudaGraph_t graph = nullptr;
  SPARSERING_CUDA_CHECK(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeRelaxed));
  launch_single_rank_pattern_pipeline(problem.params, problem.kept(), index, stream.get());
  SPARSERING_CUDA_CHECK(cudaStreamEndCapture(stream.get(), &graph));
  cudaGraphExec_t exec = nullptr;
  SPARSERING_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const std::vector<RowPattern> cpu = cpu_kept_sets(in, problem.params);
  for (int replay = 0; replay < 2; ++replay) {
    // Poison (on the stream: it does not wait for the legacy default stream): the replay must
    // rewrite everything it owns.
    SPARSERING_CUDA_CHECK(cudaMemsetAsync(index.tile_offsets.data(), 0xFF, index.tile_offsets.bytes(), stream.get()));
    SPARSERING_CUDA_CHECK(cudaMemsetAsync(index.column_offsets.data(), 0xFF, index.column_offsets.bytes(), stream.get()));
    SPARSERING_CUDA_CHECK(cudaGraphLaunch(exec, stream.get()));
    read_sparse_index_counts(index, stream.get());
    const std::vector<RowPattern> gpu = problem.download_patterns();
    expect_index_of(index, gpu, position, 128, str("graph replay ", replay));
    for (size_t r = 0; r < gpu.size(); ++r) {
      expect_close_sets(gpu[r].vertical_tokens, cpu[r].vertical_tokens, str("replay ", replay, " row ", r, " verticals"));
      expect_close_sets(gpu[r].slash_offsets, cpu[r].slash_offsets, str("replay ", replay, " row ", r, " slashes"));
    }
    if (HasFailure()) break;
  }
  SPARSERING_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SPARSERING_CUDA_CHECK(cudaGraphDestroy(graph));
}

/// Median milliseconds of `run` over `repeats` after `warmup`, with CUDA events on `stream`.
template <typename Run>
double median_ms(cudaStream_t stream, int warmup, int repeats, Run run) {
  for (int i = 0; i < warmup; ++i) run();
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  SPARSERING_CUDA_CHECK(cudaEventCreate(&start));
  SPARSERING_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    SPARSERING_CUDA_CHECK(cudaEventRecord(start, stream));
    run();
    SPARSERING_CUDA_CHECK(cudaEventRecord(stop, stream));
    SPARSERING_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    SPARSERING_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(static_cast<double>(ms));
  }
  SPARSERING_CUDA_CHECK(cudaEventDestroy(start));
  SPARSERING_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Not a correctness test: prints the preparation's times when SPARSERING_PREP_TIMING=1.
TEST(PatternPipelineGpuTiming, PreparationAt128KAnd256K) {
  SPARSERING_REQUIRE_GPU();
  const char* enabled = std::getenv("SPARSERING_PREP_TIMING");
  if (enabled == nullptr || std::string(enabled) != "1") GTEST_SKIP() << "set SPARSERING_PREP_TIMING=1 to time";
  std::mt19937_64 rng = test_rng();
  CudaStream stream;
  // Stream-ordered scratch stays in the pool between steps, as in a training loop.
  cudaMemPool_t pool = nullptr;
  SPARSERING_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
  uint64_t keep = ~uint64_t{0};
  SPARSERING_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  const int32_t q_heads = 16, kv_heads = 2, dim = 128, capacity = 4096;
  const int64_t last_q = 64;
  const double recall = 0.95;
  const int warmup = 3, repeats = 15;
  std::cout << "[ timing   ] H=16/2 D=128 last_q=64 recall 0.95 cap 4096; median of " << repeats << " ms\n";
  for (const int64_t n : {int64_t{131072}, int64_t{262144}}) {
    const StructuredInputs in = structured_inputs(rng, n, q_heads, kv_heads, dim, last_q);
    DeviceProblem problem(in, n, q_heads, kv_heads, dim, last_q, recall, capacity, 64);
    SPARSERING_CUDA_CHECK(cudaDeviceSynchronize());
    const PatternPipelineParams& p = problem.params;
    const RingPosition position = single_rank_position(p);
    const auto rows = static_cast<size_t>(q_heads);
    DeviceBuffer<float> row_max(rows * last_q), row_sum(rows * last_q), vertical(rows * static_cast<size_t>(n)),
        slash(rows * static_cast<size_t>(n));
    EstimateParams e;
    e.shape = p.shape;
    e.position = position;
    e.softmax_scale = p.softmax_scale;
    e.q_last = p.q_last;
    e.k = p.k;
    e.row_max = row_max.data();
    e.row_sum = row_sum.data();
    e.vertical_mass = vertical.data();
    e.slash_mass = slash.data();
    const double pass1 = median_ms(stream.get(), warmup, repeats, [&] { launch_estimate_pattern_pass1(e, stream.get()); });
    const double pass1_mma_sync = median_ms(stream.get(), warmup, repeats, [&] {
      launch_estimate_pattern_pass1(e, stream.get(), EstimateKernel::mma_sync);
    });
    const double pass2 = median_ms(stream.get(), warmup, repeats, [&] {
      SPARSERING_CUDA_CHECK(cudaMemsetAsync(slash.data(), 0, slash.bytes(), stream.get()));
      launch_estimate_pattern_pass2(e, stream.get());
    });
    const double pass2_mma_sync = median_ms(stream.get(), warmup, repeats, [&] {
      SPARSERING_CUDA_CHECK(cudaMemsetAsync(slash.data(), 0, slash.bytes(), stream.get()));
      launch_estimate_pattern_pass2(e, stream.get(), EstimateKernel::mma_sync);
    });
    KeptSetsOutput kept = problem.kept();
    std::array<RecallSelectParams, 2> parts;
    for (size_t i = 0; i < 2; ++i) {
      parts[i].rows = q_heads;
      parts[i].entries = n;
      parts[i].recall = recall;
      parts[i].capacity = capacity;
      parts[i].mass = i == 0 ? vertical.data() : slash.data();
      parts[i].kept_count = i == 0 ? kept.vertical_count : kept.slash_count;
      parts[i].kept_index = i == 0 ? kept.vertical_keys : kept.slash_offsets;
    }
    const double select = median_ms(stream.get(), warmup, repeats, [&] { launch_recall_select_batch(parts, stream.get()); });
    const double estimate_select =
        median_ms(stream.get(), warmup, repeats, [&] { launch_single_rank_estimate_select(p, kept, stream.get()); });
    stream.synchronize();
    const std::vector<RowPattern> patterns = problem.download_patterns();
    int64_t verticals = 0, slashes = 0;
    for (const RowPattern& row : patterns) {
      verticals += static_cast<int64_t>(row.vertical_tokens.size());
      slashes += static_cast<int64_t>(row.slash_offsets.size());
    }
    std::cout << "[ timing   ] N=" << n << ": pass 1 " << pass1 << " (mma.sync kernel " << pass1_mma_sync
              << "), pass 2 (with slash memset) " << pass2 << " (mma.sync kernel " << pass2_mma_sync << ")"
              << ", selection (verticals + slashes) " << select << ", estimate + select " << estimate_select
              << "; kept per head: " << verticals / q_heads << " verticals, " << slashes / q_heads << " slashes\n";
    const KeptSetsView view{q_heads, capacity, kept.vertical_count, kept.vertical_keys, kept.slash_count,
                            kept.slash_offsets};
    for (const int32_t block : {64, 128}) {
      problem.params.block_q = problem.params.block_k = block;
      const SparseIndexCapacity bound = sparse_index_capacity_bound(position, q_heads, block, block, capacity, capacity);
      DeviceSparseIndex index = allocate_sparse_index(position, q_heads, block, block, bound);
      const double build = median_ms(stream.get(), warmup, repeats,
                                     [&] { launch_build_sparse_index_into(view, position, index, stream.get()); });
      read_sparse_index_counts(index, stream.get());
      std::vector<DeviceSparseIndex> alive;  // freed after the timing (cudaFree synchronizes)
      const double exact = median_ms(stream.get(), warmup, repeats, [&] {
        alive.push_back(launch_build_sparse_index(view, position, block, block, stream.get()));
      });
      alive.clear();
      const double whole = median_ms(stream.get(), warmup, repeats, [&] {
        launch_single_rank_pattern_pipeline(problem.params, kept, index, stream.get());
      });
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      SPARSERING_CUDA_CHECK(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeRelaxed));
      launch_single_rank_pattern_pipeline(problem.params, kept, index, stream.get());
      SPARSERING_CUDA_CHECK(cudaStreamEndCapture(stream.get(), &graph));
      SPARSERING_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      const double graphed =
          median_ms(stream.get(), warmup, repeats, [&] { SPARSERING_CUDA_CHECK(cudaGraphLaunch(exec, stream.get())); });
      SPARSERING_CUDA_CHECK(cudaGraphExecDestroy(exec));
      SPARSERING_CUDA_CHECK(cudaGraphDestroy(graph));
      read_sparse_index_counts(index, stream.get());
      std::cout << "[ timing   ] N=" << n << " blocks " << block << "x" << block << ": build (no sync) " << build
                << ", build (exact arrays, one sync + allocation) " << exact << "; whole preparation (no sync) "
                << whole << ", as a CUDA graph " << graphed << "; index " << index.tiles << " tiles, " << index.columns
                << " columns (bound " << bound.tiles << ", " << bound.columns << ")\n";
    }
  }
}

}  // namespace
}  // namespace sparsering
