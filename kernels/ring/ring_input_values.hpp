// The layer's input values as a pure function of (seed, tensor, batch, head, global token, d),
// so every rank generates its shard and the single-GPU reference regenerates the whole sequence
// bit for bit (the nccl-tests habit: data from seed and index). Runs on host and device.
// Tested in tests/ring/ring_topology_test.cpp (range, determinism, spread).
#pragma once

#include <cstdint>

#include "common/host_device.hpp"
#include "kernels/bf16.hpp"

namespace sparsering {

/// SplitMix64 finaliser: a bijective 64-bit mix.
SPARSERING_HD inline uint64_t ring_mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// bf16 bits of element (tensor 0..3 = Q, K, V, dO; batch; head; global token; d) for `seed`:
/// a uniform value in [-1, 1) rounded to bf16.
SPARSERING_HD inline bf16_bits ring_input_bits(uint64_t seed, uint32_t tensor, int32_t batch, int32_t head,
                                               int64_t global_token, int32_t d) {
  uint64_t h = ring_mix64(seed ^ (uint64_t{tensor} << 56));
  h = ring_mix64(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(batch)) << 32) ^ static_cast<uint32_t>(head));
  h = ring_mix64(h ^ static_cast<uint64_t>(global_token));
  h = ring_mix64(h ^ static_cast<uint64_t>(static_cast<uint32_t>(d)));
  const float unit = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // [0, 1), 24 bits
  return float_to_bf16(2.0f * unit - 1.0f);
}

}  // namespace sparsering
