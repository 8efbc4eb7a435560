// Launcher of the sparse attention forward kernel (one ring step, merged into the running fp32
// output and LSE). Semantics: kernels/attention_params.hpp (SparseAttnFwdParams) and
// kernels/sparse_index.hpp; CPU oracle: sparse_attn_fwd_ref. Tested in
// tests/kernels_gpu/sparse_attn_fwd_test.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/attention_params.hpp"

namespace sparsering {

/// The two implementations of the forward. Both compute the same thing within the stated bf16
/// bounds; they differ in how (docs/kernels.md).
enum class ForwardKernel {
  automatic,  ///< wgmma where it runs (below), mma_sync elsewhere; SPARSERING_FORWARD_KERNEL overrides
  mma_sync,   ///< sm_80 and newer: mma.sync m16n8k16, 64- or 128-query CTAs of 4 warps
  wgmma,      ///< Hopper (compute capability 9.0, sm_90a build): warpgroup MMAs, 128-query CTAs
};

/// "automatic", "mma_sync" or "wgmma".
const char* forward_kernel_name(ForwardKernel kernel);

/// Why `kernel` cannot run `params` on the current device, or "" when it can (mma_sync and
/// automatic always can).
std::string forward_kernel_unavailable(ForwardKernel kernel, const SparseAttnFwdParams& params);

/// The kernel `automatic` runs for `params` on the current device: the environment variable
/// SPARSERING_FORWARD_KERNEL (mma_sync or wgmma; for benchmarks and comparisons) when set, else
/// wgmma when this build has sm_90a code, the device has compute capability 9.0 and the query
/// block is a multiple of 128 with head dim 64 or 128; mma_sync otherwise. A bad variable value
/// is an InputError.
ForwardKernel select_forward_kernel(const SparseAttnFwdParams& params);

/// Queues the forward pass of `params` (device pointers) on `stream`: for every (row, query
/// block) of the index, attention over its key tiles and vertical columns, merged into
/// params.out / params.lse. Checks the problem first (check_sparse_attn_fwd: InputError) and the
/// launch after (CudaError). Asynchronous: results are ready when the stream is. Asking for wgmma
/// where it cannot run (another GPU, a build without sm_90a, a query block not a multiple of 128)
/// is an InputError naming why, never a silent switch to the other kernel.
void launch_sparse_attn_fwd(const SparseAttnFwdParams& params, cudaStream_t stream,
                            ForwardKernel kernel = ForwardKernel::automatic);

}  // namespace sparsering
