// Statistical ties among ranked plans (docs/tuner.md section 4): plans whose predicted costs
// differ by less than the model's validated error are tied; within a group of tied plans the
// lower peak memory wins, then the simpler plan (fewer ring levels, fewer collectives per layer,
// no per-layer re-layout), then the lower cost and the enumeration index. Tested in
// tests/tuner_search/tie_groups_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sparsering {

/// What the tie-break reads of one plan.
struct TieEntry {
  double cost = 0.0;          ///< objective cost (lower is better)
  int64_t peak_bytes = 0;     ///< simulated peak memory per GPU
  int32_t ring_levels = 1;    ///< levels of its ring hierarchy
  int32_t collectives = 0;    ///< collectives per layer besides the ring (Ulysses, all-gather, ...)
  bool per_layer_shuffle = false;
  int64_t index = 0;          ///< enumeration index (the last key)
};

/// One plan's place after the tie-break.
struct TiePlace {
  size_t entry = 0;   ///< index into the input
  int32_t group = 0;  ///< tie group, 0 = the winner's
};

/// Groups `entries` (ascending by cost) into tie groups: a group starts at the cheapest plan not
/// yet grouped and holds every following plan whose cost is below (1 + band) times that plan's
/// (band >= 0; 0 groups only exact ties). Returns the plans group by group, each group ordered by
/// peak memory, simplicity, cost, index.
std::vector<TiePlace> order_with_ties(const std::vector<TieEntry>& entries, double band);

/// Why `chosen` comes before `other` of the same group, e.g. "lower peak memory (20.96 vs 26.53
/// GiB)", "fewer ring levels (1 vs 2)", or "lower predicted cost" / "enumeration order".
std::string tie_reason(const TieEntry& chosen, const TieEntry& other);

}  // namespace sparsering
