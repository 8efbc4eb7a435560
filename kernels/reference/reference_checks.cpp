#include "kernels/reference/reference_checks.hpp"

#include "common/error.hpp"

namespace sparsering::reference {

void check_shape(const AttentionShape& shape) {
  require(shape.batch >= 1, "shape.batch must be >= 1, got ", shape.batch);
  require(shape.q_heads >= 1, "shape.q_heads must be >= 1, got ", shape.q_heads);
  require(shape.kv_heads >= 1 && shape.q_heads % shape.kv_heads == 0, "shape.kv_heads = ", shape.kv_heads,
          " must be >= 1 and divide q_heads = ", shape.q_heads);
  require(shape.head_dim >= 1, "shape.head_dim must be >= 1, got ", shape.head_dim);
  require(shape.q_len >= 0 && shape.kv_len >= 0, "shape lengths must be >= 0, got q_len ", shape.q_len,
          " and kv_len ", shape.kv_len);
}

void check_ring_problem(const AttentionShape& shape, const RingPosition& position) {
  check_shape(shape);
  const TokenLayout& layout = position.layout;
  require(position.q_rank >= 0 && position.q_rank < layout.ranks(), "position.q_rank = ", position.q_rank,
          " is outside [0, ", layout.ranks(), ")");
  require(position.kv_rank >= 0 && position.kv_rank < layout.ranks(), "position.kv_rank = ", position.kv_rank,
          " is outside [0, ", layout.ranks(), ")");
  require(shape.q_len == layout.local_len() && shape.kv_len == layout.local_len(), "shape q_len = ", shape.q_len,
          " and kv_len = ", shape.kv_len, " must both equal the layout's local length ", layout.local_len());
}

void check_index_view(const SparseIndexView& index, const AttentionShape& shape) {
  require(int64_t{index.rows} == int64_t{shape.batch} * shape.q_heads, "index.rows = ", index.rows,
          " but batch x q_heads = ", int64_t{shape.batch} * shape.q_heads);
  require(index.block_q >= 1 && index.block_k >= 1, "index block sizes must be >= 1, got block_q ", index.block_q,
          " and block_k ", index.block_k);
  require(int64_t{index.q_blocks} == (shape.q_len + index.block_q - 1) / index.block_q, "index.q_blocks = ",
          index.q_blocks, " but ceil(q_len / block_q) = ", (shape.q_len + index.block_q - 1) / index.block_q);
  check_pointer(index.tile_offsets, "index.tile_offsets");
  check_pointer(index.column_offsets, "index.column_offsets");
}

void check_pointer(const void* pointer, const char* name) { require(pointer != nullptr, name, " is null"); }

}  // namespace sparsering::reference
