// The explicit state of the simulator: caches of kept patterns and work matrices, so that the
// tuner can re-simulate another ring order or hierarchy split of the same (layout, degree,
// granularity, block sizes) without counting work again, and of ring-pass summaries, so that
// plans differing only in what follows the ring passes (recomputation, ZeRO stage, layout
// shuffle), or in ring orders whose links time alike, do not simulate the rings again. No global
// or static mutable state: two contexts, or two simulations in one context, give identical
// results. Thread-safe (the caches are behind a mutex; counting happens outside it). Tested in
// tests/sim/simulation_test.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/token_layout.hpp"
#include "sim/core/sim_time.hpp"
#include "sim/work/pattern_set.hpp"
#include "sim/work/work_set.hpp"

namespace sparsering {

/// What the simulator keeps of the ring passes of a whole model when it does not keep their
/// records: per layer the slowest ring's times, the busiest rank's kernel time and the worst
/// ring's figures, per ring class the
/// forward kernel time of every position and the exposed steps, and the sparse index bytes.
struct RingPassSummary {
  struct Layer {
    SimNs attention_fwd_ns = 0;
    SimNs attention_bwd_ns = 0;
    SimNs busiest_kernel_fwd_ns = 0;
    SimNs busiest_kernel_bwd_ns = 0;
    double worker_imbalance = 1.0;
    double step_imbalance = 1.0;
    double exposed_share = 0.0;
    double backward_exposed_share = 0.0;
  };
  std::vector<Layer> layers;
  std::vector<std::vector<SimNs>> per_rank_fwd_ns;  ///< [class][position], all layers
  std::vector<int64_t> exposed_steps;               ///< per class, all layers
  int64_t index_bytes = 0;                          ///< busiest rank, all layers
  std::vector<int64_t> links;                       ///< the link signature the passes were simulated with
};

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

  /// The key under which work() caches a work set (empty for an empty pattern key).
  static std::string work_key(const std::string& pattern_key, const TokenLayout& layout, int64_t block_q, int64_t block_k,
                              int64_t head_groups, int64_t micro_batch);
  /// Places a work set counted elsewhere under `key` (what count_work_set returns for that key's
  /// inputs), so that work() finds it instead of counting. An empty key is never cached.
  void remember_work(const std::string& key, std::shared_ptr<const WorkSet> set);
  /// Drops the work set cached under `key`, if any (a later work() counts it again).
  void forget_work(const std::string& key);

  /// The ring-pass summary cached under `key` (empty = not cached, or an empty key).
  std::shared_ptr<const RingPassSummary> ring_passes(const std::string& key) const;
  /// Caches `summary` under `key` (an empty key is never cached).
  void remember_ring_passes(const std::string& key, std::shared_ptr<const RingPassSummary> summary);

  int64_t work_cache_hits() const;
  int64_t work_cache_misses() const;
  /// Ring-pass summaries found by ring_passes().
  int64_t ring_pass_hits() const;
  /// Drops every cached entry.
  void clear();

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const PatternSet>> patterns_;
  std::map<std::string, std::shared_ptr<const WorkSet>> work_;
  std::map<std::string, std::shared_ptr<const RingPassSummary>> ring_passes_;
  int64_t hits_ = 0;
  int64_t misses_ = 0;
  mutable int64_t ring_pass_hits_ = 0;
};

}  // namespace sparsering
