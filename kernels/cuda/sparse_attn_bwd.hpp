// Launcher of the sparse attention backward (one ring step): dQ, dK, dV += over the same index
// as the forward, from the final LSE and delta. Semantics: SparseAttnBwdParams in
// kernels/attention_params.hpp; CPU oracle: sparse_attn_bwd_ref. Design: docs/kernels.md
// ("backward"). Tested in tests/kernels_gpu/sparse_attn_bwd_test.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/attention_params.hpp"

namespace sparsering {

/// Queues the backward pass of `params` (device pointers) on `stream`: builds the transposed
/// tile index (key block -> query blocks) in stream-ordered scratch memory, runs the key-block
/// pass (dK, dV owned per CTA, dQ by fp32 atomics) and then the vertical-column pass (dK, dV
/// and dQ by fp32 atomics). dq, dk, dv accumulate (+=). Throws InputError for an unsupported
/// problem, CudaError on launch failure.
void launch_sparse_attn_bwd(const SparseAttnBwdParams& params, cudaStream_t stream);

}  // namespace sparsering
