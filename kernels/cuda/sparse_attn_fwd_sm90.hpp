// The Hopper (sm_90a) path of the sparse attention forward: warpgroup MMAs from swizzled shared
// tiles (kernels/cuda/sparse_attn_fwd_sm90.cu). Chosen by launch_sparse_attn_fwd
// (kernels/cuda/sparse_attn_fwd.hpp); not meant to be called directly.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/attention_params.hpp"

namespace sparsering {

/// True when this library carries sm_90a device code (CMAKE_CUDA_ARCHITECTURES lists 90a).
bool sparse_attn_fwd_sm90_built();

/// True when the Hopper kernel handles this problem: query blocks of a multiple of 128 tokens
/// (one CTA = two warpgroups of 64 query rows) and head dim 64 or 128.
bool sparse_attn_fwd_sm90_supports(const SparseAttnFwdParams& params);

/// Queues the Hopper kernel; the caller has checked the problem, the device (compute capability
/// 9.0) and sparse_attn_fwd_sm90_supports.
void launch_sparse_attn_fwd_sm90(const SparseAttnFwdParams& params, cudaStream_t stream);

}  // namespace sparsering
