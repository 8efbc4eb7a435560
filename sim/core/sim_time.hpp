// Simulated time: integer nanoseconds, and the one function that turns a real-valued duration into
// simulated time. Every model (kernel cost, link, collectives, GEMMs) computes a duration in
// floating point and converts it here exactly once; all scheduling arithmetic is then exact integer
// arithmetic, so tests can assert exact simulated times. Tested in tests/sim/sim_time_test.cpp.
#pragma once

#include <cstdint>

namespace sparsering {

/// Simulated time or duration in nanoseconds.
using SimNs = int64_t;

/// Throws the InputError of round_to_ns for `nanoseconds` (out of line: the check is inline).
[[noreturn]] void throw_bad_duration(double nanoseconds);

/// The one rounding function: a duration in (real-valued) nanoseconds to SimNs, rounded to the
/// nearest integer, halves away from zero. Throws InputError for NaN, infinities, negative values
/// and values beyond 2^62 ns (146 years), which only bad inputs can produce. Inline and without a
/// libm call: the simulator and the tuner's bounds round every cell of every ring step. For
/// x in [0, 2^62] the truncation is the floor and x - floor(x) is exact, so this is llround(x).
inline SimNs round_to_ns(double nanoseconds) {
  constexpr double kLimit = 4.611686018427387904e18;  // 2^62
  if (!(nanoseconds >= 0.0 && nanoseconds <= kLimit)) throw_bad_duration(nanoseconds);  // NaN fails both
  const auto whole = static_cast<SimNs>(nanoseconds);
  return whole + (nanoseconds - static_cast<double>(whole) >= 0.5 ? 1 : 0);
}

/// round_to_ns(microseconds x 1e3).
inline SimNs ns_from_us(double microseconds) { return round_to_ns(microseconds * 1e3); }
/// round_to_ns(seconds x 1e9).
inline SimNs ns_from_seconds(double seconds) { return round_to_ns(seconds * 1e9); }

/// For reports only (never fed back into the simulation): nanoseconds as milliseconds / microseconds.
inline double ns_to_ms(SimNs ns) { return static_cast<double>(ns) * 1e-6; }
inline double ns_to_us(SimNs ns) { return static_cast<double>(ns) * 1e-3; }

}  // namespace sparsering
