// GPU config (configs/gpus/*.yaml): datasheet peak rates and capacities, plus the optional
// `calibration:` section: the kernel cost model of one or more kernel shapes (block_q, block_k,
// head_dim), either measured here by `sparsering calibrate` (with the kernel build it measured, the
// fit's in-sample and held-out error and its provenance) or taken from published figures (with the
// sources cited). Without calibration the simulator falls back to a roofline estimate and says so.
// Schema reference: docs/configs.md; calibration: docs/calibration.md.
// Tested in tests/config/gpu_config_test.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sparsering {

/// Fitted cost of one sparse-attention kernel launch in one direction (forward or backward), all
/// heads of the launch: time_us = launch_us + per_list_us x lists + per_tile_us x tiles +
/// per_vertical_chunk_us x column chunks (lists: non-empty (head, query block) lists), plus the
/// backward's own units (optional keys, 0 when absent; sim/work/work_counts.hpp):
/// per_key_list_us x key lists + per_column_list_us x column lists + per_column_item_us x column
/// items + per_column_us x columns + per_key_block_us x the (K/V head, key block) pairs of the held K/V
/// chunk, listed or not (the key-block pass launches CTAs for all of them) + per_critical_entry_us x
/// the entries by which the heaviest key-block segment exceeds the per-SM share of the tiles
/// (sim/cost/kernel_cost.hpp; needs the config's sm_count).
struct KernelCostCoefficients {
  double launch_us = 0.0;              ///< fixed cost per launch (launch, prologue, epilogue)
  double per_list_us = 0.0;            ///< per non-empty (head, query block) list (load Q, merge the output)
  double per_tile_us = 0.0;            ///< per block_q x block_k key tile (slash/diagonal part)
  double per_vertical_chunk_us = 0.0;  ///< per block_k gathered vertical columns of one query block
  double per_key_list_us = 0.0;        ///< per non-empty (K/V head, key block) segment (key-block pass)
  double per_column_list_us = 0.0;     ///< per (head, query block) list with a column (column pass)
  double per_column_item_us = 0.0;     ///< per 64 gathered columns of one list (forward, backward column pass)
  double per_column_us = 0.0;          ///< per gathered column (column pass: its dK/dV atomics)
  double per_key_block_us = 0.0;       ///< per (K/V head, key block) of the held chunk, listed or not (key-block pass grid)
  double per_critical_entry_us = 0.0;  ///< per entry of the heaviest key-block segment beyond tiles / SMs (critical path)
};

/// The tile shape the kernels run: query block, key tile (tokens) and head dimension.
struct KernelShape {
  int64_t block_q = 64;
  int64_t block_k = 64;
  int64_t head_dim = 128;

  bool operator==(const KernelShape&) const = default;
};

/// "64x64x128" (block_q x block_k x head_dim), the form `calibrate --shapes` takes.
std::string to_string(const KernelShape& shape);

/// How well a measured shape's coefficients reproduce its measurements: |fit - measured| /
/// measured over the launches of the fit, the worse of forward and backward.
struct CalibrationFit {
  int64_t samples = 0;                        ///< launches fitted, both directions
  double median_relative_error = 0.0;         ///< in-sample
  double max_relative_error = 0.0;            ///< in-sample
  double heldout_median_relative_error = 0.0; ///< each launch predicted by a fit without its benchmark case
  double heldout_max_relative_error = 0.0;
  int64_t folds = 0;                          ///< k of the k-fold split by benchmark case
  int64_t dealings = 1;                       ///< times the cases were dealt into folds (older configs: once)
};

/// The coefficients of one kernel shape.
struct CalibratedShape {
  KernelShape shape;
  KernelCostCoefficients forward;
  KernelCostCoefficients backward;
  std::optional<CalibrationFit> fit;  ///< measured calibrations only
};

/// Where and how a measured calibration was measured.
struct CalibrationProvenance {
  std::string gpu;     ///< device name as the driver reports it, e.g. "NVIDIA H100 80GB HBM3"
  std::string driver;  ///< driver version
  std::string cuda;    ///< CUDA runtime version (optional, may be empty)
  std::string nccl;    ///< NCCL version
  std::string commit;  ///< sparsering commit that ran the benchmarks
  std::string date;    ///< ISO 8601 date of the measurement
  /// Median SM clock of the benchmark's timed launches, MHz (kernels/cuda/sm_clock_probe.hpp);
  /// 0 when not recorded (calibrations measured before the clock was probed). Under the GPU's
  /// power cap a replay that runs at lower clocks runs slower than this calibration predicts.
  double sm_clock_mhz = 0.0;
};

/// measured: by `sparsering calibrate` on this project's kernels; published: from cited figures of
/// other kernels or papers (never compared with this build's kernels).
enum class CalibrationSource : int32_t { measured = 0, published = 1 };

/// "measured" / "published".
std::string_view to_string(CalibrationSource source);

/// The kernel cost model of one GPU.
struct GpuCalibration {
  CalibrationSource source = CalibrationSource::measured;
  /// measured: the kernel build identity that was measured (core/kernel_build.hpp), or
  /// kUnknownKernelBuild when it was not recorded; published: empty.
  std::string kernel_build;
  double gemm_efficiency = 0.0;        ///< achieved / peak bf16 rate of dense GEMMs, in (0, 1]
  CalibrationProvenance provenance;    ///< measured only
  std::vector<std::string> sources;    ///< published only: one cited figure per entry
  std::vector<CalibratedShape> shapes; ///< at least one, shapes distinct

  bool published() const { return source == CalibrationSource::published; }
  /// The entry of `shape`, or nullptr when it is not calibrated.
  const CalibratedShape* find(const KernelShape& shape) const;
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
/// the key path and value. A calibration section in the single-shape form of earlier versions is
/// refused with a message saying how to convert it (docs/calibration.md).
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
