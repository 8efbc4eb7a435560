// The transposed tile index the backward pass walks: for every (batch, KV head, key block) the
// (query head of the group, query block, masked) entries whose tile list holds that key block,
// sorted by (head, query block), and the order in which the backward's key-block pass takes the
// segments: longest first, so that the CTAs with the most work start in the first wave and a
// launch of few waves does not end on one heavy CTA (ties in segment order). Built on the GPU from
// the forward index by a counting sort (a CUB scan of per-(segment, list chunk) counts) and a CUB
// radix sort of the segment lengths, in stream-ordered scratch memory sized by the index's
// host-known tile bound, so building it never waits for the GPU. Deterministic.
// Tested in tests/kernels_gpu/sparse_index_transpose_test.cpp against a host transposition.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "kernels/attention_params.hpp"
#include "kernels/cuda/device_buffer.hpp"

namespace sparsering {

/// Device view of a transposed index. Segment s = (b * Hkv + hk) * key_blocks + j spans
/// entries [offsets[s], offsets[s+1]); entry code = (g * q_blocks + i) * 2 + masked, where query
/// head h = hk * group + g.
struct TransposedIndexView {
  int32_t segments = 0;
  int32_t key_blocks = 0;  ///< ceil(kv_len / block_k)
  int32_t group = 1;       ///< Hq / Hkv
  int32_t q_blocks = 0;
  const int32_t* offsets = nullptr;  ///< (segments + 1)
  const int32_t* entries = nullptr;  ///< (tiles)
  /// (segments) every segment once, by descending entry count, equal counts in ascending segment
  /// order: the key-block pass's CTA c works on segment order[c] (longest-processing-time first).
  const int32_t* order = nullptr;
};

/// A transposed index and the stream-ordered memory holding it (freed on `stream` when dropped).
struct TransposedIndex {
  TransposedIndexView view;
  std::unique_ptr<StreamBuffer> storage;
};

/// Queues the transposition of `index` (device view, for `shape`) on `stream` and returns it.
/// No host synchronization when index.max_tiles > 0 (tiles past that bound are left out); with
/// max_tiles = 0 it reads the tile count from the device first (one synchronization).
/// Preconditions: the index passed check_sparse_attention_problem for `shape`.
TransposedIndex launch_sparse_index_transpose(const SparseIndexView& index, const AttentionShape& shape,
                                              cudaStream_t stream);

}  // namespace sparsering
