// Tie groups and the tie-break (tuner/search/tie_groups.hpp). Tested in
// tests/tuner_search/tie_groups_test.cpp.
#include "tuner/search/tie_groups.hpp"

#include <algorithm>
#include <tuple>

#include "common/error.hpp"
#include "common/table.hpp"

namespace sparsering {

namespace {

auto preference(const TieEntry& e) {
  return std::make_tuple(e.peak_bytes, e.ring_levels, e.collectives, e.per_layer_shuffle, e.cost, e.index);
}

}  // namespace

std::vector<TiePlace> order_with_ties(const std::vector<TieEntry>& entries, double band) {
  require(band >= 0.0, "the tie band must be >= 0, got ", band);
  std::vector<TiePlace> out;
  size_t start = 0;
  int32_t group = 0;
  while (start < entries.size()) {
    // Costs are compared with the group's cheapest plan, so a group never drifts beyond the band.
    const double limit = entries[start].cost * (1.0 + band);
    size_t end = start + 1;
    while (end < entries.size() && (entries[end].cost < limit || entries[end].cost == entries[start].cost)) ++end;
    std::vector<size_t> members;
    for (size_t k = start; k < end; ++k) members.push_back(k);
    std::stable_sort(members.begin(), members.end(),
                     [&](size_t a, size_t b) { return preference(entries[a]) < preference(entries[b]); });
    for (const size_t k : members) out.push_back(TiePlace{k, group});
    start = end;
    ++group;
  }
  return out;
}

std::string tie_reason(const TieEntry& chosen, const TieEntry& other) {
  constexpr double kGiB = static_cast<double>(int64_t{1} << 30);
  if (chosen.peak_bytes != other.peak_bytes) {
    return str("lower peak memory (", fixed(static_cast<double>(chosen.peak_bytes) / kGiB, 2), " vs ",
               fixed(static_cast<double>(other.peak_bytes) / kGiB, 2), " GiB)");
  }
  if (chosen.ring_levels != other.ring_levels) {
    return str("fewer ring levels (", chosen.ring_levels, " vs ", other.ring_levels, ")");
  }
  if (chosen.collectives != other.collectives) {
    return str("fewer collectives per layer (", chosen.collectives, " vs ", other.collectives, ")");
  }
  if (chosen.per_layer_shuffle != other.per_layer_shuffle) return "no per-layer re-layout";
  if (chosen.cost != other.cost) return "lower predicted cost";
  return "enumeration order";
}

}  // namespace sparsering
