// Recall selection (semantics in recall.hpp).
#include "traces/recall.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"

namespace sparsering {
namespace {

constexpr double kRelativeSlack = 1e-6;

int64_t real_entries(std::span<const int32_t> index) {
  // Pads (-1) only trail the real entries (validate_trace), so the first pad ends the list.
  const auto first_pad = std::find(index.begin(), index.end(), -1);
  return static_cast<int64_t>(first_pad - index.begin());
}

}  // namespace

void validate_recall_settings(const RecallSettings& settings) {
  require(std::isfinite(settings.recall) && settings.recall > 0.0 && settings.recall <= 1.0,
          "recall must be in (0, 1], got ", settings.recall);
  require(settings.max_verticals >= 0, "max_verticals must be >= 0, got ", settings.max_verticals);
  require(settings.max_slashes >= 0, "max_slashes must be >= 0, got ", settings.max_slashes);
  require(settings.min_entries >= 0, "min_entries must be >= 0, got ", settings.min_entries);
}

int64_t recall_prefix_length(std::span<const float> mass, int64_t real_count, double recall, int64_t min_entries,
                             int64_t cap) {
  const auto n = std::clamp<int64_t>(real_count, 0, static_cast<int64_t>(mass.size()));
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += static_cast<double>(mass[static_cast<size_t>(i)]);
  int64_t kept = 0;
  if (total > 0.0) {
    const double goal = recall * total * (1.0 - kRelativeSlack);
    double sum = 0.0;
    while (kept < n && sum < goal) sum += static_cast<double>(mass[static_cast<size_t>(kept++)]);
  }
  kept = std::max(kept, min_entries);
  return std::min({kept, n, cap});
}

KeptCounts kept_counts(const Trace& trace, int64_t sample, int64_t layer, int64_t head,
                       const RecallSettings& settings) {
  KeptCounts counts;
  counts.verticals = recall_prefix_length(trace.vertical_masses(sample, layer, head),
                                          real_entries(trace.verticals(sample, layer, head)), settings.recall,
                                          settings.min_entries, settings.max_verticals);
  counts.slashes =
      recall_prefix_length(trace.slash_masses(sample, layer, head), real_entries(trace.slashes(sample, layer, head)),
                           settings.recall, settings.min_entries, settings.max_slashes);
  return counts;
}

HeadSelection select_head(const Trace& trace, int64_t sample, int64_t layer, int64_t head,
                          const RecallSettings& settings) {
  const KeptCounts counts = kept_counts(trace, sample, layer, head, settings);
  const auto verticals = trace.verticals(sample, layer, head);
  const auto slashes = trace.slashes(sample, layer, head);
  HeadSelection selection;
  selection.vertical_keys.assign(verticals.begin(), verticals.begin() + counts.verticals);
  selection.slash_offsets.assign(slashes.begin(), slashes.begin() + counts.slashes);
  return selection;
}

}  // namespace sparsering
