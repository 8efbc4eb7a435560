// `sparsering calibrate`: its options, registered in every build by cli/calibrate_command.cpp,
// which also refits recorded measurements (--refit, no GPU). The benchmarks on this machine's GPUs
// are run by run_calibrate_benchmarks: cli/gpu/calibrate_command.cpp in a build with CUDA and
// NCCL, cli/gpu_commands_unavailable.cpp (a message saying so) otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/global_options.hpp"
#include "measure/calibration/kernel_calibration.hpp"

namespace sparsering::cli {

struct CalibrateOptions {
  std::string gpu_path;
  std::string refit_path;  ///< --refit: a recorded kernel CSV to fit again instead of measuring
  std::vector<std::string> cells_paths;  ///< --cells: replays' cells.csv fitted with the refit
  std::vector<std::string> backward_cells_paths;  ///< --backward-cells: replays whose backward cells alone are fitted
  std::string cluster_path;
  std::string level = "intra_node";
  bool quick = false;
  bool link_only = false;
  bool dense_sizes = false;
  bool banded = false;
  std::vector<int> devices;
  int repeats = 5;
  double gemm_efficiency = 0.0;
  std::string shapes;  // empty: default_calibration_shapes()
  int64_t folds = 5;
  uint64_t fold_seed = 1;
  int64_t fold_dealings = 5;
};

/// The fit options of --folds, --fold-seed and --fold-dealings (sm_count 0: the caller sets it).
/// Throws InputError naming the flag that is out of range.
FitOptions fit_options_of(const CalibrateOptions& options);

/// Measures on this machine's GPUs, fits and writes the configs and raw data (docs/calibration.md).
/// Throws InputError in a build without CUDA and NCCL.
void run_calibrate_benchmarks(const CalibrateOptions& options, const GlobalOptions& global);

}  // namespace sparsering::cli
