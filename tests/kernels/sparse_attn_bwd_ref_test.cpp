// Tests of sparse_attn_bwd_ref and attn_bwd_delta_ref (kernels/reference/sparse_attn_bwd_ref.hpp):
// summed over all ring steps (dK / dV over all ranks that held the chunk), the gradients equal
// the fp64 gradients of dense attention restricted to the union of the index pairs; the fp64
// gradients themselves are checked by finite differences in dense_masked_attention_f64_test.cpp.
// Bound: the backward reads the fp32 forward output and LSE, sums in fp64 within a step and in
// fp32 across steps: max |g - g64| <= 1e-5 x max |g64| for each of dQ, dK, dV.
#include "kernels/reference/sparse_attn_bwd_ref.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "ring_harness.hpp"

namespace sparsering {
namespace {

using namespace testing_support;

constexpr double kGradTolerance = 1e-5;  // relative to the largest fp64 gradient entry

void expect_backward_matches_dense(const RingProblem& problem, const std::string& where) {
  const std::vector<uint8_t> allowed = union_of_index_pairs(problem);
  const RingForward forward = run_forward(problem);
  const RingBackward ring = run_backward(problem, forward);
  const DenseAttentionGradsF64 dense = dense_masked_attention_bwd_f64(
      problem.shape, static_cast<double>(problem.softmax_scale), widen(problem.q), widen(problem.k), widen(problem.v),
      widen(problem.dout), table_predicate(allowed, problem.layout.seq_len_tokens()));
  for (const auto& [name, actual, expected] : {std::tuple{"dq", &ring.dq, &dense.dq}, std::tuple{"dk", &ring.dk, &dense.dk},
                                               std::tuple{"dv", &ring.dv, &dense.dv}}) {
    const auto [error, scale] = max_error(*actual, *expected);
    EXPECT_GT(scale, 0.0) << where << " " << name;
    EXPECT_LE(error, kGradTolerance * scale) << where << " " << name << " (max |g64| " << scale << ")";
  }
}

TEST(SparseAttnBwdRef, RingStepsSummedEqualDenseGradients) {
  std::mt19937_64 rng = test_rng();
  struct Case {
    LayoutKind kind;
    int32_t ranks;
    int64_t granularity;
    int64_t seq_len;
  };
  const Case cases[] = {{LayoutKind::contiguous, 1, 0, 61}, {LayoutKind::contiguous, 4, 0, 96},
                        {LayoutKind::zigzag, 3, 0, 90},     {LayoutKind::zigzag, 8, 0, 112},
                        {LayoutKind::striped, 4, 16, 128},  {LayoutKind::striped, 3, 7, 84},
                        {LayoutKind::striped, 8, 1, 64}};
  for (const Case& c : cases) {
    AttentionShape shape;
    shape.batch = static_cast<int32_t>(uniform(rng, 1, 2));
    shape.kv_heads = static_cast<int32_t>(uniform(rng, 1, 2));
    shape.q_heads = shape.kv_heads * static_cast<int32_t>(uniform(rng, 1, 2));
    shape.head_dim = 64;
    const RingProblem problem = random_problem(rng, make_token_layout(c.kind, c.seq_len, c.ranks, c.granularity),
                                               shape, uniform(rng, 0, 1) == 0 ? 16 : 8, 16);
    expect_backward_matches_dense(problem, str(to_string(c.kind), " W=", c.ranks, " G=", c.granularity));
  }
}

TEST(SparseAttnBwdRef, GqaRatiosHeadDimsAndDenseIndex) {
  std::mt19937_64 rng = test_rng();
  for (const int32_t ratio : {1, 2, 8}) {
    for (const int32_t dim : {64, 128}) {
      AttentionShape shape;
      shape.kv_heads = ratio == 8 ? 1 : 2;
      shape.q_heads = shape.kv_heads * ratio;
      shape.head_dim = dim;
      RingProblem problem = random_problem(rng, make_token_layout(LayoutKind::zigzag, 40, 2), shape, 8, 16);
      if (dim == 128) {  // all-dense rows: plain causal attention
        for (RowPattern& row : problem.rows) {
          row = RowPattern{};
          for (int64_t d = 0; d < 40; ++d) row.slash_offsets.push_back(d);
        }
      }
      expect_backward_matches_dense(problem, str("GQA ", ratio, " D=", dim));
    }
  }
}

TEST(SparseAttnBwdRef, DeltaIsRowSumOfDoutTimesOut) {
  std::mt19937_64 rng = test_rng();
  AttnBwdDeltaParams params;
  params.shape.batch = 2;
  params.shape.q_heads = 3;
  params.shape.kv_heads = 1;
  params.shape.head_dim = 64;
  params.shape.q_len = 5;
  const size_t rows = 2 * 3 * 5;
  const std::vector<bf16_bits> dout = random_bf16(rng, rows * 64, 1.0f);
  std::vector<float> out(rows * 64);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& value : out) value = dist(rng);
  std::vector<float> delta(rows, -7.0f);
  params.dout = dout.data();
  params.out = out.data();
  params.delta = delta.data();
  attn_bwd_delta_ref(params);
  for (size_t r = 0; r < rows; ++r) {
    double expected = 0.0;
    for (size_t d = 0; d < 64; ++d) {
      expected += static_cast<double>(bf16_to_float(dout[r * 64 + d])) * static_cast<double>(out[r * 64 + d]);
    }
    EXPECT_NEAR(static_cast<double>(delta[r]), expected, 1e-6 * std::max(1.0, std::fabs(expected)));
  }
  params.out = nullptr;
  EXPECT_THROW(attn_bwd_delta_ref(params), InputError);
}

// Gradients accumulate: running a step twice doubles its contribution (dQ, dK, dV are +=).
TEST(SparseAttnBwdRef, Accumulates) {
  std::mt19937_64 rng = test_rng();
  AttentionShape shape;
  shape.head_dim = 64;
  const RingProblem problem = random_problem(rng, make_token_layout(LayoutKind::contiguous, 32, 1), shape, 8, 8);
  const RingForward forward = run_forward(problem);
  const RingBackward once = run_backward(problem, forward);
  // Re-run the single step on top of the first result.
  const SparseIndex index = problem.index(0, 0);
  std::vector<float> delta(32);
  AttnBwdDeltaParams delta_params;
  delta_params.shape = problem.local_shape();
  delta_params.dout = problem.dout.data();
  delta_params.out = forward.out.data();
  delta_params.delta = delta.data();
  attn_bwd_delta_ref(delta_params);
  RingBackward twice = once;
  SparseAttnBwdParams params;
  params.shape = problem.local_shape();
  params.position = RingPosition{problem.layout, 0, 0};
  params.index = host_view(index);
  params.softmax_scale = problem.softmax_scale;
  params.q = problem.q.data();
  params.k = problem.k.data();
  params.v = problem.v.data();
  params.dout = problem.dout.data();
  params.lse = forward.lse.data();
  params.delta = delta.data();
  params.dq = twice.dq.data();
  params.dk = twice.dk.data();
  params.dv = twice.dv.data();
  sparse_attn_bwd_ref(params);
  for (size_t e = 0; e < once.dq.size(); ++e) {
    EXPECT_NEAR(static_cast<double>(twice.dq[e]), 2.0 * static_cast<double>(once.dq[e]), 1e-6);
    EXPECT_NEAR(static_cast<double>(twice.dk[e]), 2.0 * static_cast<double>(once.dk[e]), 1e-6);
    EXPECT_NEAR(static_cast<double>(twice.dv[e]), 2.0 * static_cast<double>(once.dv[e]), 1e-6);
  }
  params.delta = nullptr;
  EXPECT_THROW(sparse_attn_bwd_ref(params), InputError);
}

}  // namespace
}  // namespace sparsering
