// bfloat16 <-> float32 conversion shared by the CUDA kernels and their CPU references, so both
// read and write bf16 bit patterns identically. bf16 is the upper half of an IEEE float32:
// widening is exact; narrowing rounds to nearest, ties to even, and keeps NaNs NaN (quiet).
// Tested in tests/kernels/bf16_test.cpp.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/host_device.hpp"
#include "kernels/attention_params.hpp"  // bf16_bits

namespace sparsering {

/// Bit pattern of a float32.
SPARSERING_HD inline uint32_t float_bits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}

/// The float32 with bit pattern `bits`.
SPARSERING_HD inline float float_from_bits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

/// Widens a bf16 value to float32 (exact).
SPARSERING_HD inline float bf16_to_float(bf16_bits value) {
  return float_from_bits(static_cast<uint32_t>(value) << 16);
}

/// Rounds a float32 to bf16: round to nearest, ties to even; overflow rounds to +-inf as IEEE
/// rounding does; a NaN stays a NaN (sign and top payload bits kept, quiet bit set).
SPARSERING_HD inline bf16_bits float_to_bf16(float value) {
  const uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    // NaN: truncating could clear every payload bit left in bf16 and turn it into inf.
    return static_cast<bf16_bits>((bits >> 16) | 0x0040u);
  }
  const uint32_t lsb = (bits >> 16) & 1u;  // ties go to the even neighbour
  return static_cast<bf16_bits>((bits + 0x7fffu + lsb) >> 16);
}

/// The float32 nearest to `value` that bf16 represents exactly (float_to_bf16 then back).
SPARSERING_HD inline float round_to_bf16(float value) { return bf16_to_float(float_to_bf16(value)); }

}  // namespace sparsering
