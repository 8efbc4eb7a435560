// Synthetic kept patterns shaped like the published Qwen2.5-3B budgets (docs/algorithm.md section 2:
// 36 layers x 16 heads; (vertical, slash) budgets (1000, 6096) on 310 heads, (3500, 100) on 107,
// (30, 800) on 96, (100, 800) on 44, (500, 700) on 17), for the simulator benchmarks.
// Slashes: half the budget as the local window, the rest log-uniform over the sequence;
// verticals: 64 sink tokens, the rest uniform. Deterministic in the seed.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "sim/work/kept_pattern.hpp"

namespace sparsering::bench {

inline std::vector<KeptPattern> qwen25_3b_like_patterns(int64_t seq_len_tokens, int64_t layers, int64_t heads,
                                                         uint64_t seed) {
  struct Budget {
    int64_t vertical;
    int64_t slash;
    int64_t heads;
  };
  const Budget budgets[] = {{1000, 6096, 310}, {3500, 100, 107}, {30, 800, 96}, {100, 800, 44}, {500, 700, 19}};
  std::vector<Budget> per_head;
  for (const Budget& b : budgets) {
    for (int64_t k = 0; k < b.heads; ++k) per_head.push_back(b);
  }
  std::mt19937_64 rng(seed);
  std::shuffle(per_head.begin(), per_head.end(), rng);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int64_t> any(0, seq_len_tokens - 1);
  std::vector<KeptPattern> out;
  for (int64_t h = 0; h < layers * heads; ++h) {
    const Budget& b = per_head[static_cast<size_t>(h) % per_head.size()];
    KeptPattern p;
    const int64_t window = b.slash / 2;
    for (int64_t d = 0; d < window; ++d) p.slash_offsets.push_back(d);
    for (int64_t k = window; k < b.slash; ++k) {
      p.slash_offsets.push_back(static_cast<int64_t>(std::exp(unit(rng) * std::log(static_cast<double>(seq_len_tokens)))) % seq_len_tokens);
    }
    for (int64_t v = 0; v < std::min<int64_t>(64, b.vertical); ++v) p.vertical_positions.push_back(v);
    for (int64_t k = 64; k < b.vertical; ++k) p.vertical_positions.push_back(any(rng));
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace sparsering::bench
