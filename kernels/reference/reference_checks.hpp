// Shared plumbing of the CPU references: element offsets of the (B, H, S, D) tensors and the
// checks every reference runs on its params before reading memory, so a malformed problem
// throws InputError instead of reading out of bounds. Exercised by every test in tests/kernels/.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention_params.hpp"

namespace sparsering::reference {

/// Offset of element (b, h, s, 0) in a contiguous (B, H, S, D) tensor.
inline size_t token_offset(int64_t b, int64_t h, int64_t s, int64_t heads, int64_t len, int64_t dim) {
  return static_cast<size_t>(((b * heads + h) * len + s) * dim);
}

/// Offset of element (b, h, s) in a contiguous (B, H, S) tensor.
inline size_t row_offset(int64_t b, int64_t h, int64_t s, int64_t heads, int64_t len) {
  return static_cast<size_t>((b * heads + h) * len + s);
}

/// Checks batch, heads (Hq a multiple of Hkv), head_dim and lengths. Throws InputError.
void check_shape(const AttentionShape& shape);

/// Checks the shape and that q_len == kv_len == the layout's local length, ranks in range.
void check_ring_problem(const AttentionShape& shape, const RingPosition& position);

/// Checks the index view against the shape: rows == B x Hq, q_blocks == ceil(q_len / block_q),
/// block sizes >= 1, arrays present. Entries are range-checked while they are read.
void check_index_view(const SparseIndexView& index, const AttentionShape& shape);

/// Throws InputError("<name> is null") when `pointer` is null.
void check_pointer(const void* pointer, const char* name);

}  // namespace sparsering::reference
