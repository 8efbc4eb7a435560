// The GPU half of `sparsering calibrate --gpu G [--cluster C --level L] [--quick] [--out DIR]`
// (options and registration: cli/calibrate_command.cpp): runs the kernel microbenchmarks
// (measure/bench/kernel_bench.hpp) and, with --cluster, the NCCL hop benchmarks (hop_bench.hpp) on
// the GPUs of this machine, fits the kernel cost model and the link (measure/calibration/), prints
// the fit table with residuals, writes the calibration into the GPU config and the measured
// latency and curve into the cluster's level (text-preserving, atomic), and the raw measurements
// as JSON and CSV into --out (default: the current folder). The fit and the config editing are
// tested in tests/measure/calibration/; this file only wires them to the GPUs.
#include <algorithm>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/calibrate_command.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/source_commit.hpp"
#include "measure/calibration/benchmark_plan.hpp"
#include "measure/calibration/calibration_output.hpp"
#include "measure/calibration/kernel_calibration.hpp"
#include "measure/calibration/kernel_fit.hpp"
#include "measure/calibration/link_fit.hpp"
#include "measure/bench/device_info.hpp"
#include "measure/bench/hop_bench.hpp"
#include "measure/bench/kernel_bench.hpp"
#include "sim/config/cluster_config.hpp"
#include "sim/config/gpu_config.hpp"
#include "sim/config/link_calibration.hpp"
#include "core/kernel_build.hpp"
#include "sim/cost/kernel_cost.hpp"

namespace sparsering::cli {
namespace {

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

void say(const GlobalOptions& global, const std::string& line) {
  if (global.verbosity >= 0) std::cerr << line << '\n';
}

}  // namespace

void run_calibrate_benchmarks(const CalibrateOptions& o, const GlobalOptions& global) {
  require(o.repeats >= 1 && o.repeats <= 1000, "--repeats must be in [1, 1000], got ", o.repeats);
  require(o.gemm_efficiency >= 0.0 && o.gemm_efficiency <= 1.0, "--gemm-efficiency must be in (0, 1], got ", o.gemm_efficiency);
  require(!o.link_only || !o.cluster_path.empty(), "--link-only needs --cluster");
  const FitOptions fit_options = fit_options_of(o);
  const std::vector<KernelShape> shapes =
      o.shapes.empty() ? default_calibration_shapes() : parse_kernel_shapes(o.shapes, "--shapes");
  const std::filesystem::path gpu_path(o.gpu_path);
  const std::string gpu_text = read_file(gpu_path);
  const GpuConfig gpu = parse_gpu(gpu_text, gpu_path.string());
  require(o.link_only || global.force || !gpu.calibrated(), gpu_path.string(),
          " already has a calibration section; pass --force to replace it");

  // Check every input and output before the benchmarks, so a refusal costs no GPU time.
  std::string cluster_text;
  std::filesystem::path cluster_path(o.cluster_path);
  double line_rate = 0.0;
  if (!o.cluster_path.empty()) {
    cluster_text = read_file(cluster_path);
    const ClusterConfig cluster = parse_cluster(cluster_text, cluster_path.string());
    const FabricLevel* level = nullptr;
    if (o.level == "intra_node") level = &cluster.intra_node;
    if (o.level == "inter_node" && cluster.inter_node) level = &*cluster.inter_node;
    for (const FabricLevel& outer : cluster.outer_levels) {
      if (outer.name == o.level) level = &outer;
    }
    require(level != nullptr, "--level ", o.level, ": ", cluster_path.string(), " has no such level");
    require(global.force || level->curve.empty(), cluster_path.string(), ": level ", o.level,
            " already has a curve; pass --force to replace it");
    line_rate = level->bandwidth_gbytes_per_s;
  }
  const std::filesystem::path out_dir = global.out.empty() ? std::filesystem::current_path() : std::filesystem::path(global.out);
  require(!std::filesystem::exists(out_dir) || std::filesystem::is_directory(out_dir), "--out ", out_dir.string(),
          " exists and is not a folder");
  const std::filesystem::path json_path = out_dir / str("calibration-", gpu.name, ".json");
  const std::filesystem::path kernels_csv = out_dir / str("calibration-", gpu.name, "-kernels.csv");
  const std::filesystem::path hops_csv = out_dir / str("calibration-", gpu.name, "-hops.csv");
  for (const auto& path : {json_path, kernels_csv, hops_csv}) {
    require(global.force || !std::filesystem::exists(path), path.string(), " already exists; pass --force to overwrite it");
  }

  std::vector<int> devices = o.devices;
  const int visible = device_count();
  if (devices.empty()) {
    for (int d = 0; d < visible; ++d) devices.push_back(d);
  }
  require(!devices.empty(), "no CUDA device visible");
  for (const int d : devices) require(d >= 0 && d < visible, "--devices: device ", d, " is not visible (", visible, " devices)");
  require(o.cluster_path.empty() || devices.size() >= 2, "--cluster measures hops between GPUs and needs at least 2, this machine shows ",
          devices.size());
  const DeviceInfo info = query_device(devices.front());
  const bool same_gpu = gpu.device_name.empty() || gpu.device_name == info.name;
  require(same_gpu || global.force, "this machine's GPU ", devices.front(), " is \"", info.name, "\" but ", gpu_path.string(),
          " describes \"", gpu.device_name, "\" (--force calibrates it anyway)");

  CalibrationRun run;
  run.fit_options = fit_options;
  run.fit_options.sm_count = info.sm_count;
  GpuCalibration& cal = run.calibration;
  cal.source = CalibrationSource::measured;
  cal.kernel_build = std::string(this_kernel_build());
  cal.provenance.gpu = info.name;
  cal.provenance.driver = info.driver;
  cal.provenance.cuda = info.cuda;
  cal.provenance.nccl = nccl_version_string();
  cal.provenance.commit = current_commit();
  cal.provenance.date = utc_now();
  if (!same_gpu) run.notes.push_back(str("measured on \"", info.name, "\", the config describes \"", gpu.device_name, "\""));
  const auto progress = [&global](const std::string& line) {
    if (global.verbosity > 0) std::cerr << line << '\n';
  };

  if (!o.link_only) {
    std::string shape_list;
    for (const KernelShape& shape : shapes) shape_list += str(shape_list.empty() ? "" : ",", to_string(shape));
    say(global, str("calibrate: kernel benchmarks on ", info.name, " (", info.sm_count, " SMs), shapes ", shape_list));
    KernelBenchOptions bench;
    bench.device = devices.front();
    bench.repeats = o.repeats;
    bench.banded = o.banded;
    run.kernels = run_kernel_benchmarks(default_kernel_cases(o.quick, shapes), bench, progress);
    cal.provenance.sm_clock_mhz = benchmark_sm_clock_mhz(run.kernels);
    // The measurements first: if the fit fails they are kept for a refit.
    std::filesystem::create_directories(out_dir);
    write_file_atomically(kernels_csv, kernel_measurements_csv(run.kernels), global.force);
    run.fits = fit_kernel_measurements(run.kernels, run.fit_options);
    for (const ShapeFit& fit : run.fits) cal.shapes.push_back(calibrated_shape(fit));
    if (o.gemm_efficiency > 0.0) {
      cal.gemm_efficiency = o.gemm_efficiency;
    } else if (gpu.calibrated()) {
      cal.gemm_efficiency = gpu.calibration->gemm_efficiency;
      run.notes.push_back("gemm_efficiency kept from the previous calibration (give --gemm-efficiency to set a measured one)");
    } else {
      cal.gemm_efficiency = RooflineAssumptions{}.gemm_efficiency;
      run.notes.push_back(str("gemm_efficiency ", cal.gemm_efficiency, " is assumed, not measured (give --gemm-efficiency)"));
    }
  }

  if (!o.cluster_path.empty()) {
    say(global, str("calibrate: NCCL hops over ", devices.size(), " GPUs"));
    HopBenchOptions hop;
    hop.devices = devices;
    hop.sizes_bytes = default_hop_sizes(o.quick, o.dense_sizes);
    hop.repeats = o.repeats;
    run.hops = run_hop_benchmarks(hop, progress);
    std::vector<HopSample> ring;
    for (const HopMeasurement& h : run.hops) {
      if (h.mode == "ring" && h.ring_size == h.gpus) ring.push_back({h.bytes, h.median_us});
    }
    run.link = fit_link(ring);
    run.has_link = true;
    run.link_level = o.level;
    if (const int64_t capped = cap_curve(run.link.curve, line_rate); capped > 0) {
      run.notes.push_back(str(capped, " curve point(s) above the level's line rate (", line_rate, " GB/s) were capped to it"));
    }
    if (!run.link.skipped_bytes.empty()) {
      run.notes.push_back(str(run.link.skipped_bytes.size(), " message size(s) took no longer than the latency: no curve point"));
    }
  }

  // Raw data first: if a config cannot be written, the measurements are still kept. The kernel
  // CSV written before the fit is replaced by the one with the fitted predictions.
  std::filesystem::create_directories(out_dir);
  write_file_atomically(json_path, calibration_json(run), global.force);
  write_file_atomically(kernels_csv, kernel_measurements_csv(run.kernels), true);
  write_file_atomically(hops_csv, hop_measurements_csv(run.hops), global.force);
  if (!o.link_only) {
    write_file_atomically(gpu_path, set_gpu_calibration(gpu_text, cal, gpu_path.string()), true);
  }
  if (!o.cluster_path.empty()) {
    const std::string comment = str("ring step over ", devices.size(), " x ", info.name, ", NCCL ", cal.provenance.nccl,
                                    ", sparsering calibrate ", cal.provenance.date.substr(0, 10));
    write_file_atomically(cluster_path,
                          set_fabric_level_calibration(cluster_text, o.level, run.link.latency_us, run.link.curve, comment,
                                                       cluster_path.string()),
                          true);
  }
  if (global.format == OutputFormat::json) {
    std::cout << calibration_json(run);
  } else {
    std::cout << fit_table(run);
    std::cout << "wrote " << (o.link_only ? "" : gpu_path.string() + ", ")
              << (o.cluster_path.empty() ? "" : cluster_path.string() + ", ") << json_path.string() << ", "
              << kernels_csv.string() << ", " << hops_csv.string() << "\n";
  }
}

}  // namespace sparsering::cli
