// Launcher of the sparse attention backward (one ring step): dQ, dK, dV += over the same index
// as the forward, from the final LSE and delta. Semantics: SparseAttnBwdParams in
// kernels/attention_params.hpp; CPU oracle: sparse_attn_bwd_ref. Design: docs/kernels.md
// ("backward"). Tested in tests/kernels_gpu/sparse_attn_bwd_test.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/attention_params.hpp"

namespace sparsering {

/// The two implementations of the backward. Both compute the same thing within the stated bf16
/// bounds; they differ in how (docs/kernels.md). wgmma's column pass needs query blocks of a
/// multiple of 128 tokens; with 64-token query blocks it runs the mma_sync column pass.
enum class BackwardKernel {
  automatic,  ///< wgmma where it runs (below), mma_sync elsewhere; SPARSERING_BACKWARD_KERNEL overrides
  mma_sync,   ///< sm_80 and newer: mma.sync m16n8k16, CTAs of 4 warps, both passes
  wgmma,      ///< Hopper (compute capability 9.0, sm_90a build): warpgroup MMAs fed by TMA
};

/// "automatic", "mma_sync" or "wgmma".
const char* backward_kernel_name(BackwardKernel kernel);

/// Why `kernel` cannot run `params` on the current device, or "" when it can (mma_sync and
/// automatic always can).
std::string backward_kernel_unavailable(BackwardKernel kernel, const SparseAttnBwdParams& params);

/// The kernel `automatic` runs for `params` on the current device: the environment variable
/// SPARSERING_BACKWARD_KERNEL (mma_sync or wgmma; for benchmarks and comparisons) when set, else
/// wgmma when this build has sm_90a code, the device has compute capability 9.0 and the head dim
/// is 64 or 128; mma_sync otherwise. A bad variable value is an InputError.
BackwardKernel select_backward_kernel(const SparseAttnBwdParams& params);

/// Queues the backward pass of `params` (device pointers) on `stream`: builds the transposed
/// tile index (key block -> query blocks) in stream-ordered scratch memory, runs the key-block
/// pass (dK, dV owned per CTA, dQ by fp32 atomics) and then the vertical-column pass (dK, dV
/// and dQ by fp32 atomics). dq, dk, dv accumulate (+=). Throws InputError for an unsupported
/// problem or a `kernel` that cannot run here (never a silent switch to the other kernel),
/// CudaError on launch failure.
void launch_sparse_attn_bwd(const SparseAttnBwdParams& params, cudaStream_t stream,
                            BackwardKernel kernel = BackwardKernel::automatic);

}  // namespace sparsering
