// Parameter structs of the attention kernels. Each CUDA kernel and its plain C++ reference take
// the same struct, so a test runs both on the same problem (docs/kernels.md).
// Pointers are device pointers for the CUDA launchers and host pointers for the references.
// Tensors are contiguous, batch-major, head-major: Q (B, Hq, Sq, D), K and V (B, Hkv, Skv, D).
// Query head h reads K/V head h / (Hq / Hkv) (GQA; Hq must be a multiple of Hkv).
#pragma once

#include <cstdint>

#include "core/token_layout.hpp"

namespace sparsering {

/// bf16 values as stored in memory (the upper 16 bits of an IEEE float32).
using bf16_bits = uint16_t;

struct AttentionShape {
  int32_t batch = 1;
  int32_t q_heads = 1;    ///< Hq
  int32_t kv_heads = 1;   ///< Hkv, divides Hq
  int32_t head_dim = 128; ///< D: 64 or 128
  int64_t q_len = 0;      ///< Sq: local query tokens
  int64_t kv_len = 0;     ///< Skv: tokens of the K/V chunk held at this step
};

/// Where the queries and the held keys sit in the global sequence, for the causal mask:
/// global(q) = layout.global_token(q_rank, q), global(k) = layout.global_token(kv_rank, k).
struct RingPosition {
  TokenLayout layout;
  int32_t q_rank = 0;   ///< ring rank owning the queries
  int32_t kv_rank = 0;  ///< ring rank that owns the K/V chunk held at this step
};

/// Device or host view of a SparseIndex (same arrays, raw pointers).
struct SparseIndexView {
  int32_t rows = 0;
  int32_t block_q = 64;
  int32_t block_k = 64;
  int32_t q_blocks = 0;
  const int32_t* tile_offsets = nullptr;
  const int32_t* tile_block = nullptr;
  const uint8_t* tile_masked = nullptr;
  const int32_t* column_offsets = nullptr;
  const int32_t* column_index = nullptr;
  /// An upper bound on the index's tiles (tile_offsets[rows * q_blocks]), known to the host: the
  /// size of tile_block. The backward sizes its transposed index by it, so it queues its work
  /// without waiting for the GPU. 0: not known; the backward then reads the tile count from the
  /// device, which synchronizes the stream once.
  int64_t max_tiles = 0;
};

/// Sparse attention forward for one ring step, merged into a running fp32 output:
///   (out, lse) <- merge((out, lse), attention over the index)
/// with lse = logaddexp(lse, lse_step) and out = out*e^(lse_old-lse) + out_step*e^(lse_step-lse).
/// Before the first step out = 0 and lse = -inf. A row with no computed pair this step leaves
/// (out, lse) unchanged.
struct SparseAttnFwdParams {
  AttentionShape shape;
  RingPosition position;
  SparseIndexView index;
  float softmax_scale = 0.0f;   ///< usually 1/sqrt(D)
  const bf16_bits* q = nullptr; ///< (B, Hq, Sq, D)
  const bf16_bits* k = nullptr; ///< (B, Hkv, Skv, D)
  const bf16_bits* v = nullptr; ///< (B, Hkv, Skv, D)
  float* out = nullptr;         ///< (B, Hq, Sq, D) running output, fp32
  float* lse = nullptr;         ///< (B, Hq, Sq) running natural-log sum of exp(scores), fp32
};

/// Sparse attention backward for one ring step over the same index, from the final forward
/// output and LSE. Gradients accumulate (+=) in fp32 so ring steps sum without bf16 rounding.
struct SparseAttnBwdParams {
  AttentionShape shape;
  RingPosition position;
  SparseIndexView index;
  float softmax_scale = 0.0f;
  const bf16_bits* q = nullptr;     ///< (B, Hq, Sq, D)
  const bf16_bits* k = nullptr;     ///< (B, Hkv, Skv, D)
  const bf16_bits* v = nullptr;     ///< (B, Hkv, Skv, D)
  const bf16_bits* dout = nullptr;  ///< (B, Hq, Sq, D) gradient of the final output
  const float* lse = nullptr;       ///< (B, Hq, Sq) final LSE from the forward pass
  const float* delta = nullptr;     ///< (B, Hq, Sq) rowsum(dout * out), computed once before the ring
  float* dq = nullptr;              ///< (B, Hq, Sq, D) += 
  float* dk = nullptr;              ///< (B, Hkv, Skv, D) += (summed over the query heads of a group)
  float* dv = nullptr;              ///< (B, Hkv, Skv, D) +=
};

/// Backward pre-pass, once before the backward ring: delta = rowsum(dout * out) per query row,
/// from the final forward output (fp32) and its gradient.
struct AttnBwdDeltaParams {
  AttentionShape shape;             ///< batch, q_heads, head_dim and q_len are used
  const bf16_bits* dout = nullptr;  ///< (B, Hq, Sq, D)
  const float* out = nullptr;       ///< (B, Hq, Sq, D) final forward output
  float* delta = nullptr;           ///< (B, Hq, Sq) written
};

/// Vertical-slash pattern estimation (docs/algorithm.md section 2) on one key shard. The last `last_q`
/// queries of the sequence (global positions N-last_q .. N-1) score this shard's keys; the causal
/// mask applies (key global position <= query global position). Two passes so shards combine:
///   pass 1 (row statistics): row_max, row_sum of exp(score - row_max) over this shard's keys
///     ((-inf, 0) for a query that sees no key of the shard);
///   combine the shards' statistics (max, then rescaled sums);
///   pass 2 (mass): with the combined statistics, each probability summed over the last_q
///     queries goes to vertical_mass[key] (written: each shard owns its keys) and to
///     slash_mass[query_global - key_global] (added: every shard contributes).
/// CPU reference: kernels/reference/estimate_pattern_ref.hpp.
struct EstimateParams {
  AttentionShape shape;           ///< q_len = last_q, kv_len = keys in this shard
  RingPosition position;          ///< layout and kv_rank give the keys' global positions
  float softmax_scale = 0.0f;
  const bf16_bits* q_last = nullptr; ///< (B, Hq, last_q, D) the last queries of the sequence
  const bf16_bits* k = nullptr;      ///< (B, Hkv, Skv, D) this shard's keys
  float* row_max = nullptr;          ///< (B, Hq, last_q) pass 1 writes, pass 2 reads (combined)
  float* row_sum = nullptr;          ///< (B, Hq, last_q) idem
  float* vertical_mass = nullptr;    ///< (B, Hq, Skv) pass 2 writes (per local key)
  float* slash_mass = nullptr;       ///< (B, Hq, N) pass 2 adds (per global offset 0..N-1)
};

}  // namespace sparsering
