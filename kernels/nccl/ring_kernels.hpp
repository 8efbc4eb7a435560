// Small CUDA kernels of the ring runtime: input generation from (seed, global token), row
// gather / scatter for the layout shuffle, fp32 fill and add (accumulators). Each launcher
// queues on the given stream and checks the launch (CudaError). Exercised by
// tests/nccl/ring_attention_layer_test.cpp (the reference regenerates the inputs on the host
// with ring_input_bits and the shuffled layer must match it).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/attention_params.hpp"

namespace sparsering {

/// Writes tensor `tensor` (0..3 = Q, K, V, dO) of a contiguous shard: dst (B, H, n, D) with
/// element (b, h, i, d) = ring_input_bits(seed, tensor, b, h, first_token + i, d).
void launch_generate_ring_inputs(bf16_bits* dst, uint64_t seed, uint32_t tensor, int32_t batch, int32_t heads,
                                 int64_t tokens, int32_t head_dim, int64_t first_token, cudaStream_t stream);

/// Copies `rows` rows of `row_elems` bf16 values: dst[dst_map ? dst_map[r] : r] =
/// src[src_map ? src_map[r] : r]. row_elems must be a multiple of 8 and the pointers 16-byte
/// aligned.
void launch_copy_rows(bf16_bits* dst, const int64_t* dst_map, const bf16_bits* src, const int64_t* src_map,
                      int64_t rows, int32_t row_elems, cudaStream_t stream);

/// Sets `count` floats to `value`.
void launch_fill_floats(float* dst, int64_t count, float value, cudaStream_t stream);

/// dst[i] += src[i] for `count` floats.
void launch_add_floats(float* dst, const float* src, int64_t count, cudaStream_t stream);

}  // namespace sparsering
