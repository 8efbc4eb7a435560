// Host-side checks that a launch is one the CUDA attention kernels can run (the can_implement
// step of cutlass): the support rules of core/kernel_support.hpp (head dims, block sizes, GQA
// ratio, token counts, query tiles; shared with plan parsing and the tuner), then a consistent
// index and shape and aligned pointers. Every launcher calls them before anything is queued;
// failures throw InputError naming the field and value. Tested by the Rejects* cases of
// tests/kernels_gpu/*_test.cpp and tests/kernels_gpu/capi_test.cpp (no GPU needed); the rules
// themselves by tests/core/kernel_support_test.cpp.
#pragma once

#include "kernels/attention_params.hpp"

namespace sparsering {

/// Throws InputError unless shape, ring position, index view and softmax scale describe a
/// problem the sparse attention kernels support: core/kernel_support.hpp's rules (head_dim 64 or
/// 128, Hq a multiple of Hkv, block_q and block_k multiples of 64), index.rows == batch * q_heads,
/// index.q_blocks == ceil(q_len / block_q), q_len and kv_len within the layout's local length,
/// ranks inside the ring, kv_len < 2^31, and a finite softmax_scale > 0.
void check_sparse_attention_problem(const AttentionShape& shape, const RingPosition& position,
                                    const SparseIndexView& index, float softmax_scale);

/// Throws InputError if `pointer` is null or not aligned to `alignment_bytes`; `name` is the
/// parameter name used in the message.
void check_device_pointer(const void* pointer, size_t alignment_bytes, const char* name);

/// Throws InputError unless `params` passes check_sparse_attention_problem and its tensors are
/// non-null and 16-byte aligned (bf16 inputs) or 8-byte aligned (fp32 outputs).
void check_sparse_attn_fwd(const SparseAttnFwdParams& params);

/// As check_sparse_attn_fwd, for the backward parameters.
void check_sparse_attn_bwd(const SparseAttnBwdParams& params);

}  // namespace sparsering
