#include "sim/work/run_set.hpp"

#include <algorithm>

namespace sparsering {

RunSet RunSet::dilated_points(std::span<const int64_t> points, int64_t width) {
  RunSet out;
  out.runs_.reserve(points.size());
  for (const int64_t p : points) out.append(p - width, p);
  return out;
}

void RunSet::append(int64_t lo, int64_t hi) {
  if (!runs_.empty() && lo <= runs_.back().hi + 1) {
    runs_.back().hi = std::max(runs_.back().hi, hi);
    return;
  }
  runs_.push_back(Interval{lo, hi});
}

int64_t RunSet::size() const {
  int64_t total = 0;
  for (const Interval& run : runs_) total += run.hi - run.lo + 1;
  return total;
}

size_t RunSet::first_run_reaching(int64_t x) const {
  const auto it = std::lower_bound(runs_.begin(), runs_.end(), x, [](const Interval& run, int64_t value) { return run.hi < value; });
  return static_cast<size_t>(it - runs_.begin());
}

int64_t RunSet::size_in(int64_t lo, int64_t hi) const {
  int64_t total = 0;
  if (hi < lo) return 0;
  for (size_t k = first_run_reaching(lo); k < runs_.size() && runs_[k].lo <= hi; ++k) {
    total += std::min(hi, runs_[k].hi) - std::max(lo, runs_[k].lo) + 1;
  }
  return total;
}

bool RunSet::contains(int64_t x) const {
  const size_t k = first_run_reaching(x);
  return k < runs_.size() && runs_[k].lo <= x;
}

RunSet RunSet::sample(int64_t offset, int64_t stride, int64_t m_lo, int64_t m_hi) const {
  RunSet out;
  if (m_lo > m_hi) return out;
  const int64_t x_lo = offset + m_lo * stride;
  const int64_t x_hi = offset + m_hi * stride;
  for (size_t k = first_run_reaching(x_lo); k < runs_.size() && runs_[k].lo <= x_hi; ++k) {
    const int64_t lo = std::max(m_lo, ceil_div(runs_[k].lo - offset, stride));
    const int64_t hi = std::min(m_hi, floor_div(runs_[k].hi - offset, stride));
    if (lo <= hi) out.append(lo, hi);
  }
  return out;
}

RunSet RunSet::window_hits(int64_t lo, int64_t hi, int64_t y_lo, int64_t y_hi) const {
  RunSet out;
  if (y_lo > y_hi) return out;
  // y qualifies iff some run [x1, x2] meets [y + lo, y + hi], i.e. y in [x1 - hi, x2 - lo].
  for (size_t k = first_run_reaching(y_lo + lo); k < runs_.size() && runs_[k].lo - hi <= y_hi; ++k) {
    const int64_t a = std::max(y_lo, runs_[k].lo - hi);
    const int64_t b = std::min(y_hi, runs_[k].hi - lo);
    if (a <= b) out.append(a, b);
  }
  return out;
}

RunSet RunSet::unite(const RunSet& a, const RunSet& b) {
  RunSet out;
  out.runs_.reserve(a.runs_.size() + b.runs_.size());
  size_t i = 0;
  size_t j = 0;
  while (i < a.runs_.size() || j < b.runs_.size()) {
    const bool take_a = j >= b.runs_.size() || (i < a.runs_.size() && a.runs_[i].lo <= b.runs_[j].lo);
    const Interval& run = take_a ? a.runs_[i++] : b.runs_[j++];
    out.append(run.lo, run.hi);
  }
  return out;
}

int64_t RunSet::union_size_in(const RunSet& a, const RunSet& b, int64_t lo, int64_t hi) {
  // Merge walk in order of run starts; `open` is the union run being built, clipped to [lo, hi].
  int64_t total = 0;
  if (hi < lo) return 0;
  Interval open{0, -1};
  size_t i = a.first_run_reaching(lo);
  size_t j = b.first_run_reaching(lo);
  while (i < a.runs_.size() || j < b.runs_.size()) {
    const bool take_a = j >= b.runs_.size() || (i < a.runs_.size() && a.runs_[i].lo <= b.runs_[j].lo);
    const Interval& run = take_a ? a.runs_[i++] : b.runs_[j++];
    if (run.lo > hi) break;  // the smallest remaining start is past hi: so are the others
    const int64_t from = std::max(lo, run.lo);
    const int64_t to = std::min(hi, run.hi);
    if (open.lo <= open.hi && from <= open.hi + 1) {
      open.hi = std::max(open.hi, to);
    } else {
      total += open.hi - open.lo + 1;
      open = Interval{from, to};
    }
  }
  return total + (open.hi - open.lo + 1);
}

namespace {

/// Sum of (c0 + c1 * mu) for mu in [lo, hi] (lo <= hi).
int64_t linear_sum(int64_t c0, int64_t c1, int64_t lo, int64_t hi) {
  const int64_t n = hi - lo + 1;
  // sum of mu over [lo, hi] = (lo + hi) * n / 2; one of (lo + hi), n is even.
  const int64_t mu_sum = (n % 2 == 0) ? (lo + hi) * (n / 2) : ((lo + hi) / 2) * n;
  return c0 * n + c1 * mu_sum;
}

}  // namespace

int64_t diagonal_pairs_sum(int64_t count_a, int64_t count_b, int64_t mu_lo, int64_t mu_hi) {
  if (count_a <= 0 || count_b <= 0) return 0;
  // diagonal_pairs is positive on [-(count_b - 1), count_a - 1] and there equals
  // min(count_a, count_b + mu) - max(0, mu): linear between the breakpoints 0 and count_a - count_b.
  mu_lo = std::max(mu_lo, -(count_b - 1));
  mu_hi = std::min(mu_hi, count_a - 1);
  if (mu_lo > mu_hi) return 0;
  int64_t cuts[4] = {mu_lo, 0, count_a - count_b, mu_hi + 1};
  std::sort(cuts + 1, cuts + 3);
  int64_t total = 0;
  int64_t start = mu_lo;
  for (int k = 1; k < 4; ++k) {
    const int64_t end = std::min(cuts[k], mu_hi + 1);  // piece [start, end)
    if (end > start) {
      // On [start, end) neither breakpoint lies strictly inside, so the minimum and maximum pick
      // the same branch for every mu; evaluate the branch at `start`.
      const bool min_is_a = count_a <= count_b + start;
      const bool max_is_mu = start >= 0;  // at mu == 0 both branches give 0
      const int64_t c0 = (min_is_a ? count_a : count_b);
      const int64_t c1 = (min_is_a ? 0 : 1) - (max_is_mu ? 1 : 0);
      total += linear_sum(c0, c1, start, end - 1);
      start = end;
    }
  }
  return total;
}

}  // namespace sparsering
