// Tests of kernels/bf16.hpp: exact widening, round-to-nearest-even narrowing against an
// independent fp64 oracle (nearest of the two bf16 neighbours), NaN and infinity handling.
#include "kernels/bf16.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/index/row_pattern.hpp"
#include "kernel_test_support.hpp"

namespace sparsering {
namespace {

// Oracle: the bf16 nearest to `value` by comparing the distances to both truncation neighbours in
// fp64 (exact for float inputs), ties to the even bit pattern.
bf16_bits nearest_bf16(float value) {
  const uint32_t bits = float_bits(value);
  const auto down = static_cast<bf16_bits>(bits >> 16);  // toward zero
  const auto up = static_cast<bf16_bits>(down + 1);       // away from zero (may become inf)
  const double exact = static_cast<double>(value);
  const double low = static_cast<double>(bf16_to_float(down));
  const double high = static_cast<double>(bf16_to_float(up));
  const double to_low = std::fabs(exact - low);
  const double to_high = std::fabs(high - exact);
  if (to_low < to_high) return down;
  if (to_high < to_low) return up;
  return (down & 1u) == 0 ? down : up;
}

TEST(Bf16, WideningIsExactForEveryPattern) {
  for (uint32_t pattern = 0; pattern <= 0xffffu; ++pattern) {
    const auto value = static_cast<bf16_bits>(pattern);
    const float wide = bf16_to_float(value);
    EXPECT_EQ(float_bits(wide), pattern << 16);
    if (!std::isnan(wide)) {
      EXPECT_EQ(float_to_bf16(wide), value) << "pattern " << pattern;
    }
  }
}

TEST(Bf16, RoundsToNearestEvenOnRandomFloats) {
  std::mt19937_64 rng = testing_support::test_rng();
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int n = 0; n < 200000; ++n) {
    uint32_t bits = any_bits(rng);
    if (n % 4 == 0) bits = (bits & 0xffff0000u) | 0x8000u;  // exact ties half the time
    const float value = float_from_bits(bits);
    if (std::isnan(value) || std::isinf(value)) continue;
    if (std::fabs(value) >= 3.3895313892515355e38f) continue;  // near the top: checked separately
    EXPECT_EQ(float_to_bf16(value), nearest_bf16(value)) << "float bits 0x" << std::hex << bits;
  }
}

TEST(Bf16, TiesGoToEven) {
  EXPECT_EQ(float_to_bf16(float_from_bits(0x3f808000u)), 0x3f80u);  // 1 + 2^-8: tie, 0x3f80 is even
  EXPECT_EQ(float_to_bf16(float_from_bits(0x3f818000u)), 0x3f82u);  // tie between 0x3f81 and 0x3f82
  EXPECT_EQ(float_to_bf16(float_from_bits(0x3f808001u)), 0x3f81u);  // just above the tie
  EXPECT_EQ(float_to_bf16(-1.0f), 0xbf80u);
  EXPECT_EQ(float_to_bf16(0.0f), 0x0000u);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000u);
}

TEST(Bf16, InfinityOverflowAndNan) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float_to_bf16(inf), 0x7f80u);
  EXPECT_EQ(float_to_bf16(-inf), 0xff80u);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80u);  // rounds up past the largest bf16
  EXPECT_EQ(float_to_bf16(float_from_bits(0x7f7f7fffu)), 0x7f7fu);       // below the tie: largest finite
  // NaNs whose payload lives only in the low 16 bits must not become infinity.
  for (const uint32_t nan_bits : {0x7f800001u, 0xff800001u, 0x7fc00000u, 0x7f80ffffu, 0xffffffffu}) {
    const float narrowed = bf16_to_float(float_to_bf16(float_from_bits(nan_bits)));
    EXPECT_TRUE(std::isnan(narrowed)) << std::hex << nan_bits;
    EXPECT_EQ(float_bits(narrowed) >> 31, nan_bits >> 31) << "sign kept";
  }
}

}  // namespace
}  // namespace sparsering
