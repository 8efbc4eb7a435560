// Construction of synthetic mass profiles (see mass_profile.hpp). With C the core's sum and t the
// tail's, the recall prefix at p is exactly T when
//   C >= p (C + t)              (T entries reach p), and
//   C - m_{T-1} < p (C + t)     (T - 1 entries do not),
// i.e. t in ((C - m_{T-1}) (1 - p) / p - m_{T-1}, C (1 - p) / p]. The tail is aimed between the two
// bounds, nearer the upper one, so float rounding cannot move the prefix.
#include "traces/synth/mass_profile.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace sparsering::synth {
namespace {

std::vector<double> core_masses(const ProfileShape& s, double exponent, double boost_share) {
  std::vector<double> core(static_cast<size_t>(s.core));
  double rest = 0.0;
  for (int64_t i = s.boosted; i < s.core; ++i) {
    const double x = std::pow(static_cast<double>(i - s.boosted + 1), -exponent);
    core[static_cast<size_t>(i)] = x;
    rest += x;
  }
  if (s.boosted > 0) {
    const double first_rest = s.boosted < s.core ? core[static_cast<size_t>(s.boosted)] : 1.0;
    // Boosted entries decay by 0.6 each and together hold boost_share of the core.
    double weights = 0.0;
    for (int64_t i = 0; i < s.boosted; ++i) weights += std::pow(0.6, static_cast<double>(i));
    const double boost_total = s.boosted < s.core ? boost_share / (1.0 - boost_share) * rest : weights;
    for (int64_t i = 0; i < s.boosted; ++i) {
      const double b = boost_total * std::pow(0.6, static_cast<double>(i)) / weights;
      core[static_cast<size_t>(i)] = std::max(b, first_rest);
    }
  }
  return core;
}

// Approximate sum over j = 1..R of (1 + j / s0)^-beta (midpoint-rule integral); decreasing in beta.
double tail_sum_estimate(double s0, double tail_slots, double beta) {
  const double lo = 1.0 + 0.5 / s0, hi = 1.0 + (tail_slots + 0.5) / s0;
  if (std::abs(beta - 1.0) < 1e-9) return s0 * std::log(hi / lo);
  return s0 / (1.0 - beta) * (std::pow(hi, 1.0 - beta) - std::pow(lo, 1.0 - beta));
}

}  // namespace

std::vector<double> mass_profile(const ProfileShape& s) {
  if (s.slots < 1 || s.core < 1 || s.core > s.slots || s.boosted < 0 || s.boosted > s.core || !(s.boost_share >= 0.0) ||
      !(s.boost_share < 1.0) || !(s.exponent >= 0.0) || !(s.recall > 0.0 && s.recall < 1.0) ||
      !(s.total > 0.0 && s.total <= 1.0)) {
    throw std::invalid_argument("mass_profile: shape out of range");
  }
  const int64_t tail_slots = s.slots - s.core;
  double exponent = s.exponent;
  double boost_share = s.boost_share;
  std::vector<double> masses;
  std::vector<double> core;
  double tail_target = 0.0;
  for (int attempt = 0;; ++attempt) {
    core = core_masses(s, exponent, boost_share);
    if (tail_slots == 0) break;
    double core_sum = 0.0;
    for (const double m : core) core_sum += m;
    const double last = core.back();
    const double p = s.recall;
    // Aim at the upper bound minus half the window's width (the window is m_{T-1} / p wide).
    const double upper = core_sum * (1.0 - p) / p;
    tail_target = std::max(upper - 0.5 * last / p, 0.5 * upper);
    if (static_cast<double>(tail_slots) * last >= tail_target || attempt >= 60) break;
    // The tail cannot stay below the last core entry: flatten the core and retry.
    if (exponent > 1e-3) {
      exponent *= 0.5;
    } else {
      exponent = 0.0;
      boost_share *= 0.5;
    }
  }
  masses = core;
  if (tail_slots > 0) {
    const double last = core.back();
    const double s0 = static_cast<double>(std::max<int64_t>(1, s.core - s.boosted));
    const double goal = tail_target / last;  // in units of the last core mass
    double lo = 0.0, hi = 64.0;
    for (int i = 0; i < 60; ++i) {
      const double mid = 0.5 * (lo + hi);
      (tail_sum_estimate(s0, static_cast<double>(tail_slots), mid) > goal ? lo : hi) = mid;
    }
    const double beta = hi;
    masses.reserve(static_cast<size_t>(s.slots));
    double tail_sum = 0.0;
    for (int64_t j = 1; j <= tail_slots; ++j) {
      const double y = last * std::pow(1.0 + static_cast<double>(j) / s0, -beta);
      masses.push_back(y);
      tail_sum += y;
    }
    // Correct the integral estimate exactly; never let the tail rise above the last core entry.
    const double scale = tail_sum > 0.0 ? tail_target / tail_sum : 0.0;
    for (size_t j = static_cast<size_t>(s.core); j < masses.size(); ++j) masses[j] = std::min(masses[j] * scale, last);
  }
  std::sort(masses.begin(), masses.end(), [](double a, double b) { return a > b; });
  double sum = 0.0;
  for (const double m : masses) sum += m;
  for (double& m : masses) m *= s.total / sum;
  return masses;
}

}  // namespace sparsering::synth
