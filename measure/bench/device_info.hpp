// What `sparsering calibrate` records about the machine: GPU name, SM count, L2 size, driver and
// CUDA runtime versions. The header has no CUDA types. Run by the calibrate command.
#pragma once

#include <cstdint>
#include <string>

namespace sparsering {

struct DeviceInfo {
  std::string name;      ///< e.g. "NVIDIA H100 80GB HBM3"
  int32_t sm_count = 0;
  int64_t l2_bytes = 0;
  std::string driver;    ///< kernel module version (e.g. "580.159.04"), else the CUDA driver API version
  std::string cuda;      ///< CUDA runtime version, "major.minor"
};

/// Reads the properties of CUDA device `device`. Throws CudaError.
DeviceInfo query_device(int device);

/// Number of CUDA devices visible. Throws CudaError.
int device_count();

}  // namespace sparsering
