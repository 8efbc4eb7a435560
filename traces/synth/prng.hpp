// The synthesizer's pseudo-random numbers, fully specified so a seed gives the same trace on every
// platform and standard library: SplitMix64 (Steele, Lea, Flood 2014) for the raw 64-bit stream and
// for deriving independent sub-streams from (seed, sample, layer, head, purpose) keys, plus simple
// mappings to uniform doubles, bounded integers and normals. The std::*_distribution classes are
// deliberately not used: their outputs differ between standard libraries.
// Tested in tests/traces/prng_test.cpp (reference values, ranges, stream independence).
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>

namespace sparsering::synth {

/// Mixes one 64-bit word (the SplitMix64 output function); a bijection on uint64.
constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// High 64 bits of the 128-bit product a * b, in portable 32-bit pieces.
constexpr uint64_t mul_high(uint64_t a, uint64_t b) {
  const uint64_t a_lo = a & 0xffffffffULL, a_hi = a >> 32;
  const uint64_t b_lo = b & 0xffffffffULL, b_hi = b >> 32;
  const uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo, lo_hi = a_lo * b_hi, hi_hi = a_hi * b_hi;
  const uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xffffffffULL) + lo_hi;
  return hi_hi + (hi_lo >> 32) + (cross >> 32);
}

/// Folds a list of keys into one stream seed, order-sensitive: derive_seed({seed, sample, layer})
/// and derive_seed({seed, layer, sample}) differ.
constexpr uint64_t derive_seed(std::initializer_list<uint64_t> keys) {
  uint64_t h = 0x6a09e667f3bcc909ULL;
  for (const uint64_t key : keys) h = mix64(h ^ mix64(key + 0x9e3779b97f4a7c15ULL));
  return h;
}

/// SplitMix64 generator: state advances by the golden-ratio increment, output is mix64(state).
class SplitMix64 {
 public:
  explicit constexpr SplitMix64(uint64_t seed) : state_(seed) {}

  /// Next raw 64-bit value.
  constexpr uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return mix64(state_);
  }
  /// Uniform double in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Uniform double in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Uniform integer in [0, n) for n >= 1: the high 64 bits of next() * n (multiply-shift;
  /// bias below n / 2^64).
  uint64_t below(uint64_t n) { return mul_high(next(), n); }
  /// Uniform integer in [lo, hi] (inclusive), lo <= hi.
  int64_t between(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1));
  }
  /// exp of a uniform in [log lo, log hi): log-uniform in [lo, hi), 0 < lo <= hi.
  double log_uniform(double lo, double hi) { return std::exp(uniform(std::log(lo), std::log(hi))); }
  /// Standard normal by the Box-Muller transform (one value per call).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

}  // namespace sparsering::synth
