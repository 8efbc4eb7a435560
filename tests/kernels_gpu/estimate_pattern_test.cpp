// GPU tests of the pattern estimation launchers (kernels/cuda/estimate_pattern.cu) against the
// CPU references (kernels/reference/estimate_pattern_ref.hpp), shard by shard over whole rings:
// pass 1 on every shard, the combine of all shards, pass 2 on every shard into one slash_mass.
// Fresh random bf16 inputs (seed printed; SPARSERING_TEST_SEED repeats it). Both passes run with
// each kernel the device has (mma.sync, and wgmma on Hopper). The cases cover the kernels' paths: one
// and several 2048-key pass-1 chunks and 256-key pass-2 chunks (lengths not multiples of either),
// GQA 1, 2, 4 and 8 (one and several 256-row pass-1 rounds), one head, last_q 1, 17, 64, 100 and
// 130 (one and several 64-query tiles), head dims 64 and 128, keys at consecutive positions (whole
// CTA: shared diagonal bins), stripes of 64 (warp-level diagonals), stripes of 16 and zigzag halves
// not a multiple of 32 (per-pair atomics), and shards some queries do not see at all. Bounds (fp32
// scores from bf16 inputs vs fp64): row_max |err| <= 1e-4 x max(1, |m|); row_sum, vertical and
// slash masses |err| <= 1e-4 x |ref| + 1e-6 (probabilities are <= 1 and masses sums of at most
// last_q of them); total mass == last_q within 1e-3 relative.
// vertical_mass is poisoned with NaN first: every entry must be written.
#include "kernels/cuda/estimate_pattern.hpp"

#include <gtest/gtest.h>

#include <initializer_list>
#include <limits>

#include "common/error.hpp"
#include "gpu_test_support.hpp"
#include "kernels/reference/estimate_pattern_ref.hpp"
#include "ring_harness.hpp"

namespace sparsering {
namespace {

using namespace testing_support;
using namespace gpu_testing;

void expect_close(const std::vector<float>& gpu, const std::vector<float>& ref, double rel, double abs,
                  const std::string& what) {
  ASSERT_EQ(gpu.size(), ref.size());
  for (size_t n = 0; n < ref.size(); ++n) {
    const double x = static_cast<double>(gpu[n]);
    const double y = static_cast<double>(ref[n]);
    if (std::isinf(y)) {
      ASSERT_EQ(x, y) << what << " [" << n << "]";
      continue;
    }
    ASSERT_LE(std::fabs(x - y), rel * std::fabs(y) + abs) << what << " [" << n << "] gpu " << x << " ref " << y;
  }
}

struct EstimateCase {
  LayoutKind kind;
  int32_t ranks;
  int64_t granularity;
  int64_t seq_len;
  int64_t last_q;
  int32_t batch, q_heads, kv_heads, head_dim;
};

/// The estimation kernels this device runs: mma.sync everywhere, wgmma on sm_90a builds on Hopper.
std::vector<EstimateKernel> runnable_kernels() {
  std::vector<EstimateKernel> kernels{EstimateKernel::mma_sync};
  if (estimate_kernel_unavailable(EstimateKernel::wgmma).empty()) kernels.push_back(EstimateKernel::wgmma);
  return kernels;
}

/// Runs one case over every shard of its ring with the given kernels and compares each stage with
/// the CPU references.
void check_case(const EstimateCase& c, EstimateKernel kernel, std::mt19937_64& rng) {
  const std::string where = str(to_string(c.kind), " W=", c.ranks, " G=", c.granularity, " N=", c.seq_len,
                                " last_q=", c.last_q, " D=", c.head_dim, " kernels ",
                                kernel == EstimateKernel::wgmma ? "wgmma" : "mma_sync");
  const TokenLayout layout = make_token_layout(c.kind, c.seq_len, c.ranks, c.granularity);
  const int64_t local = layout.local_len();
  const int64_t q_rows = int64_t{c.batch} * c.q_heads;
  const int64_t kv_rows = int64_t{c.batch} * c.kv_heads;
  const std::vector<bf16_bits> q_last = random_bf16(rng, static_cast<size_t>(q_rows * c.last_q * c.head_dim), 3.0f);
  const DeviceBuffer<bf16_bits> d_q(q_last);
  const size_t stats = static_cast<size_t>(q_rows * c.last_q);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  std::vector<float> ref_max(stats, kNegInf), ref_sum(stats, 0.0f);
  DeviceBuffer<float> d_max(ref_max), d_sum(ref_sum);
  CudaStream stream;
  std::vector<std::vector<bf16_bits>> keys;
  for (int32_t rank = 0; rank < c.ranks; ++rank) {
    keys.push_back(random_bf16(rng, static_cast<size_t>(kv_rows * local * c.head_dim), 1.0f));
    EstimateParams params;
    params.shape = AttentionShape{c.batch, c.q_heads, c.kv_heads, c.head_dim, c.last_q, local};
    params.position = RingPosition{layout, 0, rank};
    params.softmax_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    std::vector<float> shard_max(stats), shard_sum(stats);
    params.q_last = q_last.data();
    params.k = keys.back().data();
    params.row_max = shard_max.data();
    params.row_sum = shard_sum.data();
    estimate_pattern_pass1_ref(params);
    const DeviceBuffer<bf16_bits> d_k(keys.back());
    DeviceBuffer<float> d_shard_max(stats), d_shard_sum(stats);
    d_shard_max.fill_bytes(0xFF);
    d_shard_sum.fill_bytes(0xFF);
    SPARSERING_CUDA_CHECK(cudaDeviceSynchronize());  // uploads and poison done before the stream runs
    params.q_last = d_q.data();
    params.k = d_k.data();
    params.row_max = d_shard_max.data();
    params.row_sum = d_shard_sum.data();
    launch_estimate_pattern_pass1(params, stream.get(), kernel);
    stream.synchronize();
    const std::vector<float> gpu_max = d_shard_max.download();
    for (size_t n = 0; n < stats; ++n) {
      const double y = static_cast<double>(shard_max[n]);
      if (std::isinf(y)) {
        ASSERT_EQ(gpu_max[n], shard_max[n]) << where << " rank " << rank << " row_max " << n;
      } else {
        ASSERT_LE(std::fabs(static_cast<double>(gpu_max[n]) - y), 1e-4 * std::max(1.0, std::fabs(y)))
            << where << " rank " << rank << " row_max " << n;
      }
    }
    expect_close(d_shard_sum.download(), shard_sum, 1e-4, 1e-6, where + " row_sum");
    estimate_pattern_combine_ref(static_cast<int64_t>(stats), shard_max.data(), shard_sum.data(), ref_max.data(),
                                 ref_sum.data());
    launch_estimate_pattern_combine(static_cast<int64_t>(stats), d_shard_max.data(), d_shard_sum.data(), d_max.data(),
                                    d_sum.data(), stream.get());
    stream.synchronize();
    if (::testing::Test::HasFailure()) return;
  }
  expect_close(d_sum.download(), ref_sum, 1e-4, 1e-6, where + " combined row_sum");

  const size_t slash_size = static_cast<size_t>(q_rows * c.seq_len);
  std::vector<float> ref_slash(slash_size, 0.0f);
  DeviceBuffer<float> d_slash(ref_slash);
  double total = 0.0;
  for (int32_t rank = 0; rank < c.ranks; ++rank) {
    EstimateParams params;
    params.shape = AttentionShape{c.batch, c.q_heads, c.kv_heads, c.head_dim, c.last_q, local};
    params.position = RingPosition{layout, 0, rank};
    params.softmax_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    std::vector<float> vertical(static_cast<size_t>(q_rows * local));
    params.q_last = q_last.data();
    params.k = keys[static_cast<size_t>(rank)].data();
    params.row_max = ref_max.data();
    params.row_sum = ref_sum.data();
    params.vertical_mass = vertical.data();
    params.slash_mass = ref_slash.data();
    estimate_pattern_pass2_ref(params);
    const DeviceBuffer<bf16_bits> d_k(keys[static_cast<size_t>(rank)]);
    DeviceBuffer<float> d_vertical(vertical.size());
    d_vertical.fill_bytes(0xFF);
    SPARSERING_CUDA_CHECK(cudaDeviceSynchronize());
    params.q_last = d_q.data();
    params.k = d_k.data();
    params.row_max = d_max.data();
    params.row_sum = d_sum.data();
    params.vertical_mass = d_vertical.data();
    params.slash_mass = d_slash.data();
    launch_estimate_pattern_pass2(params, stream.get(), kernel);
    stream.synchronize();
    const std::vector<float> gpu_vertical = d_vertical.download();
    expect_close(gpu_vertical, vertical, 1e-4, 1e-6, where + str(" rank ", rank, " vertical_mass"));
    for (const float m : gpu_vertical) total += static_cast<double>(m);
    if (::testing::Test::HasFailure()) return;
  }
  expect_close(d_slash.download(), ref_slash, 1e-4, 1e-6, where + " slash_mass");
  EXPECT_NEAR(total, static_cast<double>(q_rows * c.last_q), 1e-3 * static_cast<double>(q_rows * c.last_q)) << where;
}

/// check_case for every case with every kernel the device runs, up to the first failure.
void check_cases(std::initializer_list<EstimateCase> cases, std::mt19937_64& rng) {
  for (const EstimateCase& c : cases) {
    for (const EstimateKernel kernel : runnable_kernels()) {
      check_case(c, kernel, rng);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// Small cases, one per device path (also run under compute-sanitizer memcheck and racecheck):
// consecutive keys with a partial last chunk and two query tiles (shared diagonal bins), stripes
// of 64 (warp diagonals), stripes of 16 (per-pair atomics), a shard some queries do not see with
// several pass-1 rounds.
TEST(EstimatePatternGpu, ShardedPassesMatchReference) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  check_cases({EstimateCase{LayoutKind::contiguous, 1, 0, 700, 70, 1, 4, 2, 128},
               EstimateCase{LayoutKind::striped, 2, 64, 1280, 64, 1, 2, 1, 64},
               EstimateCase{LayoutKind::striped, 4, 16, 1024, 17, 1, 1, 1, 128},
               EstimateCase{LayoutKind::contiguous, 2, 0, 512, 300, 1, 2, 2, 128}},
              rng);
}

// Larger cases: several chunks of both passes, GQA up to 8, batch 2, last_q 1 to 130, every layout,
// and chunks of one to three tiles.
TEST(EstimatePatternGpuSweep, ShardedPassesMatchReference) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  check_cases({EstimateCase{LayoutKind::contiguous, 1, 0, 1500, 64, 1, 4, 2, 128},
               EstimateCase{LayoutKind::contiguous, 1, 0, 5000, 64, 1, 16, 2, 128},
               EstimateCase{LayoutKind::contiguous, 1, 0, 4200, 17, 1, 1, 1, 64},
               EstimateCase{LayoutKind::contiguous, 1, 0, 700, 1, 2, 3, 3, 128},
               EstimateCase{LayoutKind::contiguous, 2, 0, 4096, 100, 1, 2, 1, 64},
               EstimateCase{LayoutKind::zigzag, 2, 0, 2400, 64, 2, 2, 2, 128},
               EstimateCase{LayoutKind::zigzag, 3, 0, 1800, 130, 1, 4, 1, 64},
               EstimateCase{LayoutKind::striped, 4, 16, 2048, 64, 1, 8, 1, 128},
               EstimateCase{LayoutKind::striped, 2, 64, 2560, 130, 1, 2, 2, 64},
               EstimateCase{LayoutKind::striped, 2, 512, 6144, 64, 1, 8, 2, 128},
               // a last pass-1 chunk of one partial tile, of three, and a shard of
               // one tile: fewer tiles than the Hopper pass 1 keeps in flight
               EstimateCase{LayoutKind::contiguous, 1, 0, 2088, 64, 1, 4, 2, 128},
               EstimateCase{LayoutKind::contiguous, 1, 0, 2198, 17, 1, 2, 1, 64},
               EstimateCase{LayoutKind::contiguous, 1, 0, 40, 17, 1, 2, 2, 128}},
              rng);
}

TEST(EstimatePatternGpu, RejectsBadShapes) {
  EstimateParams params;
  params.shape = AttentionShape{1, 2, 1, 128, 0, 64};
  params.position = RingPosition{make_token_layout(LayoutKind::contiguous, 64, 1), 0, 0};
  params.softmax_scale = 0.1f;
  EXPECT_THROW(launch_estimate_pattern_pass1(params, nullptr), InputError);  // last_q = 0
  params.shape.q_len = 8;
  params.shape.kv_len = 32;
  EXPECT_THROW(launch_estimate_pattern_pass1(params, nullptr), InputError);  // kv_len != local length
  params.shape.kv_len = 64;
  params.softmax_scale = 0.0f;
  EXPECT_THROW(launch_estimate_pattern_pass1(params, nullptr), InputError);  // the scale must be > 0
  params.softmax_scale = -0.1f;
  EXPECT_THROW(launch_estimate_pattern_pass2(params, nullptr), InputError);
  params.softmax_scale = 1e-40f;  // subnormal: 0 on the GPU
  EXPECT_THROW(launch_estimate_pattern_pass1(params, nullptr), InputError);
}

// Asking for the wgmma kernel where it cannot run is an error naming why, not a fallback.
TEST(EstimatePatternGpu, RefusesAKernelTheDeviceCannotRun) {
  SPARSERING_REQUIRE_GPU();
  const std::string why = estimate_kernel_unavailable(EstimateKernel::wgmma);
  if (why.empty()) GTEST_SKIP() << "the wgmma kernel runs on this device";
  const TokenLayout layout = make_token_layout(LayoutKind::contiguous, 64, 1);
  const DeviceBuffer<bf16_bits> q(8 * 128), k(64 * 128);
  DeviceBuffer<float> row_max(8), row_sum(8);
  EstimateParams params;
  params.shape = AttentionShape{1, 1, 1, 128, 8, 64};
  params.position = RingPosition{layout, 0, 0};
  params.softmax_scale = 0.1f;
  params.q_last = q.data();
  params.k = k.data();
  params.row_max = row_max.data();
  params.row_sum = row_sum.data();
  DeviceBuffer<float> vertical(64), slash(64);
  params.vertical_mass = vertical.data();
  params.slash_mass = slash.data();
  for (const auto launch : {launch_estimate_pattern_pass1, launch_estimate_pattern_pass2}) {
    try {
      launch(params, nullptr, EstimateKernel::wgmma);
      ADD_FAILURE() << "expected InputError";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace sparsering
