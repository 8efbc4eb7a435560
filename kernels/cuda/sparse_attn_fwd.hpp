// Launcher of the sparse attention forward kernel (one ring step, merged into the running fp32
// output and LSE). Semantics: kernels/attention_params.hpp (SparseAttnFwdParams) and
// kernels/sparse_index.hpp; CPU oracle: sparse_attn_fwd_ref. Tested in
// tests/kernels_gpu/sparse_attn_fwd_test.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/attention_params.hpp"

namespace sparsering {

/// Queues the forward pass of `params` (device pointers) on `stream`: for every (row, query
/// block) of the index, attention over its key tiles and vertical columns, merged into
/// params.out / params.lse. Checks the problem first (check_sparse_attn_fwd: InputError) and the
/// launch after (CudaError). Asynchronous: results are ready when the stream is.
void launch_sparse_attn_fwd(const SparseAttnFwdParams& params, cudaStream_t stream);

}  // namespace sparsering
