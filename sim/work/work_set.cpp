#include "sim/work/work_set.hpp"

#include "common/error.hpp"
#include "sim/work/work_counter.hpp"

namespace sparsering {

namespace {

void scale(WorkMatrix& m, int64_t factor) {
  for (int32_t q = 0; q < m.ranks(); ++q) {
    for (int32_t kv = 0; kv < m.ranks(); ++kv) {
      WorkCounts& c = m.at(q, kv);
      c.tiles *= factor;
      c.masked_tiles *= factor;
      c.columns *= factor;
      c.column_chunks *= factor;
    }
  }
}

}  // namespace

WorkSet count_work_set(const BlockGeometry& geometry, const PatternSet& patterns, int64_t head_groups,
                       int64_t micro_batch) {
  require(head_groups >= 1 && patterns.heads % head_groups == 0, "head groups (", head_groups,
          ") must divide the query heads (", patterns.heads, ")");
  require(micro_batch >= 1, "micro batch must be >= 1 sequence, got ", micro_batch);
  require(patterns.seq_len_tokens == geometry.layout.seq_len_tokens, "the patterns are for ", patterns.seq_len_tokens,
          " tokens but the layout has ", geometry.layout.seq_len_tokens);
  WorkSet set;
  set.layers = patterns.layers;
  set.head_groups = head_groups;
  set.heads_per_group = patterns.heads / head_groups;
  set.micro_batch = micro_batch;
  WorkCounter counter(geometry);
  if (patterns.dense) {
    KeptPattern all;
    all.slash_offsets.resize(static_cast<size_t>(patterns.seq_len_tokens));
    for (int64_t d = 0; d < patterns.seq_len_tokens; ++d) all.slash_offsets[static_cast<size_t>(d)] = d;
    WorkMatrix one;
    counter.count_head(all, one);
    scale(one, set.heads_per_group * micro_batch);
    set.matrices.assign(static_cast<size_t>(set.layers * head_groups), one);
    return set;
  }
  set.matrices.reserve(static_cast<size_t>(set.layers * head_groups));
  for (int64_t l = 0; l < set.layers; ++l) {
    for (int64_t g = 0; g < head_groups; ++g) {
      WorkMatrix sum(geometry.layout.ranks);
      for (int64_t h = g * set.heads_per_group; h < (g + 1) * set.heads_per_group; ++h) {
        counter.accumulate_head(patterns.at(l, h), sum);
      }
      if (micro_batch > 1) scale(sum, micro_batch);
      set.matrices.push_back(std::move(sum));
    }
  }
  return set;
}

}  // namespace sparsering
