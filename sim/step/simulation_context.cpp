// Caches of the simulator (sim/step/simulation_context.hpp). Tested in tests/sim/simulation_test.cpp.
#include "sim/step/simulation_context.hpp"

#include "common/error.hpp"
#include "sim/work/block_geometry.hpp"

namespace sparsering {

std::shared_ptr<const PatternSet> SimulationContext::patterns(const std::string& key,
                                                              const std::function<PatternSet()>& make) {
  if (!key.empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = patterns_.find(key);
    if (it != patterns_.end()) return it->second;
  }
  auto made = std::make_shared<const PatternSet>(make());
  if (!key.empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    patterns_.emplace(key, made);
  }
  return made;
}

std::shared_ptr<const WorkSet> SimulationContext::work(const std::string& pattern_key, const PatternSet& patterns,
                                                       const TokenLayout& layout, int64_t block_q, int64_t block_k,
                                                       int64_t head_groups, int64_t micro_batch) {
  return work(pattern_key, patterns, layout, block_q, block_k, head_groups, micro_batch, 1);
}

std::shared_ptr<const WorkSet> SimulationContext::work(const std::string& pattern_key, const PatternSet& patterns,
                                                       const TokenLayout& layout, int64_t block_q, int64_t block_k,
                                                       int64_t head_groups, int64_t micro_batch, int threads) {
  const std::string key = work_key(pattern_key, layout, block_q, block_k, head_groups, micro_batch);
  if (!key.empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = work_.find(key);
    if (it != work_.end()) {
      ++hits_;
      return it->second;
    }
    ++misses_;
  }
  const BlockGeometry geometry = make_block_geometry(layout, block_q, block_k);
  auto made = std::make_shared<const WorkSet>(count_work_set(geometry, patterns, head_groups, micro_batch, threads));
  if (!key.empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    work_.emplace(key, made);
  }
  return made;
}

std::string SimulationContext::work_key(const std::string& pattern_key, const TokenLayout& layout, int64_t block_q,
                                        int64_t block_k, int64_t head_groups, int64_t micro_batch) {
  if (pattern_key.empty()) return {};
  return str(pattern_key, "|", to_string(layout.kind()), "|N=", layout.seq_len_tokens(), "|W=", layout.ranks(),
             "|G=", layout.granularity_tokens(), "|bq=", block_q, "|bk=", block_k, "|groups=", head_groups,
             "|batch=", micro_batch);
}

void SimulationContext::remember_work(const std::string& key, std::shared_ptr<const WorkSet> set) {
  if (key.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  work_[key] = std::move(set);
}

void SimulationContext::forget_work(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  work_.erase(key);
}

std::shared_ptr<const RingPassSummary> SimulationContext::ring_passes(const std::string& key) const {
  if (key.empty()) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = ring_passes_.find(key);
  if (it == ring_passes_.end()) return nullptr;
  ++ring_pass_hits_;
  return it->second;
}

void SimulationContext::remember_ring_passes(const std::string& key, std::shared_ptr<const RingPassSummary> summary) {
  if (key.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  ring_passes_.emplace(key, std::move(summary));
}

int64_t SimulationContext::work_cache_hits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return hits_;
}

int64_t SimulationContext::ring_pass_hits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ring_pass_hits_;
}

int64_t SimulationContext::work_cache_misses() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return misses_;
}

void SimulationContext::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  patterns_.clear();
  work_.clear();
  ring_passes_.clear();
}

}  // namespace sparsering
