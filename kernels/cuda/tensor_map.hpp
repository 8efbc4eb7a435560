// Tensor maps for the Hopper kernels' bulk tensor copies (TMA): a (rows, head dim) bf16 tensor
// seen as 64-row x 64-column boxes in the 128-byte swizzle that their wgmma descriptors read
// (kernels/cuda/hopper_async.cuh). Host code; the driver's encoder is found through the runtime,
// so nothing links against libcuda.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace sparsering {

/// The tensor map of `rows` rows of `head_dim` bf16 at `data` (16-byte aligned): 64 x 64 boxes,
/// 128-byte swizzle, zero fill outside the tensor. Throws CudaError when the driver lacks the
/// encoder or rejects the tensor.
CUtensorMap make_swizzled_tensor_map(const uint16_t* data, int64_t rows, int head_dim);

/// The same for fp32 (the backward's dQ, reduced into by bulk tensor adds): 64-row x 32-column
/// boxes (128 bytes per row), 128-byte swizzle.
CUtensorMap make_swizzled_tensor_map(const float* data, int64_t rows, int head_dim);

}  // namespace sparsering
