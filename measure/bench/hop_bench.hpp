// NCCL hop microbenchmarks for the link model: one process drives every local GPU from one thread
// (ncclCommInitAll) and times point-to-point messages of each size: GPU a -> b ("send"),
// b -> a ("recv"), both at once ("both"), and ring steps where every GPU sends to its ring
// successor while receiving from its predecessor ("ring", for each ring size that divides the GPU
// count, so several rings run at once). Host wall clock over back-to-back hops, median of repeats.
// The header has no CUDA or NCCL types. Run by `sparsering calibrate --cluster`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "measure/calibration/calibration_records.hpp"

namespace sparsering {

struct HopBenchOptions {
  std::vector<int> devices;           ///< CUDA device ordinals, at least 2
  std::vector<int64_t> sizes_bytes;   ///< message sizes, ascending
  int warmup = 2;
  int repeats = 5;
  /// Bytes moved per sender per timed repeat; the hop count per repeat is this over the size,
  /// clamped to [2, 50].
  int64_t bytes_per_repeat = int64_t{256} << 20;
};

/// Runs every mode and size. Throws InputError with fewer than two devices or no sizes, CudaError
/// or std::runtime_error (NCCL) on failure.
std::vector<HopMeasurement> run_hop_benchmarks(const HopBenchOptions& options,
                                               const std::function<void(const std::string&)>& progress = {});

/// NCCL's version as "major.minor.patch".
std::string nccl_version_string();

}  // namespace sparsering
