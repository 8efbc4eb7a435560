// Launcher of the backward pre-pass delta = rowsum(dout * out) (FlashAttention-2's D term), run
// once before the backward ring. CPU oracle: attn_bwd_delta_ref. Tested in
// tests/kernels_gpu/sparse_attn_bwd_test.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/attention_params.hpp"

namespace sparsering {


/// Queues delta[t] = sum_d float(dout[t, d]) * out[t, d] for every one of the B * Hq * Sq token
/// rows t on `stream` (AttnBwdDeltaParams in kernels/attention_params.hpp). Throws InputError for
/// a bad shape or null/misaligned pointers, CudaError on launch failure.
void launch_attn_bwd_delta(const AttnBwdDeltaParams& params, cudaStream_t stream);

}  // namespace sparsering
