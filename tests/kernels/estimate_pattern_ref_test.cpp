// Tests of the estimation reference (kernels/reference/estimate_pattern_ref.hpp): sharded over W
// ranks of any layout (pass 1 per shard, statistics combined, pass 2 per shard) it equals the
// unsharded estimate; vertical and slash masses each sum to last_q (every query's probabilities
// sum to 1); both equal an fp64 softmax brute force. Bounds: masses within 1e-6 x (1 + mass) of
// the brute force; sharded within 1e-6 of unsharded; totals within 1e-5 x last_q of last_q.
#include "kernels/reference/estimate_pattern_ref.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/error.hpp"
#include "kernels/reference/pattern_candidates.hpp"
#include "kernel_test_support.hpp"

namespace sparsering {
namespace {

using namespace testing_support;

struct Estimate {
  std::vector<float> vertical;  // (B, Hq, N) by global key position
  std::vector<float> slash;     // (B, Hq, N) by offset
};

struct EstimateProblem {
  AttentionShape shape;  // q_len = last_q, kv_len = N
  int64_t seq_len = 0;
  float scale = 0.0f;
  std::vector<bf16_bits> q_last;  // (B, Hq, last_q, D)
  std::vector<bf16_bits> k;       // (B, Hkv, N, D) global order
};

// The estimate with the keys sharded by `layout`.
Estimate run_sharded(const EstimateProblem& p, const TokenLayout& layout) {
  const int64_t rows = int64_t{p.shape.batch} * p.shape.q_heads;
  const int64_t local = layout.local_len();
  const auto stats = static_cast<size_t>(rows * p.shape.q_len);
  std::vector<float> row_max(stats, -std::numeric_limits<float>::infinity()), row_sum(stats, 0.0f);
  std::vector<std::vector<bf16_bits>> shard_keys;
  auto params_for = [&](int32_t rank) {
    EstimateParams params;
    params.shape = p.shape;
    params.shape.kv_len = local;
    params.position = RingPosition{layout, 0, rank};
    params.softmax_scale = p.scale;
    params.q_last = p.q_last.data();
    params.k = shard_keys[static_cast<size_t>(rank)].data();
    return params;
  };
  for (int32_t r = 0; r < layout.ranks(); ++r) {
    shard_keys.push_back(to_local(p.k, layout, r, int64_t{p.shape.batch} * p.shape.kv_heads, p.shape.head_dim));
  }
  for (int32_t r = 0; r < layout.ranks(); ++r) {  // pass 1 per shard, folded into the combined statistics
    std::vector<float> shard_max(stats), shard_sum(stats);
    EstimateParams params = params_for(r);
    params.row_max = shard_max.data();
    params.row_sum = shard_sum.data();
    estimate_pattern_pass1_ref(params);
    estimate_pattern_combine_ref(static_cast<int64_t>(stats), shard_max.data(), shard_sum.data(), row_max.data(),
                                 row_sum.data());
  }
  Estimate estimate;
  estimate.slash.assign(static_cast<size_t>(rows * p.seq_len), 0.0f);
  std::vector<std::vector<float>> vertical_by_rank;
  for (int32_t r = 0; r < layout.ranks(); ++r) {
    vertical_by_rank.emplace_back(static_cast<size_t>(rows * local), -1.0f);
    EstimateParams params = params_for(r);
    params.row_max = row_max.data();
    params.row_sum = row_sum.data();
    params.vertical_mass = vertical_by_rank.back().data();
    params.slash_mass = estimate.slash.data();
    estimate_pattern_pass2_ref(params);
  }
  estimate.vertical = std::vector<float>(static_cast<size_t>(rows * p.seq_len));
  for (int32_t r = 0; r < layout.ranks(); ++r) {
    from_local(estimate.vertical, vertical_by_rank[static_cast<size_t>(r)], layout, r, rows, 1);
  }
  return estimate;
}

// fp64 softmax of each last query over all keys it may see.
std::pair<std::vector<double>, std::vector<double>> brute_force(const EstimateProblem& p) {
  const int64_t n = p.seq_len;
  const int64_t last_q = p.shape.q_len;
  const int64_t dim = p.shape.head_dim;
  const int64_t rows = int64_t{p.shape.batch} * p.shape.q_heads;
  std::vector<double> vertical(static_cast<size_t>(rows * n), 0.0), slash(static_cast<size_t>(rows * n), 0.0);
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t b = row / p.shape.q_heads;
    const int64_t kv_row = b * p.shape.kv_heads + (row % p.shape.q_heads) / (p.shape.q_heads / p.shape.kv_heads);
    for (int64_t t = 0; t < last_q; ++t) {
      const int64_t position = n - last_q + t;
      std::vector<double> scores(static_cast<size_t>(position + 1));
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t key = 0; key <= position; ++key) {
        double dot = 0.0;
        for (int64_t d = 0; d < dim; ++d) {
          dot += static_cast<double>(bf16_to_float(p.q_last[static_cast<size_t>((row * last_q + t) * dim + d)])) *
                 static_cast<double>(bf16_to_float(p.k[static_cast<size_t>((kv_row * n + key) * dim + d)]));
        }
        scores[static_cast<size_t>(key)] = static_cast<double>(p.scale) * dot;
        max = std::max(max, scores[static_cast<size_t>(key)]);
      }
      double sum = 0.0;
      for (const double s : scores) sum += std::exp(s - max);
      for (int64_t key = 0; key <= position; ++key) {
        const double prob = std::exp(scores[static_cast<size_t>(key)] - max) / sum;
        vertical[static_cast<size_t>(row * n + key)] += prob;
        slash[static_cast<size_t>(row * n + position - key)] += prob;
      }
    }
  }
  return {vertical, slash};
}

EstimateProblem random_estimate_problem(std::mt19937_64& rng, int64_t seq_len, int64_t last_q, int32_t q_heads,
                                        int32_t kv_heads, int32_t dim) {
  EstimateProblem p;
  p.shape.batch = 2;
  p.shape.q_heads = q_heads;
  p.shape.kv_heads = kv_heads;
  p.shape.head_dim = dim;
  p.shape.q_len = last_q;
  p.seq_len = seq_len;
  p.scale = 1.0f / std::sqrt(static_cast<float>(dim));
  p.q_last = random_bf16(rng, static_cast<size_t>(2 * q_heads * last_q * dim), 2.5f);
  p.k = random_bf16(rng, static_cast<size_t>(2 * kv_heads * seq_len * dim), 1.0f);
  // A sink key and a heavy key, as real heads have.
  for (int64_t row = 0; row < 2 * kv_heads; ++row) {
    for (int64_t d = 0; d < dim; ++d) p.k[static_cast<size_t>((row * seq_len + 0) * dim + d)] = float_to_bf16(2.0f);
  }
  return p;
}

TEST(EstimatePatternRef, ShardedEqualsUnshardedAndBruteForce) {
  std::mt19937_64 rng = test_rng();
  const int64_t n = 96;
  for (const int64_t last_q : {int64_t{1}, int64_t{16}, int64_t{64}}) {
    const EstimateProblem p = random_estimate_problem(rng, n, last_q, 4, 2, 64);
    const Estimate whole = run_sharded(p, make_token_layout(LayoutKind::contiguous, n, 1));
    const auto [vertical64, slash64] = brute_force(p);
    for (size_t e = 0; e < whole.vertical.size(); ++e) {
      ASSERT_NEAR(static_cast<double>(whole.vertical[e]), vertical64[e], 1e-6 * (1.0 + vertical64[e])) << e;
      ASSERT_NEAR(static_cast<double>(whole.slash[e]), slash64[e], 1e-6 * (1.0 + slash64[e])) << e;
    }
    for (int64_t row = 0; row < 8; ++row) {  // each query's probabilities sum to 1
      double vertical_total = 0.0, slash_total = 0.0;
      for (int64_t x = 0; x < n; ++x) {
        vertical_total += static_cast<double>(whole.vertical[static_cast<size_t>(row * n + x)]);
        slash_total += static_cast<double>(whole.slash[static_cast<size_t>(row * n + x)]);
      }
      EXPECT_NEAR(vertical_total, static_cast<double>(last_q), 1e-5 * static_cast<double>(last_q));
      EXPECT_NEAR(slash_total, static_cast<double>(last_q), 1e-5 * static_cast<double>(last_q));
    }
    const TokenLayout layouts[] = {make_token_layout(LayoutKind::contiguous, n, 4),
                                   make_token_layout(LayoutKind::zigzag, n, 3),
                                   make_token_layout(LayoutKind::striped, n, 4, 8),
                                   make_token_layout(LayoutKind::striped, n, 8, 1),
                                   make_token_layout(LayoutKind::striped, n, 2, 48)};
    for (const TokenLayout& layout : layouts) {
      const Estimate sharded = run_sharded(p, layout);
      const auto [vertical_error, vertical_scale] = max_error(sharded.vertical, whole.vertical);
      const auto [slash_error, slash_scale] = max_error(sharded.slash, whole.slash);
      EXPECT_LE(vertical_error, 1e-6 * vertical_scale) << to_string(layout.kind()) << " W=" << layout.ranks();
      EXPECT_LE(slash_error, 1e-6 * slash_scale) << to_string(layout.kind()) << " W=" << layout.ranks();
    }
  }
}

// A shard can hold no key that an early last query may see (all its keys are later): that
// query's pass-1 statistics must be the combine identity (-inf, 0).
TEST(EstimatePatternRef, ShardWithoutVisibleKeysIsTheIdentity) {
  std::mt19937_64 rng = test_rng();
  const int64_t n = 64;
  EstimateProblem p = random_estimate_problem(rng, n, 40, 1, 1, 64);
  const TokenLayout layout = make_token_layout(LayoutKind::contiguous, n, 2);
  // Rank 1 holds keys 32..63; query 0 sits at 24 and sees none of them.
  const std::vector<bf16_bits> keys = to_local(p.k, layout, 1, 2, 64);
  std::vector<float> row_max(2 * 40), row_sum(2 * 40);
  EstimateParams params;
  params.shape = p.shape;
  params.shape.kv_len = 32;
  params.position = RingPosition{layout, 0, 1};
  params.softmax_scale = p.scale;
  params.q_last = p.q_last.data();
  params.k = keys.data();
  params.row_max = row_max.data();
  params.row_sum = row_sum.data();
  estimate_pattern_pass1_ref(params);
  EXPECT_TRUE(std::isinf(row_max[0]) && row_max[0] < 0.0f);
  EXPECT_EQ(row_sum[0], 0.0f);
  EXPECT_TRUE(std::isfinite(row_max[39]));
  // Combining with the identity changes nothing.
  std::vector<float> max_copy = row_max, sum_copy = row_sum;
  const std::vector<float> identity_max(80, -std::numeric_limits<float>::infinity()), identity_sum(80, 0.0f);
  estimate_pattern_combine_ref(80, identity_max.data(), identity_sum.data(), max_copy.data(), sum_copy.data());
  EXPECT_EQ(max_copy, row_max);
  EXPECT_EQ(sum_copy, row_sum);
  params.shape.q_len = n + 1;  // more last queries than tokens
  EXPECT_THROW(estimate_pattern_pass1_ref(params), InputError);
  params.shape.q_len = 40;
  params.shape.kv_len = 31;
  EXPECT_THROW(estimate_pattern_pass1_ref(params), InputError);
  params.shape.kv_len = 32;
  EXPECT_THROW(estimate_pattern_pass2_ref(params), InputError);  // no mass arrays
}

}  // namespace
}  // namespace sparsering
