// The kept patterns of every (layer, head) of one simulation: from a trace sample through recall
// selection (traces/recall.hpp), or dense (every causal pair, for dense ring attention on the same
// footing). Tested in tests/sim/work_set_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/work/kept_pattern.hpp"
#include "traces/recall.hpp"
#include "traces/trace.hpp"

namespace sparsering {

struct PatternSet {
  int64_t layers = 0;
  int64_t heads = 0;            ///< query heads
  int64_t seq_len_tokens = 0;
  bool dense = false;           ///< every offset kept; `patterns` is empty
  /// Query heads per K/V head (GQA; head h uses K/V head h / kv_group): how count_work_set groups
  /// heads for WorkCounts::key_lists and longest_key_list. 1 = every head its own group.
  int64_t kv_group = 1;
  std::vector<KeptPattern> patterns;  ///< (layers x heads), layer-major, when !dense

  const KeptPattern& at(int64_t layer, int64_t head) const {
    return patterns[static_cast<size_t>(layer * heads + head)];
  }
};

/// Kept sets of `sample` of a validated trace at the recall settings. Throws InputError naming
/// the sample when it does not exist.
PatternSet select_patterns(const Trace& trace, int64_t sample, const RecallSettings& settings);

/// Dense attention: every causal pair of every head.
PatternSet dense_patterns(int64_t layers, int64_t heads, int64_t seq_len_tokens);

}  // namespace sparsering
