#include "kernels/reference/brute_force_mask.hpp"

#include <algorithm>
#include <limits>

#include "common/error.hpp"

namespace sparsering {
namespace {

// Global positions of the local queries and keys, and the kept sets as 0/1 tables over [0, N).
struct Enumeration {
  int64_t len = 0;
  int64_t q_blocks = 0;
  int64_t kv_blocks = 0;
  std::vector<int64_t> q_global;
  std::vector<int64_t> k_global;
  std::vector<uint8_t> kept_offset;  // (N) 1 if offset d is kept (d == 0 always)
  std::vector<uint8_t> kept_key;     // (N) 1 if global key g is a kept vertical

  Enumeration(const IndexGeometry& geometry, const RowPattern& row) {
    const TokenLayout& layout = geometry.position.layout;
    require(geometry.position.q_rank >= 0 && geometry.position.q_rank < layout.ranks() &&
                geometry.position.kv_rank >= 0 && geometry.position.kv_rank < layout.ranks(),
            "ranks (", geometry.position.q_rank, ", ", geometry.position.kv_rank, ") outside [0, ", layout.ranks(), ")");
    require(geometry.block_q >= 1 && geometry.block_k >= 1, "block sizes must be >= 1");
    const int64_t n = layout.seq_len_tokens();
    len = layout.local_len();
    q_blocks = (len + geometry.block_q - 1) / geometry.block_q;
    kv_blocks = (len + geometry.block_k - 1) / geometry.block_k;
    for (int64_t x = 0; x < len; ++x) {
      q_global.push_back(layout.global_token(geometry.position.q_rank, x));
      k_global.push_back(layout.global_token(geometry.position.kv_rank, x));
    }
    kept_offset.assign(static_cast<size_t>(n), 0);
    kept_key.assign(static_cast<size_t>(n), 0);
    kept_offset[0] = 1;
    for (const int64_t d : row.slash_offsets) {
      require(d >= 0 && d < n, "slash offset ", d, " outside [0, ", n, ")");
      kept_offset[static_cast<size_t>(d)] = 1;
    }
    for (const int64_t g : row.vertical_tokens) {
      require(g >= 0 && g < n, "vertical key ", g, " outside [0, ", n, ")");
      kept_key[static_cast<size_t>(g)] = 1;
    }
  }

  bool causal(int64_t q, int64_t k) const { return q_global[static_cast<size_t>(q)] >= k_global[static_cast<size_t>(k)]; }
  bool on_kept_slash(int64_t q, int64_t k) const {
    return causal(q, k) &&
           kept_offset[static_cast<size_t>(q_global[static_cast<size_t>(q)] - k_global[static_cast<size_t>(k)])] != 0;
  }
  bool kept_vertical(int64_t k) const { return kept_key[static_cast<size_t>(k_global[static_cast<size_t>(k)])] != 0; }

  // touched[i * kv_blocks + j] and masked[...] by enumerating every pair of every tile.
  void tiles(const IndexGeometry& geometry, std::vector<uint8_t>& touched, std::vector<uint8_t>& masked) const {
    touched.assign(static_cast<size_t>(q_blocks * kv_blocks), 0);
    masked.assign(static_cast<size_t>(q_blocks * kv_blocks), 0);
    for (int64_t q = 0; q < len; ++q) {
      for (int64_t k = 0; k < len; ++k) {
        const auto tile = static_cast<size_t>((q / geometry.block_q) * kv_blocks + k / geometry.block_k);
        if (on_kept_slash(q, k)) touched[tile] = 1;
        if (!causal(q, k)) masked[tile] = 1;
      }
    }
  }
};

int32_t to_offset(size_t size) {
  require(size <= static_cast<size_t>(std::numeric_limits<int32_t>::max()), "brute-force index too large");
  return static_cast<int32_t>(size);
}

}  // namespace

SparseIndex brute_force_sparse_index(const IndexGeometry& geometry, std::span<const RowPattern> rows) {
  SparseIndex index;
  index.rows = static_cast<int32_t>(rows.size());
  index.q_len = geometry.position.layout.local_len();
  index.kv_len = index.q_len;
  index.block_q = geometry.block_q;
  index.block_k = geometry.block_k;
  index.tile_offsets.push_back(0);
  index.column_offsets.push_back(0);
  std::vector<uint8_t> touched, masked;
  for (const RowPattern& row : rows) {
    const Enumeration e(geometry, row);
    index.q_blocks = static_cast<int32_t>(e.q_blocks);
    e.tiles(geometry, touched, masked);
    for (int64_t i = 0; i < e.q_blocks; ++i) {
      for (int64_t j = 0; j < e.kv_blocks; ++j) {
        const auto tile = static_cast<size_t>(i * e.kv_blocks + j);
        if (touched[tile] == 0) continue;
        index.tile_block.push_back(static_cast<int32_t>(j));
        index.tile_masked.push_back(masked[tile]);
      }
      index.tile_offsets.push_back(to_offset(index.tile_block.size()));
      const int64_t q_end = std::min((i + 1) * geometry.block_q, e.len);
      for (int64_t k = 0; k < e.len; ++k) {
        if (!e.kept_vertical(k) || touched[static_cast<size_t>(i * e.kv_blocks + k / geometry.block_k)] != 0) continue;
        bool seen = false;
        for (int64_t q = i * geometry.block_q; q < q_end && !seen; ++q) seen = e.causal(q, k);
        if (seen) index.column_index.push_back(static_cast<int32_t>(k));
      }
      index.column_offsets.push_back(to_offset(index.column_index.size()));
    }
  }
  if (rows.empty()) index.q_blocks = static_cast<int32_t>((index.q_len + geometry.block_q - 1) / geometry.block_q);
  return index;
}

std::vector<uint8_t> contract_pair_mask(const IndexGeometry& geometry, const RowPattern& row) {
  const Enumeration e(geometry, row);
  std::vector<uint8_t> touched, masked;
  e.tiles(geometry, touched, masked);
  std::vector<uint8_t> mask(static_cast<size_t>(e.len * e.len), 0);
  for (int64_t q = 0; q < e.len; ++q) {
    for (int64_t k = 0; k < e.len; ++k) {
      const auto tile = static_cast<size_t>((q / geometry.block_q) * e.kv_blocks + k / geometry.block_k);
      // A kept vertical key outside the row's tiles is a listed column whenever q itself sees it.
      if (e.causal(q, k) && (touched[tile] != 0 || e.kept_vertical(k))) mask[static_cast<size_t>(q * e.len + k)] = 1;
    }
  }
  return mask;
}

std::vector<uint8_t> index_pair_mask(const SparseIndex& index, const RingPosition& position, int32_t row) {
  validate_sparse_index(index);
  const TokenLayout& layout = position.layout;
  require(index.q_len == layout.local_len() && index.kv_len == layout.local_len(), "index lengths (", index.q_len,
          ", ", index.kv_len, ") differ from the layout's local length ", layout.local_len());
  require(row >= 0 && row < index.rows, "row ", row, " outside [0, ", index.rows, ")");
  const int64_t len = index.q_len;
  std::vector<uint8_t> mask(static_cast<size_t>(len * len), 0);
  auto mark = [&](int64_t q, int64_t k, bool check_causality) {
    if (!check_causality || layout.global_token(position.q_rank, q) >= layout.global_token(position.kv_rank, k)) {
      mask[static_cast<size_t>(q * len + k)] = 1;
    }
  };
  for (int64_t i = 0; i < index.q_blocks; ++i) {
    const auto list = static_cast<size_t>(int64_t{row} * index.q_blocks + i);
    const int64_t q_end = std::min((i + 1) * index.block_q, len);
    for (int64_t q = i * index.block_q; q < q_end; ++q) {
      for (int32_t t = index.tile_offsets[list]; t < index.tile_offsets[list + 1]; ++t) {
        const int64_t j = index.tile_block[static_cast<size_t>(t)];
        const bool masked = index.tile_masked[static_cast<size_t>(t)] != 0;  // unflagged tiles run unmasked
        for (int64_t k = j * index.block_k; k < std::min((j + 1) * index.block_k, len); ++k) mark(q, k, masked);
      }
      for (int32_t c = index.column_offsets[list]; c < index.column_offsets[list + 1]; ++c) {
        mark(q, index.column_index[static_cast<size_t>(c)], true);
      }
    }
  }
  return mask;
}

std::vector<uint8_t> pattern_pair_mask(const IndexGeometry& geometry, const RowPattern& row) {
  const Enumeration e(geometry, row);
  std::vector<uint8_t> mask(static_cast<size_t>(e.len * e.len), 0);
  for (int64_t q = 0; q < e.len; ++q) {
    for (int64_t k = 0; k < e.len; ++k) {
      if (e.on_kept_slash(q, k) || (e.causal(q, k) && e.kept_vertical(k))) mask[static_cast<size_t>(q * e.len + k)] = 1;
    }
  }
  return mask;
}

}  // namespace sparsering
