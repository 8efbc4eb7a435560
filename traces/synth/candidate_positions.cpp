// Candidate position generators (see candidate_positions.hpp). Everything draws from the
// caller's SplitMix64 so a (seed, sample, layer, head) key reproduces the same positions.
#include "traces/synth/candidate_positions.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace sparsering::synth {
namespace {

constexpr int64_t kBitmapLimit = int64_t{1} << 26;  // bitmaps up to 8 MiB; hash sets beyond

// One bit per value of [0, size).
class Bitmap {
 public:
  explicit Bitmap(int64_t size) : words_(static_cast<size_t>((size + 63) / 64), 0) {}
  bool test(int64_t i) const { return (words_[static_cast<size_t>(i >> 6)] >> (i & 63)) & 1U; }
  void set(int64_t i) { words_[static_cast<size_t>(i >> 6)] |= uint64_t{1} << (i & 63); }

 private:
  std::vector<uint64_t> words_;
};

template <typename T>
void shuffle(SplitMix64& rng, std::vector<T>& values) {
  for (size_t i = values.size(); i > 1; --i) std::swap(values[i - 1], values[rng.below(i)]);
}

}  // namespace

std::vector<int32_t> sample_distinct(SplitMix64& rng, int64_t lo, int64_t hi, int64_t count,
                                     std::span<const int32_t> excluded_sorted) {
  std::vector<int32_t> out;
  if (count <= 0) return out;
  const int64_t range = hi - lo;
  auto excluded = [&](int64_t v) {
    return std::binary_search(excluded_sorted.begin(), excluded_sorted.end(), static_cast<int32_t>(v));
  };
  if (count * 3 >= range) {
    // Dense: enumerate what is allowed and take a random subset.
    out.reserve(static_cast<size_t>(range));
    for (int64_t v = lo; v < hi; ++v) {
      if (!excluded(v)) out.push_back(static_cast<int32_t>(v));
    }
    for (int64_t i = 0; i < count && i < static_cast<int64_t>(out.size()); ++i) {
      const auto j = static_cast<size_t>(i) + rng.below(out.size() - static_cast<size_t>(i));
      std::swap(out[static_cast<size_t>(i)], out[j]);
    }
    out.resize(static_cast<size_t>(std::min<int64_t>(count, static_cast<int64_t>(out.size()))));
    return out;
  }
  // Sparse (count < range / 3): rejection sampling; each draw is accepted with probability > 1/2.
  out.reserve(static_cast<size_t>(count));
  if (range <= kBitmapLimit) {
    Bitmap taken(range);
    for (const int32_t v : excluded_sorted) {
      if (v >= lo && v < hi) taken.set(v - lo);
    }
    while (static_cast<int64_t>(out.size()) < count) {
      const auto v = static_cast<int64_t>(rng.below(static_cast<uint64_t>(range)));
      if (!taken.test(v)) {
        taken.set(v);
        out.push_back(static_cast<int32_t>(lo + v));
      }
    }
    return out;
  }
  std::unordered_set<int32_t> taken(excluded_sorted.begin(), excluded_sorted.end());
  while (static_cast<int64_t>(out.size()) < count) {
    const auto v = static_cast<int32_t>(lo + static_cast<int64_t>(rng.below(static_cast<uint64_t>(range))));
    if (taken.insert(v).second) out.push_back(v);
  }
  return out;
}

std::vector<int64_t> document_starts(SplitMix64& rng, int64_t seq_len, int64_t min_doc_tokens, int64_t max_doc_tokens) {
  std::vector<int64_t> starts = {0};
  int64_t position = 0;
  while (true) {
    position +=
        static_cast<int64_t>(rng.log_uniform(static_cast<double>(min_doc_tokens), static_cast<double>(max_doc_tokens)));
    if (position >= seq_len) break;
    starts.push_back(position);
  }
  return starts;
}

std::vector<int32_t> heavy_key_pool(SplitMix64& rng, int64_t seq_len, int64_t size,
                                    std::span<const int64_t> doc_starts) {
  // Document-start tokens (the start and the two after it) make up at most a quarter of the pool.
  std::vector<int32_t> starts;
  for (const int64_t start : doc_starts) {
    for (int64_t d = 0; d < 3; ++d) {
      if (start + d >= 1 && start + d < seq_len) starts.push_back(static_cast<int32_t>(start + d));
    }
  }
  shuffle(rng, starts);
  starts.resize(std::min(starts.size(), static_cast<size_t>(size / 4)));
  std::sort(starts.begin(), starts.end());
  const auto rest = sample_distinct(rng, 1, seq_len, size - static_cast<int64_t>(starts.size()), starts);
  // Heaviness order: document starts draw keys in [0, 0.3), the others in [0, 1).
  std::vector<std::pair<double, int32_t>> keyed;
  keyed.reserve(static_cast<size_t>(size));
  for (const int32_t p : starts) keyed.emplace_back(0.3 * rng.uniform(), p);
  for (const int32_t p : rest) keyed.emplace_back(rng.uniform(), p);
  std::sort(keyed.begin(), keyed.end());
  std::vector<int32_t> pool;
  pool.reserve(keyed.size());
  for (const auto& [key, p] : keyed) pool.push_back(p);
  return pool;
}

std::vector<int32_t> head_heavy_keys(SplitMix64& rng, std::span<const int32_t> pool, int64_t first_allowed,
                                     int64_t count, double skip) {
  std::vector<int32_t> keys;
  keys.reserve(static_cast<size_t>(count));
  std::vector<int32_t> skipped;
  for (const int32_t p : pool) {
    if (static_cast<int64_t>(keys.size()) >= count) break;
    if (p < first_allowed) continue;
    if (rng.uniform() < skip) {
      skipped.push_back(p);
    } else {
      keys.push_back(p);
    }
  }
  for (size_t i = 0; i < skipped.size() && static_cast<int64_t>(keys.size()) < count; ++i) keys.push_back(skipped[i]);
  // Local reordering: neighbours swap with probability 1/4.
  for (size_t i = 1; i < keys.size(); ++i) {
    if (rng.below(4) == 0) std::swap(keys[i - 1], keys[i]);
  }
  return keys;
}

std::vector<int32_t> slash_core(int64_t seq_len, int64_t window, int64_t count,
                                const std::function<DiagonalCluster()>& next_cluster) {
  std::vector<std::pair<double, int32_t>> scored;  // (score, offset)
  scored.reserve(static_cast<size_t>(count));
  const double tau = std::max(1.0, static_cast<double>(window) / 4.0);
  scored.emplace_back(HUGE_VAL, 0);
  for (int64_t d = 1; d < window; ++d)
    scored.emplace_back(1.0 / (1.0 + static_cast<double>(d) / tau), static_cast<int32_t>(d));
  std::unordered_map<int32_t, size_t> distant;  // offset -> index in scored
  int64_t fruitless = 0;
  while (static_cast<int64_t>(scored.size()) < count && fruitless < 64) {
    const DiagonalCluster c = next_cluster();
    const int64_t first = c.center - c.width / 2;
    bool added = false;
    for (int64_t d = std::max(first, window); d < std::min(first + c.width, seq_len); ++d) {
      if (static_cast<int64_t>(scored.size()) >= count) break;
      const double score =
          c.weight * (1.0 - static_cast<double>(std::llabs(d - c.center)) / static_cast<double>(c.width + 2));
      const auto [it, inserted] = distant.emplace(static_cast<int32_t>(d), scored.size());
      if (inserted) {
        scored.emplace_back(score, static_cast<int32_t>(d));
        added = true;
      } else {
        scored[it->second].first = std::max(scored[it->second].first, score);
      }
    }
    fruitless = added ? 0 : fruitless + 1;
  }
  // The range is (nearly) full: fill in increasing offset order with fading scores.
  for (int64_t d = window; d < seq_len && static_cast<int64_t>(scored.size()) < count; ++d) {
    if (distant.count(static_cast<int32_t>(d)) == 0)
      scored.emplace_back(1e-9 / static_cast<double>(d), static_cast<int32_t>(d));
  }
  std::sort(scored.begin(), scored.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  std::vector<int32_t> offsets;
  offsets.reserve(scored.size());
  for (const auto& [score, d] : scored) offsets.push_back(d);
  return offsets;
}

}  // namespace sparsering::synth
