#include "sim/work/pattern_set.hpp"

#include "common/error.hpp"

namespace sparsering {

PatternSet select_patterns(const Trace& trace, int64_t sample, const RecallSettings& settings) {
  require(sample >= 0 && sample < trace.samples, "trace sample ", sample, " does not exist (the trace has ",
          trace.samples, " samples)");
  validate_recall_settings(settings);
  PatternSet set;
  set.layers = trace.layers;
  set.heads = trace.heads;
  set.seq_len_tokens = trace.sample_seq_len[static_cast<size_t>(sample)];
  set.patterns.reserve(static_cast<size_t>(trace.layers * trace.heads));
  for (int64_t l = 0; l < trace.layers; ++l) {
    for (int64_t h = 0; h < trace.heads; ++h) {
      const HeadSelection kept = select_head(trace, sample, l, h, settings);
      set.patterns.push_back(pattern_from_slots(kept.slash_offsets, kept.vertical_keys));
    }
  }
  return set;
}

PatternSet dense_patterns(int64_t layers, int64_t heads, int64_t seq_len_tokens) {
  require(layers >= 1 && heads >= 1 && seq_len_tokens >= 1, "dense patterns need layers, heads and tokens >= 1");
  PatternSet set;
  set.layers = layers;
  set.heads = heads;
  set.seq_len_tokens = seq_len_tokens;
  set.dense = true;
  return set;
}

}  // namespace sparsering
