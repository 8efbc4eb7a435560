// Error checking for CUDA runtime calls: SPARSERING_CUDA_CHECK(expr) throws CudaError carrying the
// failed expression, file:line, the current device and the host name, so a failure on a remote
// GPU machine says where it happened. Used after every launch (cudaGetLastError) and every
// allocation or copy. Host code only; tested in tests/kernels_gpu/cuda_check_test.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace sparsering {

/// A CUDA runtime call failed. Not an InputError: the CLI maps it to exit code 1.
class CudaError : public std::runtime_error {
 public:
  CudaError(const std::string& message, cudaError_t code) : std::runtime_error(message), code_(code) {}
  /// The CUDA error code that caused the exception.
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

/// Builds the message for a failed call and throws CudaError. `expression` is the source text.
[[noreturn]] void throw_cuda_error(cudaError_t code, const char* expression, const char* file, int line);

}  // namespace sparsering

/// Evaluates a cudaError_t expression once; throws sparsering::CudaError unless it is cudaSuccess.
#define SPARSERING_CUDA_CHECK(expr)                                               \
  do {                                                                            \
    const cudaError_t sparsering_cuda_status_ = (expr);                           \
    if (sparsering_cuda_status_ != cudaSuccess) {                                 \
      ::sparsering::throw_cuda_error(sparsering_cuda_status_, #expr, __FILE__, __LINE__); \
    }                                                                             \
  } while (false)
