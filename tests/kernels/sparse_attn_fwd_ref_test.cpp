// Tests of sparse_attn_fwd_ref (kernels/reference/sparse_attn_fwd_ref.hpp): run over all W ring
// steps and merged, it equals fp64 dense attention over global positions restricted to the union
// of the pairs the step indexes compute, for every layout. Bound: inputs are bf16-exact, the
// reference sums in fp64 and stores the running output / LSE in fp32 between steps, so the error
// is a few fp32 roundings per step (fp32 epsilon 6e-8): |out - out64| <= 1e-6 x max|out64| and
// |lse - lse64| <= 1e-6 x max(1, |lse64|). Edge cases: self-only rows, no verticals, the all-dense
// index (== causal attention), GQA 1 / 2 / 8, odd and non-block-multiple lengths, head dims 64
// and 128.
#include "kernels/reference/sparse_attn_fwd_ref.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "ring_harness.hpp"

namespace sparsering {
namespace {

using namespace testing_support;

constexpr double kOutTolerance = 1e-6;  // relative to max |out64| (observed ~6e-8)
constexpr double kLseTolerance = 1e-6;  // relative to max(1, |lse64|)

void expect_forward_matches_dense(const RingProblem& problem, const std::vector<uint8_t>& allowed,
                                  const std::string& where) {
  const RingForward ring = run_forward(problem);
  const DenseAttentionF64 dense =
      dense_masked_attention_f64(problem.shape, static_cast<double>(problem.softmax_scale), widen(problem.q),
                                 widen(problem.k), widen(problem.v), table_predicate(allowed, problem.layout.seq_len_tokens()));
  const auto [out_error, out_scale] = max_error(ring.out, dense.out);
  EXPECT_LE(out_error, kOutTolerance * out_scale) << where << " (max |out64| " << out_scale << ")";
  for (size_t n = 0; n < dense.lse.size(); ++n) {
    const double expected = dense.lse[n];
    ASSERT_FALSE(std::isinf(expected)) << where << ": every query sees at least itself";
    ASSERT_LE(std::fabs(static_cast<double>(ring.lse[n]) - expected), kLseTolerance * std::max(1.0, std::fabs(expected)))
        << where << " lse " << n;
  }
}

struct LayoutCase {
  LayoutKind kind;
  int32_t ranks;
  int64_t granularity;
  int64_t seq_len;
};

TEST(SparseAttnFwdRef, RingStepsMergedEqualDenseOverIndexPairs) {
  std::mt19937_64 rng = test_rng();
  const LayoutCase cases[] = {{LayoutKind::contiguous, 1, 0, 77},  {LayoutKind::contiguous, 4, 0, 120},
                              {LayoutKind::zigzag, 2, 0, 88},      {LayoutKind::zigzag, 3, 0, 78},
                              {LayoutKind::striped, 4, 16, 128},   {LayoutKind::striped, 3, 5, 90},
                              {LayoutKind::striped, 2, 1, 64},     {LayoutKind::contiguous, 3, 0, 99},
                              {LayoutKind::striped, 8, 2, 96},     {LayoutKind::zigzag, 8, 0, 112}};
  for (const LayoutCase& c : cases) {
    const TokenLayout layout = make_token_layout(c.kind, c.seq_len, c.ranks, c.granularity);
    AttentionShape shape;
    shape.batch = static_cast<int32_t>(uniform(rng, 1, 2));
    shape.kv_heads = static_cast<int32_t>(uniform(rng, 1, 2));
    shape.q_heads = shape.kv_heads * static_cast<int32_t>(uniform(rng, 1, 2));
    shape.head_dim = 64;
    const int32_t block_q = uniform(rng, 0, 1) == 0 ? 16 : 8;
    const int32_t block_k = uniform(rng, 0, 1) == 0 ? 16 : 24;
    const RingProblem problem = random_problem(rng, layout, shape, block_q, block_k);
    const std::vector<uint8_t> allowed = union_of_index_pairs(problem);
    expect_forward_matches_dense(problem, allowed,
                                 str(to_string(c.kind), " W=", c.ranks, " G=", c.granularity, " N=", c.seq_len));
  }
}

TEST(SparseAttnFwdRef, GqaRatiosAndHeadDims) {
  std::mt19937_64 rng = test_rng();
  for (const int32_t ratio : {1, 2, 8}) {
    for (const int32_t dim : {64, 128}) {
      const TokenLayout layout = make_token_layout(LayoutKind::striped, 48, 2, 8);
      AttentionShape shape;
      shape.batch = 1;
      shape.kv_heads = ratio == 8 ? 1 : 2;
      shape.q_heads = shape.kv_heads * ratio;
      shape.head_dim = dim;
      const RingProblem problem = random_problem(rng, layout, shape, 16, 16);
      expect_forward_matches_dense(problem, union_of_index_pairs(problem), str("GQA ", ratio, " D=", dim));
    }
  }
}

// With 1 x 1 tiles and nothing kept, each query computes exactly itself: out = v_q, lse = scale q.q.
TEST(SparseAttnFwdRef, SelfOnlyRowsReturnTheirOwnValue) {
  std::mt19937_64 rng = test_rng();
  const TokenLayout layout = make_token_layout(LayoutKind::zigzag, 20, 2);
  AttentionShape shape;
  shape.q_heads = 2;
  shape.kv_heads = 2;
  shape.head_dim = 64;
  RingProblem problem = random_problem(rng, layout, shape, 1, 1);
  for (RowPattern& row : problem.rows) row = RowPattern{};
  problem.k = problem.q;  // so that lse = scale |q|^2 is checkable
  problem.k.resize(problem.v.size());
  const RingForward ring = run_forward(problem);
  const int64_t n = layout.seq_len_tokens();
  for (int64_t row = 0; row < problem.q_rows(); ++row) {
    for (int64_t g = 0; g < n; ++g) {
      double norm = 0.0;
      for (int64_t d = 0; d < 64; ++d) {
        const auto e = static_cast<size_t>((row * n + g) * 64 + d);
        ASSERT_EQ(ring.out[e], bf16_to_float(problem.v[e])) << "row " << row << " token " << g;
        norm += static_cast<double>(bf16_to_float(problem.q[e])) * static_cast<double>(bf16_to_float(problem.q[e]));
      }
      const double expected = static_cast<double>(problem.softmax_scale) * norm;
      EXPECT_NEAR(static_cast<double>(ring.lse[static_cast<size_t>(row * n + g)]), expected,
                  kLseTolerance * std::max(1.0, expected));
    }
  }
}

// Every offset kept: every causal pair is computed, so the ring equals plain causal attention.
TEST(SparseAttnFwdRef, AllDenseIndexEqualsCausalAttention) {
  std::mt19937_64 rng = test_rng();
  for (const LayoutKind kind : {LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped}) {
    const TokenLayout layout = make_token_layout(kind, 72, 3, kind == LayoutKind::striped ? 4 : 0);
    AttentionShape shape;
    shape.q_heads = 2;
    shape.kv_heads = 1;
    shape.head_dim = 64;
    RingProblem problem = random_problem(rng, layout, shape, 16, 8);
    for (RowPattern& row : problem.rows) {
      row = RowPattern{};
      for (int64_t d = 0; d < layout.seq_len_tokens(); ++d) row.slash_offsets.push_back(d);
    }
    const int64_t n = layout.seq_len_tokens();
    std::vector<uint8_t> causal(static_cast<size_t>(problem.q_rows() * n * n), 0);
    for (int64_t row = 0; row < problem.q_rows(); ++row) {
      for (int64_t q = 0; q < n; ++q) {
        for (int64_t k = 0; k <= q; ++k) causal[static_cast<size_t>((row * n + q) * n + k)] = 1;
      }
    }
    EXPECT_EQ(union_of_index_pairs(problem), causal);
    expect_forward_matches_dense(problem, causal, str("dense ", to_string(kind)));
  }
}

// Rows with window-only patterns (no vertical keys) and rows with vertical keys only.
TEST(SparseAttnFwdRef, SlashOnlyAndVerticalOnlyRows) {
  std::mt19937_64 rng = test_rng();
  const TokenLayout layout = make_token_layout(LayoutKind::contiguous, 96, 4);
  AttentionShape shape;
  shape.q_heads = 2;
  shape.kv_heads = 2;
  shape.head_dim = 64;
  RingProblem problem = random_problem(rng, layout, shape, 8, 8);
  problem.rows[0] = RowPattern{{1, 2, 3, 40}, {}};
  problem.rows[1] = RowPattern{{}, {0, 17, 50, 95}};
  expect_forward_matches_dense(problem, union_of_index_pairs(problem), "slash-only / vertical-only");
}

// A step that computes nothing for a row leaves (out, lse) untouched.
TEST(SparseAttnFwdRef, StepWithoutPairsLeavesOutputUnchanged) {
  const TokenLayout layout = make_token_layout(LayoutKind::contiguous, 32, 2);
  const RingPosition position{layout, 0, 1};  // rank 0 holds rank 1's keys: all in its future
  const SparseIndex index = build_sparse_index(IndexGeometry{position, 8, 8}, std::vector<RowPattern>{RowPattern{}});
  ASSERT_EQ(index.tiles() + index.columns(), 0);
  std::vector<bf16_bits> q(16 * 64, float_to_bf16(0.5f)), kv(16 * 64, float_to_bf16(0.25f));
  std::vector<float> out(16 * 64, 3.0f), lse(16, 1.5f);
  SparseAttnFwdParams params;
  params.shape.head_dim = 64;
  params.shape.q_len = 16;
  params.shape.kv_len = 16;
  params.position = position;
  params.index = host_view(index);
  params.softmax_scale = 0.125f;
  params.q = q.data();
  params.k = kv.data();
  params.v = kv.data();
  params.out = out.data();
  params.lse = lse.data();
  sparse_attn_fwd_ref(params);
  EXPECT_EQ(out, std::vector<float>(16 * 64, 3.0f));
  EXPECT_EQ(lse, std::vector<float>(16, 1.5f));
}

TEST(SparseAttnFwdRef, RejectsMalformedParams) {
  const TokenLayout layout = make_token_layout(LayoutKind::contiguous, 32, 2);
  const RingPosition position{layout, 1, 0};
  SparseIndex index = build_sparse_index(IndexGeometry{position, 8, 8}, std::vector<RowPattern>{RowPattern{{3}, {1}}});
  std::vector<bf16_bits> q(16 * 64), kv(16 * 64);
  std::vector<float> out(16 * 64), lse(16);
  SparseAttnFwdParams params;
  params.shape.head_dim = 64;
  params.shape.q_len = 16;
  params.shape.kv_len = 16;
  params.position = position;
  params.index = host_view(index);
  params.softmax_scale = 0.125f;
  params.q = q.data();
  params.k = kv.data();
  params.v = kv.data();
  params.out = out.data();
  params.lse = lse.data();
  EXPECT_NO_THROW(sparse_attn_fwd_ref(params));
  auto expect_rejected = [&](auto&& edit) {
    SparseAttnFwdParams bad = params;
    edit(bad);
    EXPECT_THROW(sparse_attn_fwd_ref(bad), InputError);
  };
  expect_rejected([](SparseAttnFwdParams& p) { p.shape.q_len = 15; });
  expect_rejected([](SparseAttnFwdParams& p) { p.shape.q_heads = 3; p.shape.kv_heads = 2; });
  expect_rejected([](SparseAttnFwdParams& p) { p.index.rows = 2; });
  expect_rejected([](SparseAttnFwdParams& p) { p.index.q_blocks = 3; });
  expect_rejected([](SparseAttnFwdParams& p) { p.v = nullptr; });
  expect_rejected([](SparseAttnFwdParams& p) { p.position.kv_rank = 2; });
  expect_rejected([](SparseAttnFwdParams& p) { p.softmax_scale = std::numeric_limits<float>::infinity(); });
  // Entries out of range are caught while reading, not dereferenced.
  index.tile_block[0] = 2;
  params.index = host_view(index);
  EXPECT_THROW(sparse_attn_fwd_ref(params), InputError);
  index.tile_block[0] = 0;
  index.column_index[0] = 16;
  params.index = host_view(index);
  EXPECT_THROW(sparse_attn_fwd_ref(params), InputError);
}

}  // namespace
}  // namespace sparsering
