// Implementation of the kernels' can_implement checks (see attention_checks.hpp). Plain host
// code; compiled by nvcc only because it lives beside the kernels it guards.
#include "kernels/cuda/attention_checks.hpp"

#include <cmath>
#include <cstdint>

#include "common/error.hpp"

namespace sparsering {

void check_sparse_attention_problem(const AttentionShape& shape, const RingPosition& position,
                                    const SparseIndexView& index, float softmax_scale) {
  require(shape.batch >= 1, "shape.batch must be >= 1, got ", shape.batch);
  require(shape.q_heads >= 1, "shape.q_heads must be >= 1, got ", shape.q_heads);
  require(shape.kv_heads >= 1 && shape.q_heads % shape.kv_heads == 0, "shape.kv_heads must divide shape.q_heads (",
          shape.q_heads, "), got ", shape.kv_heads);
  require(shape.head_dim == 64 || shape.head_dim == 128, "shape.head_dim must be 64 or 128 for the CUDA kernels, got ",
          shape.head_dim);
  require(shape.q_len >= 0 && shape.kv_len >= 0, "shape.q_len and shape.kv_len must be >= 0, got ", shape.q_len,
          " and ", shape.kv_len);
  require(shape.kv_len < (int64_t{1} << 31), "shape.kv_len must be < 2^31 (int32 column indices), got ", shape.kv_len);
  require(index.block_q >= 64 && index.block_q % 64 == 0, "index.block_q must be a positive multiple of 64, got ",
          index.block_q);
  require(index.block_k >= 64 && index.block_k % 64 == 0, "index.block_k must be a positive multiple of 64, got ",
          index.block_k);
  require(int64_t{index.rows} == int64_t{shape.batch} * shape.q_heads, "index.rows (", index.rows,
          ") must equal batch x q_heads (", int64_t{shape.batch} * shape.q_heads, ")");
  const int64_t q_blocks = (shape.q_len + index.block_q - 1) / index.block_q;
  require(index.q_blocks == q_blocks, "index.q_blocks (", index.q_blocks, ") must equal ceil(q_len / block_q) = ",
          q_blocks);
  require(q_blocks * (index.block_q / 64) <= 65535, "q_len ", shape.q_len, " needs more than 65535 64-row query tiles");
  require(index.rows <= 0 || (index.tile_offsets != nullptr && index.column_offsets != nullptr),
          "index.tile_offsets and index.column_offsets must be set");
  const TokenLayout& layout = position.layout;
  require(layout.ranks() >= 1 && layout.seq_len_tokens() > 0, "position.layout must be a valid layout (ranks ",
          layout.ranks(), ", seq_len_tokens ", layout.seq_len_tokens(), ")");
  require(layout.seq_len_tokens() < (int64_t{1} << 31), "position.layout.seq_len_tokens must be < 2^31 (int32 global ",
          "positions in the kernels), got ", layout.seq_len_tokens());
  require(position.q_rank >= 0 && position.q_rank < layout.ranks(), "position.q_rank must be in [0, ", layout.ranks(),
          "), got ", position.q_rank);
  require(position.kv_rank >= 0 && position.kv_rank < layout.ranks(), "position.kv_rank must be in [0, ", layout.ranks(),
          "), got ", position.kv_rank);
  require(shape.q_len <= layout.local_len() && shape.kv_len <= layout.local_len(), "q_len (", shape.q_len,
          ") and kv_len (", shape.kv_len, ") must not exceed the layout's local length (", layout.local_len(), ")");
  require(std::isfinite(softmax_scale) && softmax_scale > 0.0f, "softmax_scale must be finite and > 0, got ",
          softmax_scale);
}

void check_device_pointer(const void* pointer, size_t alignment_bytes, const char* name) {
  require(pointer != nullptr, name, " must not be null");
  require(reinterpret_cast<uintptr_t>(pointer) % alignment_bytes == 0, name, " must be ", alignment_bytes,
          "-byte aligned");
}

void check_sparse_attn_fwd(const SparseAttnFwdParams& params) {
  check_sparse_attention_problem(params.shape, params.position, params.index, params.softmax_scale);
  check_device_pointer(params.q, 16, "q");
  check_device_pointer(params.k, 16, "k");
  check_device_pointer(params.v, 16, "v");
  check_device_pointer(params.out, 8, "out");
  check_device_pointer(params.lse, 4, "lse");
}

void check_sparse_attn_bwd(const SparseAttnBwdParams& params) {
  check_sparse_attention_problem(params.shape, params.position, params.index, params.softmax_scale);
  check_device_pointer(params.q, 16, "q");
  check_device_pointer(params.k, 16, "k");
  check_device_pointer(params.v, 16, "v");
  check_device_pointer(params.dout, 16, "dout");
  check_device_pointer(params.lse, 4, "lse");
  check_device_pointer(params.delta, 4, "delta");
  check_device_pointer(params.dq, 8, "dq");
  check_device_pointer(params.dk, 8, "dk");
  check_device_pointer(params.dv, 8, "dv");
}

}  // namespace sparsering
