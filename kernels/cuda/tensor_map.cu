// Tensor maps for the Hopper kernels (see tensor_map.hpp).
#include "kernels/cuda/tensor_map.hpp"

#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <string>

#include "kernels/cuda/cuda_check.hpp"

namespace sparsering {
namespace {

/// cuTensorMapEncodeTiled from the driver, found through the runtime (no link against libcuda).
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult status{};
    SPARSERING_CUDA_CHECK(
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault, &status));
    if (status != cudaDriverEntryPointSuccess || function == nullptr) {
      throw CudaError("the CUDA driver has no cuTensorMapEncodeTiled (needed by the Hopper kernels)",
                      cudaErrorNotSupported);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
  }();
  return encode;
}

/// A 2-D map of `rows` x `columns` elements of `type` (`element_bytes` each) in boxes of 64 rows
/// by 128 bytes, 128-byte swizzle.
CUtensorMap make_map(CUtensorMapDataType type, int element_bytes, const void* data, int64_t rows, int columns) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(columns), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(columns) * static_cast<cuuint64_t>(element_bytes)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(128 / element_bytes), 64};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult result = tensor_map_encoder()(&map, type, 2, const_cast<void*>(data), dims, strides, box, element_strides,
                                               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    throw CudaError("cuTensorMapEncodeTiled failed (error " + std::to_string(static_cast<int>(result)) +
                        ") for a tensor of " + std::to_string(rows) + " rows",
                    cudaErrorInvalidValue);
  }
  return map;
}

}  // namespace

CUtensorMap make_swizzled_tensor_map(const uint16_t* data, int64_t rows, int head_dim) {
  return make_map(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, data, rows, head_dim);
}

CUtensorMap make_swizzled_tensor_map(const float* data, int64_t rows, int head_dim) {
  return make_map(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, data, rows, head_dim);
}

}  // namespace sparsering
