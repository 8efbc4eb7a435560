// Message construction for SPARSERING_CUDA_CHECK (see cuda_check.hpp).
#include "kernels/cuda/cuda_check.hpp"

#include <unistd.h>

#include <array>

#include "common/error.hpp"

namespace sparsering {

void throw_cuda_error(cudaError_t code, const char* expression, const char* file, int line) {
  int device = -1;
  // Ignore the status: after a sticky error the query may fail too, and -1 then says "unknown".
  (void)cudaGetDevice(&device);
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  throw CudaError(str("CUDA error ", cudaGetErrorName(code), " (", cudaGetErrorString(code), ") in `", expression,
                      "` at ", file, ":", line, " on device ", device, " of host ", host.data()),
                  code);
}

}  // namespace sparsering
