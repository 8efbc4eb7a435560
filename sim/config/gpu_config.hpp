// GPU config (configs/gpus/*.yaml): datasheet peak rates and capacities, plus the optional
// `calibration:` section that `sparsering calibrate` fits on a real GPU (kernel cost model with
// provenance). Without calibration the simulator falls back to a roofline estimate and says so.
// Schema reference: docs/configs.md. Tested in tests/config/gpu_config_test.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace sparsering {

/// Fitted cost of one sparse-attention kernel launch in one direction (forward or backward), for
/// one head: time_us = launch_us + per_tile_us x tiles + per_vertical_chunk_us x vertical chunks.
struct KernelCostCoefficients {
  double launch_us = 0.0;              ///< fixed cost per launch (launch, prologue, epilogue)
  double per_tile_us = 0.0;            ///< per block_q x block_k key tile (slash/diagonal part)
  double per_vertical_chunk_us = 0.0;  ///< per block_k gathered vertical columns of one query block
};

/// Where and how a calibration was measured.
struct CalibrationProvenance {
  std::string gpu;     ///< device name as the driver reports it, e.g. "NVIDIA H100 80GB HBM3"
  std::string driver;  ///< driver version
  std::string cuda;    ///< CUDA runtime version (optional, may be empty)
  std::string nccl;    ///< NCCL version
  std::string commit;  ///< sparsering commit that ran the benchmarks
  std::string date;    ///< ISO 8601 date of the measurement
};

/// The fitted kernel cost model of one GPU.
struct GpuCalibration {
  int64_t block_q = 64;    ///< query block (tokens) of the benchmarked kernels
  int64_t block_k = 64;    ///< key tile (tokens)
  int64_t head_dim = 128;  ///< head dimension of the benchmarked kernels
  KernelCostCoefficients forward;
  KernelCostCoefficients backward;
  double gemm_efficiency = 0.0;         ///< achieved / peak bf16 rate of dense GEMMs, in (0, 1]
  int64_t fit_samples = 0;              ///< measurements in the fit; 0 = not recorded
  double fit_max_relative_error = 0.0;  ///< worst |fit - measured| / measured; 0 = not recorded
  CalibrationProvenance provenance;
};

struct GpuConfig {
  std::string name;                           ///< config name, e.g. "h100-sxm"
  std::string device_name;                    ///< optional name as the driver reports it
  std::string compute_capability;             ///< optional, e.g. "9.0"
  double memory_gib = 0.0;                    ///< device memory (GiB = 2^30 bytes)
  double peak_tflops_bf16 = 0.0;              ///< dense bf16 tensor-core peak (TFLOP/s, 10^12)
  double memory_bandwidth_gbytes_per_s = 0.0; ///< HBM bandwidth (GB/s, 10^9 bytes)
  int64_t sm_count = 0;                       ///< streaming multiprocessors
  double l2_mib = 0.0;                        ///< L2 cache (MiB)
  std::optional<GpuCalibration> calibration;  ///< absent = uncalibrated
  std::filesystem::path source_path;          ///< file it was loaded from; empty when parsed from a string

  bool calibrated() const { return calibration.has_value(); }
  /// Device memory in bytes.
  int64_t memory_bytes() const;
};

/// Parses a GPU config from YAML text; errors are InputError prefixed with `source_name` and name
/// the key path and value.
GpuConfig parse_gpu(const std::string& yaml_text, std::string_view source_name);

/// Reads and parses a GPU file; sets source_path.
GpuConfig load_gpu(const std::filesystem::path& path);

/// Emits a GPU config as YAML that parse_gpu reads back to an equal config (comments are not kept).
std::string write_gpu_yaml(const GpuConfig& gpu);

/// Returns `gpu_yaml_text` with its top-level `calibration:` section replaced by (or, if absent,
/// extended with) `calibration`, keeping every other line and comment as written. Checks that the
/// result parses; `source_name` names the text in errors.
std::string set_gpu_calibration(const std::string& gpu_yaml_text, const GpuCalibration& calibration,
                                std::string_view source_name);

}  // namespace sparsering
