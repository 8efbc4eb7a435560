// See sm90a_availability.hpp.
#include "kernels/cuda/sm90a_availability.hpp"

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_check.hpp"

namespace sparsering {

std::string sm90a_code_unavailable() {
#if defined(SPARSERING_HAVE_SM90A)
  int device = 0;
  SPARSERING_CUDA_CHECK(cudaGetDevice(&device));
  int major = 0;
  int minor = 0;
  SPARSERING_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  SPARSERING_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major != 9 || minor != 0) {
    return "the device has compute capability " + std::to_string(major) + "." + std::to_string(minor) +
           " (sm_90a code runs on 9.0 only)";
  }
  return "";
#else
  return "this build has no sm_90a code (CMAKE_CUDA_ARCHITECTURES lacks 90a)";
#endif
}

}  // namespace sparsering
