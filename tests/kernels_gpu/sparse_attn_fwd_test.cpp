// GPU tests of launch_sparse_attn_fwd (kernels/cuda/sparse_attn_fwd.cu) against the CPU oracle
// sparse_attn_fwd_ref, step by step over whole rings (every rank, every step, merged running
// output), on fresh random bf16 inputs and random kept patterns for contiguous, zigzag and
// striped layouts. Bounds (inputs are identical bf16; the kernel rounds P to bf16 for the PV
// product and accumulates in fp32, the reference in fp64):
//   out: max |err| <= 1e-2 (|v| <= 1, so |out| <= 1) and relative L2 error <= 5e-3;
//   lse: |err| <= 2e-3 x max(1, |lse|); rows the reference leaves at -inf must stay -inf and
//   keep the NaN poison the GPU output started with (nothing written).
// Edge cases: rows that keep only themselves, no vertical columns, verticals only, the
// all-dense index (== fp64 dense causal attention), GQA 1 / 2 / 8, lengths that are not block
// multiples, batch 2, head dims 64 and 128, block_q 64 / 128 / 256 and block_k 64 / 128, huge
// logits. Every case runs on each forward kernel the device can run (mma_sync everywhere, wgmma
// on Hopper for query blocks of a multiple of 128); a Hopper GPU must run wgmma.
#include "kernels/cuda/sparse_attn_fwd.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <limits>

#include "common/error.hpp"
#include "gpu_test_support.hpp"
#include "ring_harness.hpp"

namespace sparsering {
namespace {

using namespace testing_support;
using namespace gpu_testing;

constexpr double kOutMaxAbs = 1e-2;
constexpr double kOutRelL2 = 5e-3;
constexpr double kLseAbs = 2e-3;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct ForwardCase {
  LayoutKind kind;
  int32_t ranks;
  int64_t granularity;
  int64_t seq_len;
  int32_t batch;
  int32_t q_heads;
  int32_t kv_heads;
  int32_t head_dim;
  int32_t block_q;
  int32_t block_k;
};

std::string describe(const ForwardCase& c) {
  return str(to_string(c.kind), " W=", c.ranks, " G=", c.granularity, " N=", c.seq_len, " B=", c.batch, " Hq=", c.q_heads,
             " Hkv=", c.kv_heads, " D=", c.head_dim, " block ", c.block_q, "x", c.block_k);
}

RingProblem make_problem(std::mt19937_64& rng, const ForwardCase& c) {
  const TokenLayout layout = make_token_layout(c.kind, c.seq_len, c.ranks, c.granularity);
  AttentionShape shape;
  shape.batch = c.batch;
  shape.q_heads = c.q_heads;
  shape.kv_heads = c.kv_heads;
  shape.head_dim = c.head_dim;
  return random_problem(rng, layout, shape, c.block_q, c.block_k);
}

/// Runs the problem's whole ring with `kernel` on the GPU and on the CPU reference, comparing the
/// running output after every step. Stores the GPU's final output and LSE in global token order
/// in `result` when given.
void check_forward_ring_with(const RingProblem& p, const std::string& where, ForwardKernel kernel,
                             RingForward* result) {
  const int32_t w = p.layout.ranks();
  const int64_t dim = p.shape.head_dim;
  const int64_t local = p.layout.local_len();
  RingForward gpu_global;
  gpu_global.out.assign(static_cast<size_t>(p.q_rows() * p.layout.seq_len_tokens() * dim), 0.0f);
  gpu_global.lse.assign(static_cast<size_t>(p.q_rows() * p.layout.seq_len_tokens()), 0.0f);
  CudaStream stream;
  for (int32_t rank = 0; rank < w; ++rank) {
    const std::vector<bf16_bits> q = to_local(p.q, p.layout, rank, p.q_rows(), dim);
    std::vector<float> out(static_cast<size_t>(p.q_rows() * local * dim), 0.0f);
    std::vector<float> lse(static_cast<size_t>(p.q_rows() * local), kNegInf);
    DeviceBuffer<bf16_bits> d_q(q);
    DeviceBuffer<float> d_out(out.size());
    d_out.fill_bytes(0xFF);  // NaN poison: rows the kernel must not touch stay NaN
    DeviceBuffer<float> d_lse(lse);
    for (int32_t step = 0; step < w; ++step) {
      const int32_t source = kv_source_rank(rank, step, w);
      const SparseIndex index = p.index(rank, source);
      const std::vector<bf16_bits> k = to_local(p.k, p.layout, source, p.kv_rows(), dim);
      const std::vector<bf16_bits> v = to_local(p.v, p.layout, source, p.kv_rows(), dim);
      SparseAttnFwdParams params;
      params.shape = p.local_shape();
      params.position = RingPosition{p.layout, rank, source};
      params.softmax_scale = p.softmax_scale;
      params.index = host_view(index);
      params.q = q.data();
      params.k = k.data();
      params.v = v.data();
      params.out = out.data();
      params.lse = lse.data();
      sparse_attn_fwd_ref(params);

      const DeviceIndex d_index(index);
      DeviceBuffer<bf16_bits> d_k(k);
      DeviceBuffer<bf16_bits> d_v(v);
      params.index = d_index.view();
      params.q = d_q.data();
      params.k = d_k.data();
      params.v = d_v.data();
      params.out = d_out.data();
      params.lse = d_lse.data();
      launch_sparse_attn_fwd(params, stream.get(), kernel);
      stream.synchronize();

      const std::vector<float> gpu_out = d_out.download();
      const std::vector<float> gpu_lse = d_lse.download();
      const std::string at = str(where, " [", forward_kernel_name(kernel), "] rank ", rank, " step ", step);
      std::vector<bool> untouched_element(out.size(), false);
      std::vector<bool> untouched_row(lse.size(), false);
      for (size_t t = 0; t < lse.size(); ++t) {
        if (lse[t] != kNegInf) continue;
        untouched_row[t] = true;
        ASSERT_EQ(gpu_lse[t], kNegInf) << at << ": row " << t << " has no pair yet but the GPU wrote its lse";
        for (int64_t d = 0; d < dim; ++d) {
          const size_t e = t * static_cast<size_t>(dim) + static_cast<size_t>(d);
          untouched_element[e] = true;
          ASSERT_TRUE(std::isnan(gpu_out[e])) << at << ": row " << t << " has no pair yet but out[" << d << "] was written";
        }
      }
      const ErrorStats out_error = error_stats(gpu_out, out, &untouched_element);
      EXPECT_EQ(out_error.non_finite, 0u) << at << ": unwritten or non-finite outputs; " << gpu_testing::describe(out_error);
      EXPECT_LE(out_error.max_abs, kOutMaxAbs) << at << " out: " << gpu_testing::describe(out_error);
      EXPECT_LE(out_error.rel_l2, kOutRelL2) << at << " out: " << gpu_testing::describe(out_error);
      for (size_t t = 0; t < lse.size(); ++t) {
        if (untouched_row[t]) continue;
        const double expected = static_cast<double>(lse[t]);
        ASSERT_LE(std::fabs(static_cast<double>(gpu_lse[t]) - expected), kLseAbs * std::max(1.0, std::fabs(expected)))
            << at << " lse row " << t;
      }
      if (::testing::Test::HasFailure()) return;
    }
    from_local(gpu_global.out, d_out.download(), p.layout, rank, p.q_rows(), dim);
    from_local(gpu_global.lse, d_lse.download(), p.layout, rank, p.q_rows(), 1);
  }
  if (result != nullptr) *result = std::move(gpu_global);
}

/// The problem's first ring step as kernel parameters (enough to ask which kernels run it).
SparseAttnFwdParams first_step_params(const RingProblem& p) {
  SparseAttnFwdParams params;
  params.shape = p.local_shape();
  params.index.block_q = p.block_q;
  return params;
}

/// check_forward_ring_with for every forward kernel that can run the problem here; `result` gets
/// the last one's output.
void check_forward_ring(const RingProblem& p, const std::string& where, RingForward* result = nullptr) {
  for (const ForwardKernel kernel : {ForwardKernel::mma_sync, ForwardKernel::wgmma}) {
    if (!forward_kernel_unavailable(kernel, first_step_params(p)).empty()) continue;
    check_forward_ring_with(p, where, kernel, result);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(SparseAttnFwdGpu, RandomPatternsEveryLayoutMatchReference) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  const ForwardCase cases[] = {
      {LayoutKind::contiguous, 1, 0, 384, 1, 4, 2, 128, 64, 64},
      {LayoutKind::contiguous, 2, 0, 640, 1, 2, 2, 64, 64, 64},
      {LayoutKind::zigzag, 2, 0, 512, 1, 8, 1, 64, 128, 64},
      {LayoutKind::zigzag, 3, 0, 600, 2, 2, 1, 128, 64, 128},
      {LayoutKind::striped, 4, 64, 1024, 1, 2, 2, 128, 64, 128},
      {LayoutKind::striped, 2, 16, 320, 1, 4, 4, 128, 128, 128},
      {LayoutKind::striped, 3, 1, 291, 1, 2, 1, 64, 64, 64},
      {LayoutKind::contiguous, 1, 0, 1000, 1, 4, 1, 128, 128, 64},
      {LayoutKind::zigzag, 2, 0, 1024, 1, 8, 8, 64, 128, 128},
      {LayoutKind::striped, 2, 64, 1280, 2, 8, 1, 128, 256, 64},
      {LayoutKind::striped, 4, 16, 2048, 1, 4, 2, 128, 128, 128},
  };
  for (const ForwardCase& c : cases) {
    const RingProblem problem = make_problem(rng, c);
    check_forward_ring(problem, describe(c));
    if (HasFailure()) return;
  }
}

TEST(SparseAttnFwdGpu, OddLengthsAndTailBlocks) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  for (const int64_t n : {1, 7, 63, 65, 130, 300}) {
    for (const int32_t block_q : {64, 128}) {
      const ForwardCase c{LayoutKind::contiguous, 1, 0, n, 1, 2, 1, n % 2 == 0 ? 128 : 64, block_q, 64};
      check_forward_ring(make_problem(rng, c), describe(c));
      if (HasFailure()) return;
    }
  }
}

/// Runs a case whose kept patterns come from `pattern` instead of the random generator.
void check_with_patterns(std::mt19937_64& rng, const ForwardCase& c,
                         const std::function<RowPattern(int64_t row, int64_t n)>& pattern) {
  RingProblem problem = make_problem(rng, c);
  for (size_t r = 0; r < problem.rows.size(); ++r) problem.rows[r] = pattern(static_cast<int64_t>(r), c.seq_len);
  check_forward_ring(problem, describe(c));
}

TEST(SparseAttnFwdGpu, RowsThatKeepOnlyThemselves) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  const auto self_only = [](int64_t, int64_t) { return RowPattern{}; };
  check_with_patterns(rng, {LayoutKind::contiguous, 1, 0, 256, 1, 2, 2, 128, 64, 64}, self_only);
  check_with_patterns(rng, {LayoutKind::striped, 2, 64, 512, 1, 2, 1, 64, 64, 64}, self_only);
  check_with_patterns(rng, {LayoutKind::zigzag, 2, 0, 512, 1, 2, 1, 128, 128, 64}, self_only);
}

TEST(SparseAttnFwdGpu, SlashesOnlyAndVerticalsOnly) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  const auto slashes = [&rng](int64_t, int64_t n) {
    RowPattern row;
    for (int64_t d = 0; d < 100; ++d) row.slash_offsets.push_back(d);
    for (int s = 0; s < 5; ++s) row.slash_offsets.push_back(uniform(rng, 0, n - 1));
    return row;
  };
  const auto verticals = [&rng](int64_t, int64_t n) {
    RowPattern row;  // many columns: several gathered 64-column chunks per query block
    row.vertical_tokens.push_back(0);
    for (int s = 0; s < 200; ++s) row.vertical_tokens.push_back(uniform(rng, 0, n - 1));
    return row;
  };
  check_with_patterns(rng, {LayoutKind::zigzag, 2, 0, 768, 1, 4, 2, 128, 64, 64}, slashes);
  check_with_patterns(rng, {LayoutKind::contiguous, 1, 0, 1000, 1, 8, 1, 128, 64, 64}, verticals);
  check_with_patterns(rng, {LayoutKind::striped, 2, 32, 1024, 1, 2, 2, 64, 128, 64}, verticals);
  check_with_patterns(rng, {LayoutKind::contiguous, 1, 0, 1000, 1, 4, 2, 128, 128, 128}, verticals);
}

TEST(SparseAttnFwdGpu, HugeLogitsStayFinite) {
  // Scores of several thousand: exp overflows unless every exponent is taken after the row
  // maximum is subtracted, on every kernel.
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  for (const ForwardCase& c : {ForwardCase{LayoutKind::zigzag, 2, 0, 512, 1, 4, 2, 128, 128, 64},
                               ForwardCase{LayoutKind::contiguous, 1, 0, 300, 1, 2, 1, 64, 64, 64}}) {
    RingProblem problem = make_problem(rng, c);
    problem.softmax_scale *= 400.0f;
    check_forward_ring(problem, describe(c) + " huge logits");
    if (HasFailure()) return;
  }
}

TEST(SparseAttnFwdGpu, HopperRunsTheWgmmaKernel) {
  // The wgmma kernel must not be skipped silently where it should run: on compute capability 9.0
  // with an sm_90a build, for a 128-query block.
  SPARSERING_REQUIRE_GPU();
  SparseAttnFwdParams params;
  params.shape.head_dim = 128;
  params.index.block_q = 128;
  const std::string why = forward_kernel_unavailable(ForwardKernel::wgmma, params);
  if (device_is_hopper()) {
    EXPECT_EQ(why, "") << "a Hopper GPU cannot run the wgmma forward";
  } else {
    EXPECT_NE(why, "");
    GTEST_SKIP() << "not a compute capability 9.0 GPU: " << why;
  }
  params.index.block_q = 64;
  EXPECT_NE(forward_kernel_unavailable(ForwardKernel::wgmma, params), "");
}

TEST(SparseAttnFwdGpu, AllDenseIndexEqualsDenseCausalAttention) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  for (const ForwardCase& c : {ForwardCase{LayoutKind::contiguous, 1, 0, 320, 1, 2, 1, 128, 64, 64},
                               ForwardCase{LayoutKind::striped, 2, 64, 512, 1, 2, 2, 64, 64, 64}}) {
    RingProblem problem = make_problem(rng, c);
    for (RowPattern& row : problem.rows) {
      row = RowPattern{};
      for (int64_t d = 0; d < c.seq_len; ++d) row.slash_offsets.push_back(d);
    }
    RingForward gpu;
    check_forward_ring(problem, describe(c) + " all-dense", &gpu);
    if (HasFailure()) return;
    const DenseAttentionF64 dense = dense_masked_attention_f64(
        problem.shape, static_cast<double>(problem.softmax_scale), widen(problem.q), widen(problem.k), widen(problem.v),
        [](int32_t, int64_t q, int64_t k) { return k <= q; });
    const ErrorStats out_error = error_stats(gpu.out, dense.out);
    EXPECT_LE(out_error.max_abs, kOutMaxAbs) << describe(c) << " vs dense causal: " << gpu_testing::describe(out_error);
    EXPECT_LE(out_error.rel_l2, kOutRelL2) << describe(c) << " vs dense causal: " << gpu_testing::describe(out_error);
    const ErrorStats lse_error = error_stats(gpu.lse, dense.lse);
    EXPECT_LE(lse_error.max_abs, kLseAbs * std::max(1.0, lse_error.max_ref)) << gpu_testing::describe(lse_error);
  }
}

TEST(SparseAttnFwdGpu, RejectsUnsupportedProblemsBeforeLaunching) {
  // No GPU needed: the checks run before any CUDA call.
  SparseAttnFwdParams params;
  params.shape.head_dim = 96;
  params.shape.q_len = 64;
  params.shape.kv_len = 64;
  params.position.layout = make_token_layout(LayoutKind::contiguous, 64, 1);
  params.index.rows = 1;
  params.index.q_blocks = 1;
  params.softmax_scale = 0.1f;
  try {
    launch_sparse_attn_fwd(params, nullptr);
    FAIL() << "head_dim 96 accepted";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("head_dim"), std::string::npos) << error.what();
  }
  params.shape.head_dim = 128;
  params.index.block_k = 32;
  EXPECT_THROW(launch_sparse_attn_fwd(params, nullptr), InputError);
  params.index.block_k = 64;
  params.index.q_blocks = 2;
  EXPECT_THROW(launch_sparse_attn_fwd(params, nullptr), InputError);
  params.index.q_blocks = 1;
  params.softmax_scale = 0.0f;
  EXPECT_THROW(launch_sparse_attn_fwd(params, nullptr), InputError);
}

}  // namespace
}  // namespace sparsering
