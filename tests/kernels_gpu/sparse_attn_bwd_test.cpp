// GPU tests of launch_attn_bwd_delta and launch_sparse_attn_bwd (kernels/cuda/) against the CPU
// oracles attn_bwd_delta_ref and sparse_attn_bwd_ref, over whole rings: the final forward output
// and LSE come from the CPU ring (ring_harness.hpp), then every (rank, step) runs on both sides.
// dq accumulates across the steps of a rank; dk and dv are fresh per step. All three start from
// random values on both sides (so "+=" is tested) and the bounds apply to the increments:
//   delta: |err| <= 1e-4 x (1 + |delta|) (fp32 vs fp64 sum of D products);
//   dq, dk, dv: relative L2 error <= 1e-2 and max |err| <= 3e-2 x max |increment| (the kernel
//   rounds P and dS to bf16 for the tensor-core products, as FlashAttention-2 does).
// Edge cases: rows that keep only themselves, verticals only (the column pass), GQA 1 / 2 / 8,
// odd lengths, head dims 64 and 128, block_q / block_k 64 and 128, batch 2. Every case runs on
// each backward kernel the device can run (mma_sync everywhere, wgmma on compute capability 9.0),
// and two cases also captured into a CUDA graph (the backward never waits for the GPU).
#include "kernels/cuda/sparse_attn_bwd.hpp"

#include <gtest/gtest.h>

#include <functional>

#include "common/error.hpp"
#include "gpu_test_support.hpp"
#include "kernels/cuda/attn_bwd_delta.hpp"
#include "kernels/cuda/scratch_pool.hpp"
#include "ring_harness.hpp"

namespace sparsering {
namespace {

using namespace testing_support;
using namespace gpu_testing;

constexpr double kGradRelL2 = 1e-2;
constexpr double kGradMaxRel = 3e-2;
constexpr double kDeltaTolerance = 1e-4;

struct BackwardCase {
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

std::string describe(const BackwardCase& c) {
  return str(to_string(c.kind), " W=", c.ranks, " G=", c.granularity, " N=", c.seq_len, " B=", c.batch, " Hq=", c.q_heads,
             " Hkv=", c.kv_heads, " D=", c.head_dim, " block ", c.block_q, "x", c.block_k);
}

RingProblem make_problem(std::mt19937_64& rng, const BackwardCase& c) {
  const TokenLayout layout = make_token_layout(c.kind, c.seq_len, c.ranks, c.granularity);
  AttentionShape shape;
  shape.batch = c.batch;
  shape.q_heads = c.q_heads;
  shape.kv_heads = c.kv_heads;
  shape.head_dim = c.head_dim;
  return random_problem(rng, layout, shape, c.block_q, c.block_k);
}

std::vector<float> random_floats(std::mt19937_64& rng, size_t count) {
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  std::vector<float> values(count);
  for (float& value : values) value = dist(rng);
  return values;
}

/// Compares the increments (actual - start) and (expected - start).
void expect_increment_close(const std::vector<float>& actual, const std::vector<float>& expected,
                            const std::vector<float>& start, const std::string& what) {
  std::vector<double> got(actual.size());
  std::vector<double> want(actual.size());
  for (size_t n = 0; n < actual.size(); ++n) {
    got[n] = static_cast<double>(actual[n]) - static_cast<double>(start[n]);
    want[n] = static_cast<double>(expected[n]) - static_cast<double>(start[n]);
  }
  const ErrorStats stats = error_stats(got, want);
  EXPECT_EQ(stats.non_finite, 0u) << what << ": " << gpu_testing::describe(stats);
  EXPECT_LE(stats.rel_l2, kGradRelL2) << what << ": " << gpu_testing::describe(stats);
  EXPECT_LE(stats.max_abs, kGradMaxRel * stats.max_ref + 1e-6) << what << ": " << gpu_testing::describe(stats);
}

/// How a test queues the backward: straight onto the stream, or captured into a CUDA graph that
/// is then launched (capture fails if the launch waits for the GPU: the backward must not).
enum class Queued { on_stream, in_graph };

void launch_backward(const SparseAttnBwdParams& params, cudaStream_t stream, BackwardKernel kernel, Queued queued) {
  if (queued == Queued::on_stream) {
    launch_sparse_attn_bwd(params, stream, kernel);
    return;
  }
  cudaGraph_t graph = nullptr;
  SPARSERING_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    launch_sparse_attn_bwd(params, stream, kernel);
  } catch (...) {
    (void)cudaStreamEndCapture(stream, &graph);
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    throw;
  }
  SPARSERING_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  SPARSERING_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  SPARSERING_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  SPARSERING_CUDA_CHECK(cudaStreamSynchronize(stream));
  SPARSERING_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SPARSERING_CUDA_CHECK(cudaGraphDestroy(graph));
}

void check_backward_ring_with(std::mt19937_64& rng, const RingProblem& p, const std::string& where,
                              BackwardKernel kernel, Queued queued = Queued::on_stream) {
  const RingForward forward = run_forward(p);
  const int32_t w = p.layout.ranks();
  const int64_t dim = p.shape.head_dim;
  const int64_t local = p.layout.local_len();
  CudaStream stream;
  for (int32_t rank = 0; rank < w; ++rank) {
    const std::vector<bf16_bits> q = to_local(p.q, p.layout, rank, p.q_rows(), dim);
    const std::vector<bf16_bits> dout = to_local(p.dout, p.layout, rank, p.q_rows(), dim);
    const std::vector<float> out = to_local(forward.out, p.layout, rank, p.q_rows(), dim);
    const std::vector<float> lse = to_local(forward.lse, p.layout, rank, p.q_rows(), 1);

    std::vector<float> delta(lse.size());
    AttnBwdDeltaParams delta_params;
    delta_params.shape = p.local_shape();
    delta_params.dout = dout.data();
    delta_params.out = out.data();
    delta_params.delta = delta.data();
    attn_bwd_delta_ref(delta_params);
    DeviceBuffer<bf16_bits> d_q(q);
    DeviceBuffer<bf16_bits> d_dout(dout);
    DeviceBuffer<float> d_out(out);
    DeviceBuffer<float> d_lse(lse);
    DeviceBuffer<float> d_delta(delta.size());
    d_delta.fill_bytes(0xFF);
    delta_params.dout = d_dout.data();
    delta_params.out = d_out.data();
    delta_params.delta = d_delta.data();
    launch_attn_bwd_delta(delta_params, stream.get());
    stream.synchronize();
    const std::vector<float> gpu_delta = d_delta.download();
    for (size_t t = 0; t < delta.size(); ++t) {
      ASSERT_LE(std::fabs(static_cast<double>(gpu_delta[t]) - static_cast<double>(delta[t])),
                kDeltaTolerance * (1.0 + std::fabs(static_cast<double>(delta[t]))))
          << where << " rank " << rank << " delta row " << t;
    }

    const std::vector<float> dq_start = random_floats(rng, static_cast<size_t>(p.q_rows() * local * dim));
    std::vector<float> dq = dq_start;
    DeviceBuffer<float> d_dq(dq);
    for (int32_t step = 0; step < w; ++step) {
      const int32_t source = kv_source_rank(rank, step, w);
      const SparseIndex index = p.index(rank, source);
      const std::vector<bf16_bits> k = to_local(p.k, p.layout, source, p.kv_rows(), dim);
      const std::vector<bf16_bits> v = to_local(p.v, p.layout, source, p.kv_rows(), dim);
      const std::vector<float> dk_start = random_floats(rng, static_cast<size_t>(p.kv_rows() * local * dim));
      const std::vector<float> dv_start = random_floats(rng, dk_start.size());
      const std::vector<float> dq_before = dq;
      std::vector<float> dk = dk_start;
      std::vector<float> dv = dv_start;
      SparseAttnBwdParams params;
      params.shape = p.local_shape();
      params.position = RingPosition{p.layout, rank, source};
      params.index = host_view(index);
      params.softmax_scale = p.softmax_scale;
      params.q = q.data();
      params.k = k.data();
      params.v = v.data();
      params.dout = dout.data();
      params.lse = lse.data();
      params.delta = delta.data();
      params.dq = dq.data();
      params.dk = dk.data();
      params.dv = dv.data();
      sparse_attn_bwd_ref(params);

      const DeviceIndex d_index(index);
      DeviceBuffer<bf16_bits> d_k(k);
      DeviceBuffer<bf16_bits> d_v(v);
      DeviceBuffer<float> d_dk(dk_start);
      DeviceBuffer<float> d_dv(dv_start);
      params.index = d_index.view();
      params.q = d_q.data();
      params.k = d_k.data();
      params.v = d_v.data();
      params.dout = d_dout.data();
      params.lse = d_lse.data();
      params.delta = d_delta.data();  // the GPU's own delta, as in a real run
      params.dq = d_dq.data();
      params.dk = d_dk.data();
      params.dv = d_dv.data();
      launch_backward(params, stream.get(), kernel, queued);
      stream.synchronize();
      const std::string at = str(where, " [", backward_kernel_name(kernel), queued == Queued::in_graph ? ", graph" : "",
                                 "] rank ", rank, " step ", step);
      expect_increment_close(d_dq.download(), dq, dq_before, at + " dq");
      expect_increment_close(d_dk.download(), dk, dk_start, at + " dk");
      expect_increment_close(d_dv.download(), dv, dv_start, at + " dv");
      if (::testing::Test::HasFailure()) return;
      dq = d_dq.download();  // continue from the GPU's state so errors do not compound in the check
    }
  }
}

/// The problem's first ring step as kernel parameters (enough to ask which kernels run it).
SparseAttnBwdParams first_step_params(const RingProblem& p) {
  SparseAttnBwdParams params;
  params.shape = p.local_shape();
  params.position = RingPosition{p.layout, 0, 0};
  return params;
}

/// check_backward_ring_with for every backward kernel that can run the problem here.
void check_backward_ring(std::mt19937_64& rng, const RingProblem& p, const std::string& where,
                         Queued queued = Queued::on_stream) {
  for (const BackwardKernel kernel : {BackwardKernel::mma_sync, BackwardKernel::wgmma}) {
    if (!backward_kernel_unavailable(kernel, first_step_params(p)).empty()) continue;
    check_backward_ring_with(rng, p, where, kernel, queued);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(SparseAttnBwdGpu, RandomPatternsEveryLayoutMatchReference) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  const BackwardCase cases[] = {
      {LayoutKind::contiguous, 1, 0, 384, 1, 4, 2, 128, 64, 64},
      {LayoutKind::zigzag, 2, 0, 512, 1, 8, 1, 64, 128, 64},
      {LayoutKind::striped, 4, 64, 1024, 1, 2, 2, 128, 64, 128},
      {LayoutKind::striped, 2, 16, 320, 2, 2, 1, 128, 128, 128},
      {LayoutKind::contiguous, 1, 0, 300, 1, 2, 1, 64, 64, 64},
      {LayoutKind::zigzag, 3, 0, 246, 1, 2, 2, 128, 64, 64},
      {LayoutKind::zigzag, 2, 0, 1536, 1, 8, 2, 128, 128, 128},  // long key-block walks: the stage ring wraps
  };
  for (const BackwardCase& c : cases) {
    check_backward_ring(rng, make_problem(rng, c), describe(c));
    if (HasFailure()) return;
  }
}

void check_with_patterns(std::mt19937_64& rng, const BackwardCase& c,
                         const std::function<RowPattern(int64_t n)>& pattern) {
  RingProblem problem = make_problem(rng, c);
  for (RowPattern& row : problem.rows) row = pattern(c.seq_len);
  check_backward_ring(rng, problem, describe(c));
}

TEST(SparseAttnBwdGpu, SelfOnlyVerticalsOnlyAndDense) {
  SPARSERING_REQUIRE_GPU();
  std::mt19937_64 rng = test_rng();
  check_with_patterns(rng, {LayoutKind::contiguous, 1, 0, 256, 1, 2, 2, 128, 64, 64}, [](int64_t) { return RowPattern{}; });
  check_with_patterns(rng, {LayoutKind::contiguous, 1, 0, 700, 1, 8, 1, 128, 64, 64}, [&rng](int64_t n) {
    RowPattern row;
    row.vertical_tokens.push_back(0);
    for (int s = 0; s < 150; ++s) row.vertical_tokens.push_back(uniform(rng, 0, n - 1));
    return row;
  });
  // Verticals only with 128-query blocks: the Hopper column pass (both head dims, a ring).
  for (const BackwardCase& c : {BackwardCase{LayoutKind::contiguous, 1, 0, 700, 1, 4, 2, 128, 128, 128},
                                BackwardCase{LayoutKind::zigzag, 2, 0, 1000, 1, 8, 1, 64, 128, 64}}) {
    check_with_patterns(rng, c, [&rng](int64_t n) {
      RowPattern row;
      for (int s = 0; s < 200; ++s) row.vertical_tokens.push_back(uniform(rng, 0, n - 1));
      return row;
    });
  }
  check_with_patterns(rng, {LayoutKind::striped, 2, 64, 512, 1, 2, 1, 64, 64, 64}, [](int64_t n) {
    RowPattern row;
    for (int64_t d = 0; d < n; ++d) row.slash_offsets.push_back(d);
    return row;
  });
  // Dense causal over many blocks with GQA 8: every key block is walked by up to 8 x 32 items.
  check_with_patterns(rng, {LayoutKind::contiguous, 1, 0, 2048, 1, 8, 1, 128, 64, 64}, [](int64_t n) {
    RowPattern row;
    for (int64_t d = 0; d < n; ++d) row.slash_offsets.push_back(d);
    return row;
  });
}

TEST(SparseAttnBwdGpu, CapturedInACudaGraph) {
  // A ring step's backward queues its work without waiting for the GPU, so a training step that
  // captures it into a CUDA graph gets the same gradients. The launchers' scratch pool is created
  // by the process's first launch, which must come outside a capture (docs/kernels.md, "Known
  // limits"), as a training step's warm-up does; the test makes it first, whatever ran before.
  SPARSERING_REQUIRE_GPU();
  (void)scratch_pool();
  std::mt19937_64 rng = test_rng();
  for (const BackwardCase& c : {BackwardCase{LayoutKind::zigzag, 2, 0, 768, 1, 8, 2, 128, 64, 64},
                                BackwardCase{LayoutKind::striped, 2, 64, 640, 1, 4, 1, 64, 128, 128}}) {
    check_backward_ring(rng, make_problem(rng, c), describe(c), Queued::in_graph);
    if (HasFailure()) return;
  }
}

TEST(SparseAttnBwdGpu, HopperRunsTheWgmmaKernel) {
  // The wgmma kernel must not be skipped silently where it should run: on compute capability 9.0
  // with an sm_90a build it is available, and where it is not, asking for it is refused.
  SPARSERING_REQUIRE_GPU();
  SparseAttnBwdParams params;
  params.shape.head_dim = 128;
  const std::string why = backward_kernel_unavailable(BackwardKernel::wgmma, params);
  if (device_is_hopper()) {
    EXPECT_EQ(why, "") << "an sm_90a build must run the wgmma backward on this GPU";
  } else {
    EXPECT_NE(why, "");
  }
  params.shape.head_dim = 96;
  EXPECT_NE(backward_kernel_unavailable(BackwardKernel::wgmma, params), "");
}

TEST(SparseAttnBwdGpu, RejectsUnsupportedProblemsBeforeLaunching) {
  SparseAttnBwdParams params;
  params.shape.head_dim = 128;
  params.shape.q_heads = 3;
  params.shape.kv_heads = 2;
  params.shape.q_len = 64;
  params.shape.kv_len = 64;
  params.position.layout = make_token_layout(LayoutKind::contiguous, 64, 1);
  params.index.rows = 3;
  params.index.q_blocks = 1;
  params.softmax_scale = 0.1f;
  try {
    launch_sparse_attn_bwd(params, nullptr);
    FAIL() << "kv_heads 2 with q_heads 3 accepted";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("kv_heads"), std::string::npos) << error.what();
  }
  AttnBwdDeltaParams delta;
  delta.shape.head_dim = 80;
  delta.shape.q_len = 4;
  EXPECT_THROW(launch_attn_bwd_delta(delta, nullptr), InputError);
}

}  // namespace
}  // namespace sparsering
