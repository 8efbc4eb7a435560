#include "sim/work/work_set.hpp"

#include <atomic>
#include <exception>
#include <algorithm>
#include <mutex>
#include <system_error>
#include <thread>

#include "common/error.hpp"
#include "sim/work/work_counter.hpp"

namespace sparsering {

namespace {

/// K/V heads met by the query heads [first, first + count) when kv_group consecutive heads share one.
int64_t dense_kv_heads(int64_t first, int64_t count, int64_t kv_group) {
  return (first + count - 1) / kv_group - first / kv_group + 1;
}

/// The most query heads of [first, first + count) that share one K/V head (kv_group consecutive
/// heads share one).
int64_t dense_heads_per_kv_head(int64_t first, int64_t count, int64_t kv_group) {
  int64_t most = 0;
  for (int64_t kv = first / kv_group; kv * kv_group < first + count; ++kv) {
    most = std::max(most, std::min(first + count, (kv + 1) * kv_group) - std::max(first, kv * kv_group));
  }
  return most;
}

void scale(WorkMatrix& m, int64_t factor) {
  for (int32_t q = 0; q < m.ranks(); ++q) {
    for (int32_t kv = 0; kv < m.ranks(); ++kv) m.at(q, kv) *= factor;
  }
}

}  // namespace

WorkSet count_work_set(const BlockGeometry& geometry, const PatternSet& patterns, int64_t head_groups,
                       int64_t micro_batch) {
  return count_work_set(geometry, patterns, head_groups, micro_batch, 1);
}

WorkSet count_work_set(const BlockGeometry& geometry, const PatternSet& patterns, int64_t head_groups,
                       int64_t micro_batch, int threads) {
  return count_work_set(geometry, patterns, head_groups, micro_batch, threads, patterns.kv_group);
}

WorkSet count_work_set(const BlockGeometry& geometry, const PatternSet& patterns, int64_t head_groups,
                       int64_t micro_batch, int threads, int64_t kv_group) {
  require(kv_group >= 1 && patterns.heads % kv_group == 0, "the GQA group (", kv_group,
          " query heads per K/V head) must divide the query heads (", patterns.heads, ")");
  require(threads >= 1, "work counting needs >= 1 thread, got ", threads);
  require(head_groups >= 1 && patterns.heads % head_groups == 0, "head groups (", head_groups,
          ") must divide the query heads (", patterns.heads, ")");
  require(micro_batch >= 1, "micro batch must be >= 1 sequence, got ", micro_batch);
  require(patterns.seq_len_tokens == geometry.layout.seq_len_tokens(), "the patterns are for ", patterns.seq_len_tokens,
          " tokens but the layout has ", geometry.layout.seq_len_tokens());
  WorkSet set;
  set.layers = patterns.layers;
  set.head_groups = head_groups;
  set.heads_per_group = patterns.heads / head_groups;
  set.micro_batch = micro_batch;
  if (patterns.dense) {
    WorkCounter counter(geometry);
    WorkMatrix one;
    counter.count_dense_head(one);
    // One head's key_lists and longest_key_list: every head of a K/V head lists the same blocks, so
    // a K/V head's segments hold its heads' tiles times their number, and the longest segment is
    // that of the K/V head with the most heads in the group (sequences are separate segments).
    WorkMatrix keys = one;
    scale(one, set.heads_per_group * micro_batch);
    set.matrices.reserve(static_cast<size_t>(set.layers * head_groups));
    for (int64_t l = 0; l < set.layers; ++l) {
      for (int64_t g = 0; g < head_groups; ++g) {
        WorkMatrix m = one;
        const int64_t kv_heads = dense_kv_heads(g * set.heads_per_group, set.heads_per_group, kv_group) * micro_batch;
        const int64_t heads_per_kv = dense_heads_per_kv_head(g * set.heads_per_group, set.heads_per_group, kv_group);
        for (int32_t q = 0; q < m.ranks(); ++q) {
          for (int32_t kv = 0; kv < m.ranks(); ++kv) {
            m.at(q, kv).key_lists = keys.at(q, kv).key_lists * kv_heads;
            m.at(q, kv).longest_key_list = keys.at(q, kv).longest_key_list * heads_per_kv;
          }
        }
        set.matrices.push_back(std::move(m));
      }
    }
    return set;
  }
  set.matrices.assign(static_cast<size_t>(set.layers * head_groups), WorkMatrix(geometry.layout.ranks()));
  // Layers are handed out one at a time; each matrix is written by exactly one thread.
  std::atomic<int64_t> next_layer{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const auto worker = [&] {
    try {
      WorkCounter counter(geometry);
      for (int64_t l = next_layer++; l < set.layers; l = next_layer++) {
        for (int64_t g = 0; g < head_groups; ++g) {
          count_head_group(counter, patterns, l, g * set.heads_per_group, set.heads_per_group, kv_group, micro_batch,
                           set.matrices[static_cast<size_t>(l * head_groups + g)]);
        }
      }
    } catch (...) {
      const std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next_layer = set.layers;  // the others stop after their current layer
    }
  };
  const int64_t extra = std::min<int64_t>(threads - 1, std::max<int64_t>(0, set.layers - 1));
  std::vector<std::thread> pool;
  try {
    for (int64_t t = 0; t < extra; ++t) pool.emplace_back(worker);
  } catch (const std::system_error&) {
    // No more threads to be had: the ones running (and this one) share the layers.
  }
  worker();
  for (std::thread& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
  return set;
}

void count_head_group(WorkCounter& counter, const PatternSet& patterns, int64_t layer, int64_t first_head,
                      int64_t heads, int64_t kv_group, int64_t micro_batch, WorkMatrix& sum) {
  // Heads of one K/V head are consecutive: one key group per K/V head met in the range.
  for (int64_t h = first_head; h < first_head + heads; ++h) {
    if (h == first_head || h % kv_group == 0) counter.begin_key_group();
    counter.accumulate_group_head(patterns.at(layer, h), sum);
    if (h + 1 == first_head + heads || (h + 1) % kv_group == 0) counter.end_key_group(sum);
  }
  if (micro_batch > 1) scale(sum, micro_batch);
}

}  // namespace sparsering
