// The keys one query computes against at one ring step, read from a SparseIndexView exactly as
// the contract in kernels/sparse_index.hpp states: every key of every listed tile (skipping keys
// later than the query in tiles flagged `masked`), then every listed vertical column the query
// may see. The forward and backward references both walk this, so they cover the same pairs.
// Exercised by tests/kernels/sparse_attn_fwd_ref_test.cpp and sparse_attn_bwd_ref_test.cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/error.hpp"
#include "kernels/attention_params.hpp"

namespace sparsering::reference {

class IndexedKeys {
 public:
  /// Precomputes the global positions of the local queries and keys. Preconditions: the shape,
  /// position and index passed check_ring_problem and check_index_view.
  IndexedKeys(const SparseIndexView& index, const AttentionShape& shape, const RingPosition& position)
      : index_(index), kv_len_(shape.kv_len) {
    q_global_.resize(static_cast<size_t>(shape.q_len));
    key_global_.resize(static_cast<size_t>(shape.kv_len));
    for (int64_t q = 0; q < shape.q_len; ++q) {
      q_global_[static_cast<size_t>(q)] = position.layout.global_token(position.q_rank, q);
    }
    for (int64_t k = 0; k < shape.kv_len; ++k) {
      key_global_[static_cast<size_t>(k)] = position.layout.global_token(position.kv_rank, k);
    }
  }

  /// Calls visit(k) for every local key k that local query q of index row `row` computes against,
  /// tiles first (ascending), then columns (ascending). Throws InputError on an index entry out
  /// of range.
  template <typename Visit>
  void for_each_key(int32_t row, int64_t q, Visit&& visit) const {
    const int64_t list = int64_t{row} * index_.q_blocks + q / index_.block_q;
    const int64_t q_global = q_global_[static_cast<size_t>(q)];
    const int64_t kv_blocks = (kv_len_ + index_.block_k - 1) / index_.block_k;
    const int32_t tile_begin = index_.tile_offsets[list];
    const int32_t tile_end = index_.tile_offsets[list + 1];
    require(0 <= tile_begin && tile_begin <= tile_end, "index.tile_offsets of list ", list, " = [", tile_begin, ", ",
            tile_end, ") is not a valid range");
    require(tile_begin == tile_end || (index_.tile_block != nullptr && index_.tile_masked != nullptr),
            "index.tile_block / tile_masked are null but list ", list, " has tiles");
    for (int32_t t = tile_begin; t < tile_end; ++t) {
      const int64_t j = index_.tile_block[t];
      require(j >= 0 && j < kv_blocks, "index.tile_block[", t, "] = ", j, " is outside [0, ", kv_blocks, ")");
      const bool masked = index_.tile_masked[t] != 0;
      const int64_t key_end = std::min((j + 1) * index_.block_k, kv_len_);
      for (int64_t k = j * index_.block_k; k < key_end; ++k) {
        if (masked && key_global_[static_cast<size_t>(k)] > q_global) continue;
        visit(k);
      }
    }
    const int32_t column_begin = index_.column_offsets[list];
    const int32_t column_end = index_.column_offsets[list + 1];
    require(0 <= column_begin && column_begin <= column_end, "index.column_offsets of list ", list, " = [",
            column_begin, ", ", column_end, ") is not a valid range");
    require(column_begin == column_end || index_.column_index != nullptr, "index.column_index is null but list ", list,
            " has columns");
    for (int32_t c = column_begin; c < column_end; ++c) {
      const int64_t k = index_.column_index[c];
      require(k >= 0 && k < kv_len_, "index.column_index[", c, "] = ", k, " is outside [0, ", kv_len_, ")");
      if (key_global_[static_cast<size_t>(k)] > q_global) continue;  // columns are always masked per query
      visit(k);
    }
  }

 private:
  SparseIndexView index_;
  int64_t kv_len_;
  std::vector<int64_t> q_global_;
  std::vector<int64_t> key_global_;
};

}  // namespace sparsering::reference
