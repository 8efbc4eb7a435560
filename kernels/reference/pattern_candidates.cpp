#include "kernels/reference/pattern_candidates.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.hpp"

namespace sparsering {
namespace {

// Top `slots` positions of `mass` by (mass descending, position ascending), zero masses left out,
// written as (position, share) with -1 / 0 pads.
void top_candidates(std::span<const float> mass, int64_t slots, const char* what, std::vector<int32_t>& positions,
                    std::vector<float>& shares) {
  require(slots >= 0, what, " slots must be >= 0, got ", slots);
  require(mass.size() < static_cast<size_t>(std::numeric_limits<int32_t>::max()), what,
          " masses cover more than 2^31 - 1 positions (", mass.size(), ")");
  double total = 0.0;
  std::vector<int32_t> order;
  for (size_t n = 0; n < mass.size(); ++n) {
    require(std::isfinite(mass[n]) && mass[n] >= 0.0f, what, " mass at ", n, " = ", mass[n],
            " is negative or not finite");
    total += static_cast<double>(mass[n]);
    if (mass[n] > 0.0f) order.push_back(static_cast<int32_t>(n));
  }
  const auto kept = std::min(order.size(), static_cast<size_t>(slots));
  auto heavier = [&mass](int32_t a, int32_t b) {
    const float ma = mass[static_cast<size_t>(a)];
    const float mb = mass[static_cast<size_t>(b)];
    return ma != mb ? ma > mb : a < b;
  };
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept), order.end(), heavier);
  positions.assign(static_cast<size_t>(slots), -1);
  shares.assign(static_cast<size_t>(slots), 0.0f);
  for (size_t n = 0; n < kept; ++n) {
    positions[n] = order[n];
    // Division and rounding are monotone, so shares stay sorted like the masses.
    shares[n] = static_cast<float>(static_cast<double>(mass[static_cast<size_t>(order[n])]) / total);
  }
}

}  // namespace

PatternCandidates select_pattern_candidates(std::span<const float> vertical_mass_by_token,
                                            std::span<const float> slash_mass_by_offset, int64_t vertical_slots,
                                            int64_t slash_slots) {
  PatternCandidates candidates;
  top_candidates(vertical_mass_by_token, vertical_slots, "vertical", candidates.vertical_index,
                 candidates.vertical_mass);
  top_candidates(slash_mass_by_offset, slash_slots, "slash", candidates.slash_offset, candidates.slash_mass);
  return candidates;
}

std::vector<float> vertical_mass_by_token(const TokenLayout& layout, std::span<const std::span<const float>> per_rank) {
  require(per_rank.size() == static_cast<size_t>(layout.ranks()), "expected one vertical mass vector per rank (",
          layout.ranks(), "), got ", per_rank.size());
  const int64_t local = layout.local_len();
  std::vector<float> global(static_cast<size_t>(layout.seq_len_tokens()), 0.0f);
  for (int32_t r = 0; r < layout.ranks(); ++r) {
    const std::span<const float> masses = per_rank[static_cast<size_t>(r)];
    require(static_cast<int64_t>(masses.size()) == local, "vertical mass vector of rank ", r, " has ", masses.size(),
            " entries, expected the local length ", local);
    for (int64_t k = 0; k < local; ++k) {
      global[static_cast<size_t>(layout.global_token(r, k))] = masses[static_cast<size_t>(k)];
    }
  }
  return global;
}

}  // namespace sparsering
