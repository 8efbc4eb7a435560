// The synthesizer's PRNG: reference values (so every platform draws the same numbers), ranges
// and stream independence.
#include "traces/synth/prng.hpp"
#include "tests/common/test_seed.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

namespace sparsering::synth {
namespace {

TEST(SplitMix64, MatchesTheReferenceSequence) {
  // Outputs of the published SplitMix64 for seeds 0 and 1234567.
  SplitMix64 zero(0);
  EXPECT_EQ(zero.next(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(zero.next(), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(zero.next(), 0x06c45d188009454fULL);
  SplitMix64 other(1234567);
  EXPECT_EQ(other.next(), 0x599ed017fb08fc85ULL);
  EXPECT_EQ(other.next(), 0x2c73f08458540fa5ULL);
}

TEST(SplitMix64, MulHighIsTheUpperHalfOfTheProduct) {
  __extension__ using u128 = unsigned __int128;
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  for (int i = 0; i < 10000; ++i) {
    const uint64_t a = rng(), b = i % 3 == 0 ? rng() >> (rng() % 64) : rng();
    EXPECT_EQ(mul_high(a, b), static_cast<uint64_t>((static_cast<u128>(a) * b) >> 64));
  }
  EXPECT_EQ(mul_high(~uint64_t{0}, ~uint64_t{0}), ~uint64_t{0} - 1);
  EXPECT_EQ(mul_high(uint64_t{1} << 63, 4), 2u);
}

TEST(SplitMix64, RangesAndMoments) {
  SplitMix64 rng(sparsering::testing_support::test_seed());
  double sum = 0.0, sum_sq = 0.0, normal_sum = 0.0, normal_sq = 0.0;
  constexpr int kDraws = 200000;
  for (int i = 0; i < kDraws; ++i) {
    const double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum_sq += u * u;
    ASSERT_LT(rng.below(7), 7u);
    const int64_t b = rng.between(-3, 3);
    ASSERT_GE(b, -3);
    ASSERT_LE(b, 3);
    const double l = rng.log_uniform(2.0, 64.0);
    ASSERT_GE(l, 2.0 * (1 - 1e-12));
    ASSERT_LT(l, 64.0);
    const double z = rng.normal();
    ASSERT_TRUE(std::isfinite(z));
    normal_sum += z;
    normal_sq += z * z;
  }
  // Loose bounds (many standard errors wide): catch a broken mapping, never a fair draw.
  EXPECT_NEAR(sum / kDraws, 0.5, 0.01);
  EXPECT_NEAR(sum_sq / kDraws, 1.0 / 3.0, 0.01);
  EXPECT_NEAR(normal_sum / kDraws, 0.0, 0.02);
  EXPECT_NEAR(normal_sq / kDraws, 1.0, 0.03);
  EXPECT_EQ(rng.below(1), 0u);
}

TEST(DeriveSeed, OrderAndValuesMatter) {
  std::set<uint64_t> seeds;
  for (uint64_t a = 0; a < 20; ++a) {
    for (uint64_t b = 0; b < 20; ++b) seeds.insert(derive_seed({7, a, b}));
  }
  EXPECT_EQ(seeds.size(), 400u);
  EXPECT_NE(derive_seed({1, 2}), derive_seed({2, 1}));
  EXPECT_NE(derive_seed({1}), derive_seed({1, 0}));
  EXPECT_EQ(derive_seed({3, 4, 5}), derive_seed({3, 4, 5}));
}

}  // namespace
}  // namespace sparsering::synth
