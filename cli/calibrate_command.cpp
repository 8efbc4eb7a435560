// `sparsering calibrate --gpu G ...`: registered in every build. Without --refit it runs the
// benchmarks on this machine's GPUs (run_calibrate_benchmarks, cli/gpu/calibrate_command.cpp).
// With --refit CSV it needs no GPU: the recorded kernel measurements of a calibrate run are fitted
// again with this version's model (measure/calibration/calibration_refit.hpp) into G's calibration
// section (text-preserving, atomic; replacing a section needs --force, as a measurement does), and
// the fit with its residuals and the measurements with their predictions go to --out DIR as
// calibration-<gpu>.json and calibration-<gpu>-kernels.csv. --cells adds ring cells replayed on
// the same kernel build (each a cells.csv beside its validation.json) to the refit's launches
// (measure/calibration/replayed_cells.hpp); --backward-cells adds the backward cells alone of the
// replays measured for the backward's critical path (docs/calibration.md). Tested in
// tests/cli/calibrate_refit_cli_test.cpp.
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <string>

#include "cli/calibrate_command.hpp"
#include "cli/commands.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "measure/calibration/calibration_output.hpp"
#include "measure/calibration/calibration_refit.hpp"
#include "measure/calibration/replayed_cells.hpp"
#include "sim/config/gpu_config.hpp"

namespace sparsering::cli {
namespace {

void run_refit(const CalibrateOptions& o, const GlobalOptions& global) {
  const FitOptions fit_options = fit_options_of(o);
  const std::filesystem::path gpu_path(o.gpu_path);
  const std::string gpu_text = read_file(gpu_path);
  const GpuConfig gpu = parse_gpu(gpu_text, gpu_path.string());
  const std::string csv_text = read_file(o.refit_path);
  const std::filesystem::path out_dir = global.out.empty() ? std::filesystem::current_path() : std::filesystem::path(global.out);
  require(!std::filesystem::exists(out_dir) || std::filesystem::is_directory(out_dir), "--out ", out_dir.string(),
          " exists and is not a folder");
  const std::filesystem::path json_path = out_dir / str("calibration-", gpu.name, ".json");
  const std::filesystem::path kernels_csv = out_dir / str("calibration-", gpu.name, "-kernels.csv");
  for (const auto& path : {json_path, kernels_csv}) {
    require(global.force || !std::filesystem::exists(path), path.string(), " already exists; pass --force to overwrite it");
    require(std::filesystem::weakly_canonical(path) != std::filesystem::weakly_canonical(o.refit_path), path.string(),
            " is the CSV being refitted; give another --out");
  }
  require(global.force || !gpu.calibrated(), gpu_path.string(),
          " already has a calibration section; pass --force to replace it with the refit");

  std::vector<KernelMeasurement> replayed;
  require((o.cells_paths.empty() && o.backward_cells_paths.empty()) || gpu.calibration.has_value(), gpu_path.string(),
          " has no calibration to fit replayed cells into");
  std::set<std::string> replays;  // one replay per plan: the same plan twice would count its cells twice
  const auto add_cells = [&](const std::string& option, const std::string& cells, bool backward_only) {
    const std::filesystem::path cells_path(cells);
    const std::filesystem::path validation_path = cells_path.parent_path() / "validation.json";
    require(std::filesystem::is_regular_file(validation_path), option, " ", cells, ": no validation.json beside it (",
            validation_path.string(), "); give the cells.csv that `sparsering validate --replay --out DIR` wrote");
    const std::vector<KernelMeasurement> cells_of_replay = parse_replayed_cells(
        read_file(cells_path), read_file(validation_path), cells, gpu.calibration->kernel_build);
    if (cells_of_replay.empty()) return;
    const std::string& replay = cells_of_replay.front().placement;
    require(replays.insert(replay).second, option, " ", cells, ": plan ", replay.substr(kReplayedPlacement.size()),
            " is already given by another cells file");
    for (const KernelMeasurement& k : cells_of_replay) {
      if (!backward_only || k.direction == "backward") replayed.push_back(k);
    }
  };
  for (const std::string& cells : o.cells_paths) add_cells("--cells", cells, false);
  for (const std::string& cells : o.backward_cells_paths) add_cells("--backward-cells", cells, true);
  const CalibrationRun run =
      refit_kernel_calibration(csv_text, o.refit_path, gpu, fit_options, replayed);
  // The configs are checked before anything is written: set_gpu_calibration parses its result.
  const std::string new_gpu_text = set_gpu_calibration(gpu_text, run.calibration, gpu_path.string());
  std::filesystem::create_directories(out_dir);
  write_file_atomically(json_path, calibration_json(run), global.force);
  write_file_atomically(kernels_csv, kernel_measurements_csv(run.kernels), global.force);
  write_file_atomically(gpu_path, new_gpu_text, true);
  if (global.format == OutputFormat::json) {
    std::cout << calibration_json(run);
  } else {
    std::cout << fit_table(run);
    std::cout << "wrote " << gpu_path.string() << ", " << json_path.string() << ", " << kernels_csv.string() << "\n";
  }
}

}  // namespace

FitOptions fit_options_of(const CalibrateOptions& o) {
  require(o.folds >= 2 && o.folds <= 100, "--folds must be in [2, 100], got ", o.folds);
  require(o.fold_dealings >= 1 && o.fold_dealings <= 100, "--fold-dealings must be in [1, 100], got ", o.fold_dealings);
  return FitOptions{.folds = o.folds, .seed = o.fold_seed, .dealings = o.fold_dealings};
}

void add_calibrate_command(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<CalibrateOptions>();
  auto* cmd = app.add_subcommand(
      "calibrate", "Benchmark the sparse attention kernels (and with --cluster the NCCL hops) on this machine's GPUs, fit "
                   "the cost model and write it into the GPU config (raw data as JSON/CSV into --out, default .); with "
                   "--refit, fit recorded measurements again instead (no GPU)");
  cmd->add_option("--gpu", options->gpu_path, "GPU config to calibrate (configs/gpus/<gpu>.yaml)")->required();
  auto* refit = cmd->add_option("--refit", options->refit_path,
                                "No GPU: fit the kernel measurements a calibrate run recorded (its calibration-<gpu>-kernels.csv) "
                                "again with this version's model, into --gpu's calibration (the config that run wrote: its "
                                "kernel build and provenance are kept)");
  cmd->add_option("--cells", options->cells_paths,
                  "With --refit: ring cells replayed on the same kernel build (cells.csv of `sparsering validate "
                  "--replay --out DIR`, beside its validation.json), fitted with the recorded launches")
      ->needs(refit);
  cmd->add_option("--backward-cells", options->backward_cells_paths,
                  "With --refit: as --cells, but only the backward's cells are fitted (replays measured for the "
                  "backward's critical path, whose forward cells the forward model does not describe)")
      ->needs(refit);
  std::vector<CLI::Option*> measuring;
  measuring.push_back(cmd->add_option("--cluster", options->cluster_path,
                                      "Cluster config whose --level gets the measured latency and curve"));
  measuring.push_back(cmd->add_option("--level", options->level,
                                      "Fabric level of --cluster: intra_node, inter_node or an outer level's name")
                          ->capture_default_str());
  measuring.push_back(cmd->add_flag("--quick", options->quick, "Small benchmark grid and sizes up to 256 MiB (smoke runs)"));
  measuring.push_back(cmd->add_flag("--link-only", options->link_only,
                                    "Only the NCCL hops (needs --cluster); the GPU config is not written"));
  measuring.push_back(cmd->add_flag("--banded", options->banded,
                                    "Benchmark indices with tiles on diagonals and shared column pools (like real patterns) "
                                    "instead of uniformly random ones"));
  measuring.push_back(cmd->add_flag("--dense-sizes", options->dense_sizes, "Hop sizes in powers of 2 instead of 4"));
  measuring.push_back(
      cmd->add_option("--devices", options->devices, "CUDA devices to use (default: all visible)")->delimiter(','));
  measuring.push_back(
      cmd->add_option("--repeats", options->repeats, "Timed repeats per measurement (median)")->capture_default_str());
  measuring.push_back(cmd->add_option("--gemm-efficiency", options->gemm_efficiency,
                                      "Measured dense GEMM efficiency (achieved / peak bf16) to record; default: keep the "
                                      "previous value"));
  measuring.push_back(cmd->add_option("--shapes", options->shapes,
                                      "Kernel shapes to calibrate, block_qxblock_kxhead_dim, comma-separated (default: "
                                      "64x64x128,128x128x128, the tuner's block sizes at the shipped models' head dim)"));
  // A refit fits what was measured: options that choose what to measure do not apply to it.
  for (CLI::Option* option : measuring) refit->excludes(option);
  cmd->add_option("--folds", options->folds, "Folds of the held-out error (split by benchmark case)")->capture_default_str();
  cmd->add_option("--fold-seed", options->fold_seed, "Seed that deals the benchmark cases into folds (the first dealing)")
      ->capture_default_str();
  cmd->add_option("--fold-dealings", options->fold_dealings,
                  "Times the benchmark cases are dealt into folds (seeds fold-seed, fold-seed + 1, ...); the held-out "
                  "error is the median over every dealing's predictions")
      ->capture_default_str();
  cmd->callback([options, &global] {
    if (options->refit_path.empty()) {
      run_calibrate_benchmarks(*options, global);
    } else {
      run_refit(*options, global);
    }
  });
}

}  // namespace sparsering::cli
