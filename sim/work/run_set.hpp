// Sets of integers stored as sorted, disjoint, non-adjacent closed intervals ("runs"), and the few
// operations the analytic work counter needs: dilating a point set by a window, sampling a set on
// an arithmetic progression, and summing the trapezoidal multiplicity of block pairs over a set.
// These turn "which tiles does a kept slash touch" into interval arithmetic whose cost grows with
// the number of runs, not with the number of tiles. Tested in tests/sim/run_set_test.cpp against
// element-by-element enumeration.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sparsering {

/// One closed interval [lo, hi] of integers (lo <= hi).
struct Interval {
  int64_t lo = 0;
  int64_t hi = 0;
  friend bool operator==(const Interval&, const Interval&) = default;
};

/// A set of integers as sorted runs; consecutive runs are separated by at least one missing
/// integer (so the representation is unique).
class RunSet {
 public:
  RunSet() = default;

  /// The set { y : some p in `points` has y <= p <= y + width } = union of [p - width, p].
  /// Precondition: `points` sorted ascending (duplicates allowed), width >= 0.
  static RunSet dilated_points(std::span<const int64_t> points, int64_t width);

  /// Appends [lo, hi] (lo <= hi) at the end, merging with the last run when they touch.
  /// Precondition: lo >= (last run's lo); runs must be appended in ascending order of lo.
  void append(int64_t lo, int64_t hi);

  const std::vector<Interval>& runs() const { return runs_; }
  bool empty() const { return runs_.empty(); }
  void clear() { runs_.clear(); }
  /// Number of integers in the set.
  int64_t size() const;
  /// True if `x` is in the set (binary search).
  bool contains(int64_t x) const;
  /// Index of the first run whose hi >= x (runs().size() if none).
  size_t first_run_reaching(int64_t x) const;
  /// Number of integers of the set in [lo, hi] (0 if hi < lo). Cost: O(log runs + runs met).
  int64_t size_in(int64_t lo, int64_t hi) const;

  /// { m in [m_lo, m_hi] : offset + m * stride is in this set }. stride >= 1. Cost: O(log runs +
  /// runs intersecting [offset + m_lo*stride, offset + m_hi*stride]).
  RunSet sample(int64_t offset, int64_t stride, int64_t m_lo, int64_t m_hi) const;

  /// { y in [y_lo, y_hi] : this set meets [y + lo, y + hi] } (lo <= hi).
  RunSet window_hits(int64_t lo, int64_t hi, int64_t y_lo, int64_t y_hi) const;

  /// Union of two sets.
  static RunSet unite(const RunSet& a, const RunSet& b);
  /// Number of integers of the union of two sets in [lo, hi] (0 if hi < lo), without building the union.
  static int64_t union_size_in(const RunSet& a, const RunSet& b, int64_t lo, int64_t hi);

  friend bool operator==(const RunSet&, const RunSet&) = default;

 private:
  std::vector<Interval> runs_;
};

/// Number of pairs (a, b) with a in [0, count_a), b in [0, count_b) and a - b == mu.
inline int64_t diagonal_pairs(int64_t count_a, int64_t count_b, int64_t mu) {
  const int64_t hi = mu + count_b < count_a ? mu + count_b : count_a;  // a < min(count_a, count_b + mu)
  const int64_t lo = mu > 0 ? mu : 0;                                   // a >= max(0, mu)
  return hi > lo ? hi - lo : 0;
}

/// Sum of diagonal_pairs(count_a, count_b, mu) over mu in [mu_lo, mu_hi] (0 if empty), in O(1).
int64_t diagonal_pairs_sum(int64_t count_a, int64_t count_b, int64_t mu_lo, int64_t mu_hi);

/// Floor and ceiling of a / b for b > 0 (rounding toward minus / plus infinity).
inline int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
inline int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

}  // namespace sparsering
