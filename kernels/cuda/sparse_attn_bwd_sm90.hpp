// The Hopper (sm_90a) path of the sparse attention backward: warpgroup MMAs from swizzled shared
// tiles fed by TMA, for the key-block pass (kernels/cuda/sparse_attn_bwd_sm90.cu) and the
// vertical-column pass (sparse_attn_bwd_columns_sm90.cu). Chosen by launch_sparse_attn_bwd
// (kernels/cuda/sparse_attn_bwd.hpp); not meant to be called directly.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/attention_params.hpp"
#include "kernels/cuda/sparse_index_transpose.hpp"

namespace sparsering {

/// True when this library carries sm_90a device code (CMAKE_CUDA_ARCHITECTURES lists 90a).
bool sparse_attn_bwd_sm90_built();

/// True when the Hopper key-block pass handles this problem: head dim 64 or 128 and row counts
/// that TMA coordinates (int32) reach. Every block shape the index allows is handled.
bool sparse_attn_bwd_sm90_supports(const SparseAttnBwdParams& params);

/// Queues the Hopper key-block pass over `transposed` (the transposition of params.index); the
/// caller has checked the problem, the device (compute capability 9.0) and
/// sparse_attn_bwd_sm90_supports.
void launch_sparse_attn_bwd_key_blocks_sm90(const SparseAttnBwdParams& params, const TransposedIndexView& transposed,
                                            cudaStream_t stream);

/// True when the Hopper column pass handles this problem: sparse_attn_bwd_sm90_supports and query
/// blocks of a multiple of 128 tokens (one CTA = two warpgroups of 64 queries of one list).
bool sparse_attn_bwd_columns_sm90_supports(const SparseAttnBwdParams& params);

/// Queues the Hopper column pass; the caller has checked the problem, the device and
/// sparse_attn_bwd_columns_sm90_supports.
void launch_sparse_attn_bwd_columns_sm90(const SparseAttnBwdParams& params, cudaStream_t stream);

}  // namespace sparsering
