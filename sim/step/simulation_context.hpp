// The explicit state of the simulator: caches of kept patterns and work matrices, so that the
// tuner can re-simulate another ring order or hierarchy split of the same (layout, degree,
// granularity, block sizes) without counting work again. No global or static mutable state:
// two contexts, or two simulations in one context, give identical results. Thread-safe (the
// caches are behind a mutex; counting happens outside it). Tested in tests/sim/simulation_test.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/token_layout.hpp"
#include "sim/work/pattern_set.hpp"
#include "sim/work/work_set.hpp"

namespace sparsering {

class SimulationContext {
 public:
  SimulationContext() = default;
  SimulationContext(const SimulationContext&) = delete;
  SimulationContext& operator=(const SimulationContext&) = delete;

  /// The pattern set cached under `key`, made by `make` on a miss. An empty key is never cached.
  std::shared_ptr<const PatternSet> patterns(const std::string& key, const std::function<PatternSet()>& make);

  /// The work set of `patterns` (cached under `pattern_key`) for a layout and block shape, head
  /// groups and micro batch; counted on a miss. An empty pattern key is never cached.
  std::shared_ptr<const WorkSet> work(const std::string& pattern_key, const PatternSet& patterns,
                                      const TokenLayout& layout, int64_t block_q, int64_t block_k, int64_t head_groups,
                                      int64_t micro_batch);
  /// The same, counting a miss on up to `threads` threads (>= 1; the result does not depend on it).
  std::shared_ptr<const WorkSet> work(const std::string& pattern_key, const PatternSet& patterns,
                                      const TokenLayout& layout, int64_t block_q, int64_t block_k, int64_t head_groups,
                                      int64_t micro_batch, int threads);

  int64_t work_cache_hits() const;
  int64_t work_cache_misses() const;
  /// Drops every cached entry.
  void clear();

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const PatternSet>> patterns_;
  std::map<std::string, std::shared_ptr<const WorkSet>> work_;
  int64_t hits_ = 0;
  int64_t misses_ = 0;
};

}  // namespace sparsering
