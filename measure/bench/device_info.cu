// The driver's own version string is in /proc/driver/nvidia/version on Linux ("NVRM version: NVIDIA
// UNIX Open Kernel Module for x86_64  580.159.04  Release Build ..."); the CUDA API only knows the
// CUDA version the driver supports, used as fallback.
#include "measure/bench/device_info.hpp"

#include <cuda_runtime_api.h>

#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace sparsering {
namespace {

/// The first word of the line that looks like a version ("580.159.04"): digits and at least one dot.
std::string module_version() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(in, line)) return "";
  std::istringstream words(line);
  std::string word;
  while (words >> word) {
    const bool digits_and_dots = word.find_first_not_of("0123456789.") == std::string::npos;
    if (digits_and_dots && word.find('.') != std::string::npos && word.front() != '.') return word;
  }
  return "";
}

std::string cuda_version(int version) { return str(version / 1000, ".", (version % 1000) / 10); }

}  // namespace

DeviceInfo query_device(int device) {
  cudaDeviceProp prop{};
  SPARSERING_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  DeviceInfo info;
  info.name = prop.name;
  info.sm_count = prop.multiProcessorCount;
  info.l2_bytes = prop.l2CacheSize;
  info.driver = module_version();
  if (info.driver.empty()) {
    int version = 0;
    SPARSERING_CUDA_CHECK(cudaDriverGetVersion(&version));
    info.driver = str("CUDA driver API ", cuda_version(version));
  }
  int runtime = 0;
  SPARSERING_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  info.cuda = cuda_version(runtime);
  return info;
}

int device_count() {
  int count = 0;
  SPARSERING_CUDA_CHECK(cudaGetDeviceCount(&count));
  return count;
}

}  // namespace sparsering
