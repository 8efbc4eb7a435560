// Token-level brute force of the sparse kernel's work, straight from the contract in
// kernels/sparse_index.hpp: the oracle of the analytic work counter (tests/sim/work_counter_test.cpp).
// Cost O(N^2): small sizes only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/token_layout.hpp"
#include "sim/work/kept_pattern.hpp"
#include "sim/work/work_counts.hpp"

namespace sparsering::testing {

/// One head's work. `column_item` is BlockGeometry::column_item. If `key_tiles` is given it
/// receives, per cell (q_rank x W + kv_rank), how many query blocks list each key block (added to
/// what it holds, so the heads of a GQA group can share it); key_lists and longest_key_list are
/// this head's own counts.
inline WorkMatrix brute_force_work(const TokenLayout& layout, int64_t block_q, int64_t block_k,
                                   const KeptPattern& pattern, int64_t column_item = 64,
                                   std::vector<std::vector<int64_t>>* key_tiles = nullptr) {
  const int64_t n = layout.seq_len_tokens();
  const int64_t len = layout.local_len();
  std::vector<char> is_slash(static_cast<size_t>(n), 0);
  std::vector<char> is_vertical(static_cast<size_t>(n), 0);
  is_slash[0] = 1;
  for (const int64_t d : pattern.slash_offsets) is_slash[static_cast<size_t>(d)] = 1;
  for (const int64_t v : pattern.vertical_positions) is_vertical[static_cast<size_t>(v)] = 1;
  const int64_t q_blocks = (len + block_q - 1) / block_q;
  const int64_t k_blocks = (len + block_k - 1) / block_k;
  WorkMatrix out(layout.ranks());
  std::vector<char> present(static_cast<size_t>(k_blocks));
  std::vector<int64_t> key_listed(static_cast<size_t>(k_blocks));  // tiles per key block
  if (key_tiles != nullptr && key_tiles->empty()) {
    key_tiles->assign(static_cast<size_t>(layout.ranks()) * static_cast<size_t>(layout.ranks()),
                      std::vector<int64_t>(static_cast<size_t>(k_blocks), 0));
  }
  for (int32_t r = 0; r < layout.ranks(); ++r) {
    for (int32_t src = 0; src < layout.ranks(); ++src) {
      WorkCounts& cell = out.at(r, src);
      std::fill(key_listed.begin(), key_listed.end(), 0);
      for (int64_t i = 0; i < q_blocks; ++i) {
        const int64_t q_end = std::min(len, (i + 1) * block_q);
        bool any_tile = false;
        for (int64_t j = 0; j < k_blocks; ++j) {
          const int64_t k_end = std::min(len, (j + 1) * block_k);
          bool hit = false;
          bool unmasked = true;
          for (int64_t q = i * block_q; q < q_end; ++q) {
            for (int64_t k = j * block_k; k < k_end; ++k) {
              const int64_t d = layout.global_token(r, q) - layout.global_token(src, k);
              if (d < 0) unmasked = false;
              if (d >= 0 && is_slash[static_cast<size_t>(d)]) hit = true;
            }
          }
          present[static_cast<size_t>(j)] = hit ? 1 : 0;
          if (hit) ++key_listed[static_cast<size_t>(j)];
          cell.tiles += hit ? 1 : 0;
          any_tile = any_tile || hit;
          cell.masked_tiles += (hit && !unmasked) ? 1 : 0;
        }
        int64_t columns = 0;
        for (int64_t k = 0; k < len; ++k) {
          const int64_t g = layout.global_token(src, k);
          if (!is_vertical[static_cast<size_t>(g)] || present[static_cast<size_t>(k / block_k)]) continue;
          bool visible = false;
          for (int64_t q = i * block_q; q < q_end; ++q) visible = visible || layout.global_token(r, q) >= g;
          columns += visible ? 1 : 0;
        }
        cell.columns += columns;
        cell.column_chunks += (columns + block_k - 1) / block_k;
        cell.lists += (any_tile || columns > 0) ? 1 : 0;
        cell.column_lists += columns > 0 ? 1 : 0;
        cell.column_items += (columns + column_item - 1) / column_item;
      }
      for (int64_t j = 0; j < k_blocks; ++j) {
        const int64_t listed = key_listed[static_cast<size_t>(j)];
        cell.key_lists += listed > 0 ? 1 : 0;
        cell.longest_key_list = std::max(cell.longest_key_list, listed);
        if (key_tiles != nullptr) {
          (*key_tiles)[static_cast<size_t>(r) * static_cast<size_t>(layout.ranks()) + static_cast<size_t>(src)]
                      [static_cast<size_t>(j)] += listed;
        }
      }
    }
  }
  return out;
}

}  // namespace sparsering::testing
