// Implementation of the kernels' launch checks (see attention_checks.hpp): the support rules of
// core/kernel_support.hpp plus the consistency of this launch's index, layout and pointers. Plain
// host code; compiled by nvcc only because it lives beside the kernels it guards.
#include "kernels/cuda/attention_checks.hpp"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "common/error.hpp"
#include "core/kernel_support.hpp"

namespace sparsering {

void check_sparse_attention_problem(const AttentionShape& shape, const RingPosition& position,
                                    const SparseIndexView& index, float softmax_scale) {
  require(shape.batch >= 1, "shape.batch must be >= 1, got ", shape.batch);
  // What the kernels can run at all is core/kernel_support.hpp's rule, shared with plan parsing
  // and the tuner; the checks around it are about this launch's arguments.
  const auto require_supported = [](const std::optional<std::string>& why) {
    if (why) throw InputError(*why);
  };
  require_supported(head_ratio_unsupported(shape.q_heads, shape.kv_heads, "shape.q_heads", "shape.kv_heads"));
  require_supported(head_dim_unsupported(shape.head_dim, "shape.head_dim"));
  require(shape.q_len >= 0 && shape.kv_len >= 0, "shape.q_len and shape.kv_len must be >= 0, got ", shape.q_len,
          " and ", shape.kv_len);
  require_supported(token_count_unsupported(shape.kv_len, "shape.kv_len"));
  require_supported(block_size_unsupported(index.block_q, "index.block_q"));
  require_supported(block_size_unsupported(index.block_k, "index.block_k"));
  require(int64_t{index.rows} == int64_t{shape.batch} * shape.q_heads, "index.rows (", index.rows,
          ") must equal batch x q_heads (", int64_t{shape.batch} * shape.q_heads, ")");
  const int64_t q_blocks = (shape.q_len + index.block_q - 1) / index.block_q;
  require(index.q_blocks == q_blocks, "index.q_blocks (", index.q_blocks, ") must equal ceil(q_len / block_q) = ",
          q_blocks);
  require_supported(query_tiles_unsupported(shape.q_len, index.block_q, "shape.q_len"));
  require(index.rows <= 0 || (index.tile_offsets != nullptr && index.column_offsets != nullptr),
          "index.tile_offsets and index.column_offsets must be set");
  require(index.max_tiles >= 0 && index.max_tiles < (int64_t{1} << 31), "index.max_tiles must be in [0, 2^31), got ",
          index.max_tiles);
  const TokenLayout& layout = position.layout;
  require_supported(token_count_unsupported(layout.seq_len_tokens(), "position.layout.seq_len_tokens"));
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
