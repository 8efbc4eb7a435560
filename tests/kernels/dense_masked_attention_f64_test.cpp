// Tests of the fp64 oracle (kernels/reference/dense_masked_attention_f64.hpp): hand-derived
// values (one allowed key gives its value; equal scores give the mean; no allowed key gives 0 and
// -inf) and central finite differences of loss = sum(dout * out) for dQ, dK, dV with GQA and a
// random mask (step 1e-6, agreement within 1e-6 relative to the largest gradient).
#include "kernels/reference/dense_masked_attention_f64.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "common/error.hpp"
#include "kernel_test_support.hpp"

namespace sparsering {
namespace {

TEST(DenseMaskedAttentionF64, HandDerivedValues) {
  AttentionShape shape;
  shape.head_dim = 2;
  shape.q_len = 3;
  shape.kv_len = 3;
  const std::vector<double> q = {0, 0, 1, 2, 3, -1};
  const std::vector<double> k = {1, 0, 0, 1, 5, 5};
  const std::vector<double> v = {1, 2, 3, 4, 5, 6};
  // Query 0: only key 2. Query 1: keys 0 and 1 with scores 1 and 2. Query 2: nothing.
  const PairPredicate allowed = [](int32_t, int64_t i, int64_t j) {
    return (i == 0 && j == 2) || (i == 1 && j <= 1);
  };
  const DenseAttentionF64 result = dense_masked_attention_f64(shape, 1.0, q, k, v, allowed);
  EXPECT_DOUBLE_EQ(result.out[0], 5.0);
  EXPECT_DOUBLE_EQ(result.out[1], 6.0);
  EXPECT_DOUBLE_EQ(result.lse[0], 0.0);  // score 0 . (5, 5) = 0
  const double w0 = 1.0 / (1.0 + std::exp(1.0));
  EXPECT_NEAR(result.out[2], w0 * 1 + (1 - w0) * 3, 1e-15);
  EXPECT_NEAR(result.out[3], w0 * 2 + (1 - w0) * 4, 1e-15);
  EXPECT_NEAR(result.lse[1], std::log(std::exp(1.0) + std::exp(2.0)), 1e-15);
  EXPECT_EQ(result.out[4], 0.0);
  EXPECT_EQ(result.out[5], 0.0);
  EXPECT_TRUE(std::isinf(result.lse[2]) && result.lse[2] < 0);
  EXPECT_THROW(dense_masked_attention_f64(shape, 1.0, std::vector<double>(5), k, v, allowed), InputError);
}

TEST(DenseMaskedAttentionF64, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng = testing_support::test_rng();
  AttentionShape shape;
  shape.batch = 2;
  shape.q_heads = 4;
  shape.kv_heads = 2;
  shape.head_dim = 3;
  shape.q_len = 6;
  shape.kv_len = 6;
  const size_t q_size = 2 * 4 * 6 * 3;
  const size_t kv_size = 2 * 2 * 6 * 3;
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  auto random_vector = [&](size_t count) {
    std::vector<double> values(count);
    for (double& value : values) value = dist(rng);
    return values;
  };
  std::vector<double> q = random_vector(q_size), k = random_vector(kv_size), v = random_vector(kv_size);
  const std::vector<double> dout = random_vector(q_size);
  // Causal plus a random subset, with one row left empty to cover the no-key case.
  std::vector<uint8_t> mask(static_cast<size_t>(8 * 6 * 6));
  for (size_t n = 0; n < mask.size(); ++n) mask[n] = testing_support::uniform(rng, 0, 2) != 0 ? 1 : 0;
  for (int64_t i = 0; i < 6; ++i) mask[static_cast<size_t>((3 * 6 + 2) * 6 + i)] = 0;
  const PairPredicate allowed = [&mask](int32_t row, int64_t i, int64_t j) {
    return j <= i && mask[static_cast<size_t>((row * 6 + i) * 6 + j)] != 0;
  };
  const double scale = 0.7;
  auto loss = [&] {
    const DenseAttentionF64 result = dense_masked_attention_f64(shape, scale, q, k, v, allowed);
    double sum = 0.0;
    for (size_t e = 0; e < q_size; ++e) sum += dout[e] * result.out[e];
    return sum;
  };
  const DenseAttentionGradsF64 grads = dense_masked_attention_bwd_f64(shape, scale, q, k, v, dout, allowed);
  const double step = 1e-6;
  for (auto [name, tensor, gradient] : {std::tuple{"q", &q, &grads.dq}, std::tuple{"k", &k, &grads.dk},
                                        std::tuple{"v", &v, &grads.dv}}) {
    double largest = 0.0;
    for (const double g : *gradient) largest = std::max(largest, std::fabs(g));
    ASSERT_GT(largest, 0.0) << name;
    for (size_t e = 0; e < tensor->size(); ++e) {
      const double saved = (*tensor)[e];
      (*tensor)[e] = saved + step;
      const double up = loss();
      (*tensor)[e] = saved - step;
      const double down = loss();
      (*tensor)[e] = saved;
      EXPECT_NEAR((*gradient)[e], (up - down) / (2 * step), 1e-6 * largest) << "d" << name << "[" << e << "]";
    }
  }
}

}  // namespace
}  // namespace sparsering
