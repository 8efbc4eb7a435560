// Mass profiles for synthetic candidates: a non-increasing list of masses whose recall prefix
// (traces/recall.hpp) at a chosen recall p has a chosen length T. The first T entries (the "core")
// follow a power law i^-a after a few boosted entries (attention sinks, the main diagonal); the
// rest (the "tail") continue with a steeper power law sized so that the core holds just over p of
// the total. Tested in tests/traces/mass_profile_test.cpp (prefix length, order, total).
#pragma once

#include <cstdint>
#include <vector>

namespace sparsering::synth {

struct ProfileShape {
  int64_t slots = 0;         ///< n: real candidates, >= 1
  int64_t core = 0;          ///< T: entries the recall prefix at `recall` should keep, 1 <= T <= n
  int64_t boosted = 0;       ///< leading entries that share `boost_share` of the core mass, 0 <= boosted <= T
  double boost_share = 0.0;  ///< share of the core mass on the boosted entries, in [0, 1)
  double exponent = 1.0;     ///< a >= 0: core entry i (after the boosted ones) weighs (i + 1)^-a
  double recall = 0.95;      ///< p in (0, 1)
  double total = 1.0;        ///< sum of all masses, in (0, 1]
};

/// Largest share of the slots the core may take for the prefix guarantee below to hold at recall p:
/// min(3/4, 0.9 p). (A tail of n - T entries, none above the last core entry, must be able to hold
/// (1 - p) / p of the core's mass.)
constexpr double max_core_share(double recall) { return recall * 0.9 < 0.75 ? recall * 0.9 : 0.75; }

/// Masses of `shape.slots` candidates, non-increasing, summing to `shape.total` (up to rounding).
/// When T < n and T <= max_core_share(p) * n, recall_prefix_length(masses, n, p, 0, n) == T. If the
/// tail cannot hold its share without exceeding the last core entry, the core is flattened
/// (smaller a, then smaller boost share) until it can. Throws std::invalid_argument on a shape
/// outside the ranges above.
std::vector<double> mass_profile(const ProfileShape& shape);

}  // namespace sparsering::synth
