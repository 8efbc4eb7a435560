// `sparsering validate PLAN --trace T [--layer L] [--sample S] [--replay] [--ranks N]
// [--iterations I] [--out DIR]`: runs one attention layer of a plan on GPUs and prints measured
// against predicted (docs/VALIDATION.md). Without --replay the plan's
// context-parallel ring runs on the GPUs present through the NCCL ring runtime; with --replay one
// GPU runs every virtual rank in turn (measure/replay/) and the simulator's schedule derives
// the layer time from the measured compute matrix. --out DIR writes DIR/validation.json,
// DIR/timeline.json and DIR/cells.csv atomically (never replacing files without --force).
// --measured FILE predicts again and compares with the measurement recorded in an earlier
// validation.json (a replay's compute matrices), without a GPU: how a changed cost model or
// calibration would have fared on cases measured before (docs/VALIDATION.md). The callback only
// turns flags into library calls; the library is tested in tests/measure/validation/ and on GPUs by
// measure/device/run_validation_on_device.sh.
#include <cuda_runtime_api.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "cli/gpu/gpu_commands.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/source_commit.hpp"
#include "core/kernel_build.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "measure/replay/replay_compute_matrix.hpp"
#include "kernels/nccl/ring_attention_layer.hpp"
#include "measure/validation/ring_measurement.hpp"
#include "measure/validation/validation_compare.hpp"
#include "measure/validation/validation_json.hpp"
#include "measure/validation/validation_problem.hpp"
#include "measure/validation/validation_table.hpp"
#include "sim/cost/calibration_status.hpp"
#include "sim/step/simulation.hpp"
#include "sparsering/version.hpp"
#include "traces/safetensors_trace.hpp"

namespace sparsering::cli {
namespace {

struct ValidateOptions {
  std::string plan_path;
  std::string trace_path;
  int64_t layer = 0;
  int64_t sample = 0;
  bool replay = false;
  int64_t ranks = 0;
  int32_t iterations = 3;
  int32_t device = 0;
  double timeout_s = 120.0;
  std::string measured_path;
};

/// The measurement recorded in a replay's validation.json (measured_compute_us of both passes).
MeasuredLayer read_recorded_measurement(const std::string& path, nlohmann::json& document) {
  std::ifstream in(path);
  require(static_cast<bool>(in), "--measured ", path, ": cannot read the file");
  try {
    document = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& error) {
    throw InputError(str("--measured ", path, ": not JSON: ", error.what()));
  }
  require(document.value("format", "") == "sparsering-validation", "--measured ", path,
          ": not a validation.json (format is not sparsering-validation)");
  require(document.value("mode", "") == "replay", "--measured ", path,
          ": only a replay's measurement can be compared again (its layer time is re-derived from the compute "
          "matrix); this one is mode '", document.value("mode", ""), "'");
  MeasuredLayer measured;
  measured.mode = "replay";
  try {
    measured.ranks = document.at("ranks").get<int32_t>();
    measured.iterations = document.at("iterations").get<int32_t>();
    measured.tiles = document.at("measured_work").at("tiles").get<int64_t>();
    measured.column_chunks = document.at("measured_work").at("column_chunks").get<int64_t>();
    measured.forward.compute_us = document.at("forward").at("measured_compute_us").get<std::vector<double>>();
    measured.backward.compute_us = document.at("backward").at("measured_compute_us").get<std::vector<double>>();
    for (auto [name, pass] : {std::pair{"forward", &measured.forward}, std::pair{"backward", &measured.backward}}) {
      const nlohmann::json& recorded = document.at(name);
      if (recorded.contains("measured_sm_clock_mhz")) {  // absent before the clock was probed
        pass->sm_clock_mhz = recorded.at("measured_sm_clock_mhz").get<std::vector<double>>();
      }
    }
  } catch (const nlohmann::json::exception& error) {
    throw InputError(str("--measured ", path, ": ", error.what()));
  }
  return measured;
}

nlohmann::json provenance(const ValidateOptions& o, int32_t device_count, const std::string& command) {
  nlohmann::json gpus = nlohmann::json::array();
  for (int32_t d = 0; d < device_count; ++d) {
    cudaDeviceProp prop{};
    SPARSERING_CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
    gpus.push_back(prop.name);
  }
  int driver = 0;
  int runtime = 0;
  SPARSERING_CUDA_CHECK(cudaDriverGetVersion(&driver));
  SPARSERING_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  return nlohmann::json{{"gpus", gpus},
                        {"device", o.device},
                        {"cuda_driver", driver},
                        {"cuda_runtime", runtime},
                        {"commit", current_commit()},
                        {"sparsering_version", kVersion},
                        {"command", command},
                        {"trace", o.trace_path}};
}

std::string command_line(const ValidateOptions& o) {
  std::string line = str("sparsering validate ", o.plan_path);
  if (!o.trace_path.empty()) line += str(" --trace ", o.trace_path);
  line += str(" --layer ", o.layer, " --sample ", o.sample, " --iterations ", o.iterations);
  if (o.replay) line += str(" --replay --device ", o.device);
  if (o.ranks > 0) line += str(" --ranks ", o.ranks);
  return line;
}

void run_validate(const ValidateOptions& o, const GlobalOptions& global) {
  require(o.iterations >= 1, "--iterations must be >= 1, got ", o.iterations);
  require(o.ranks >= 0, "--ranks must be >= 1, got ", o.ranks);
  require(o.timeout_s > 0.0, "--timeout-s must be > 0, got ", o.timeout_s);
  LoadedPlan loaded = load_plan_with_inputs(o.plan_path);
  if (o.ranks > 0 && o.ranks != loaded.plan.context_parallel) {
    require(o.replay, "--ranks ", o.ranks, " differs from the plan's context_parallel ", loaded.plan.context_parallel,
            ": only a replay (--replay) can run a plan at another ring size");
    loaded.plan = with_ring_size(loaded.plan, o.ranks);
    check_plan_against(loaded.plan, loaded.model, loaded.cluster);
  }
  const PlanConfig& plan = loaded.plan;
  const CalibrationStatus calibration = kernel_build_status(loaded.cluster.gpu_config, this_kernel_build());
  if (calibration.stale) std::cerr << stale_calibration_warning(calibration) << "; this comparison is not meaningful\n";

  // Check the outputs before any long work, so a refusal costs nothing.
  std::filesystem::path json_path;
  std::filesystem::path timeline_path;
  std::filesystem::path cells_path;
  if (!global.out.empty()) {
    const std::filesystem::path dir(global.out);
    require(!std::filesystem::exists(dir) || std::filesystem::is_directory(dir), "--out ", dir.string(),
            " exists and is not a folder");
    json_path = dir / "validation.json";
    timeline_path = dir / "timeline.json";
    cells_path = dir / "cells.csv";
    for (const auto& path : {json_path, timeline_path, cells_path}) {
      require(global.force || !std::filesystem::exists(path), path.string(), " already exists; pass --force to overwrite it");
    }
  }
  const bool recorded = !o.measured_path.empty();
  nlohmann::json recorded_document;
  MeasuredLayer measured;
  if (recorded) {
    require(o.replay, "--measured compares with a recorded replay: pass --replay (and the --ranks it ran at)");
    measured = read_recorded_measurement(o.measured_path, recorded_document);
    require(measured.ranks == plan.context_parallel, "--measured ", o.measured_path, " was measured on a ring of ",
            measured.ranks, ", the plan has ", plan.context_parallel);
    require(recorded_document.value("layer", int64_t{-1}) == o.layer && recorded_document.value("sample", int64_t{-1}) == o.sample,
            "--measured ", o.measured_path, " is layer ", recorded_document.value("layer", int64_t{-1}), " sample ",
            recorded_document.value("sample", int64_t{-1}), ", not --layer ", o.layer, " --sample ", o.sample);
  }
  int device_count = 0;
  if (!recorded && cudaGetDeviceCount(&device_count) != cudaSuccess) device_count = 0;
  if (recorded) {
    // No GPU: the measurement is the recorded one.
  } else if (o.replay) {
    require(device_count >= 1, "--replay needs one CUDA GPU; none is present");
    require(o.device >= 0 && o.device < device_count, "--device ", o.device, " does not exist (", device_count,
            " GPUs present)");
  } else {
    require(plan.context_parallel <= device_count, "plan '", plan.name, "' has a context-parallel ring of ",
            plan.context_parallel, " GPUs but ", device_count, " are present; run it with --replay to measure its ",
            "compute matrix on one GPU");
  }

  std::filesystem::path trace_path = o.trace_path.empty() ? plan.trace_path : std::filesystem::path(o.trace_path);
  Trace trace;
  const Trace* trace_ptr = nullptr;
  if (plan.sparse.enabled) {
    require(!trace_path.empty(), "plan ", o.plan_path, " is sparse: give a trace with --trace or the plan's `trace:` key");
    trace = read_trace(trace_path);
    trace_ptr = &trace;
  }
  const ValidationProblem problem = make_validation_problem(loaded, trace_ptr, o.layer, o.sample);

  SimulationOptions options;
  options.trace_sample = o.sample;
  options.keep_ring_records = true;
  options.accumulator_route = AccumulatorRoute::mirror;  // the runtime's route
  options.threads = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  SimulationContext context;
  const SimulationResult predicted = simulate(context, plan, loaded.model, loaded.cluster, trace_ptr, options);

  if (recorded) {
    // measured above
  } else if (o.replay) {
    ReplayOptions replay;
    replay.device = o.device;
    replay.iterations = o.iterations;
    measured = measure_replay(problem, replay);
  } else {
    const std::vector<int32_t> order = validation_ring_order(plan);
    RingRuntimeOptions runtime;
    runtime.timeout_s = o.timeout_s;
    const RingLayerMeasurement ring =
        run_ring_attention_layer(make_ring_layer_problem(problem, order, o.iterations), runtime);
    measured = measured_from_ring(ring, order, o.iterations);
  }
  const ValidationReport report = compare_layer(problem, predicted, measured, options.accumulator_route);
  nlohmann::json document;
  if (recorded) {
    nlohmann::json recorded_provenance = recorded_document.value("provenance", nlohmann::json::object());
    // The kernels measured are the recorded document's (measured_kernel_build: never this binary's).
    const std::optional<std::string> measured_on = measured_kernel_build(recorded_document);
    recorded_provenance["predicted_again"] = {{"command", command_line(o) + " --measured " + o.measured_path},
                                              {"commit", current_commit()},
                                              {"sparsering_version", kVersion}};
    if (measured_on.has_value()) recorded_provenance["predicted_again"]["measured_kernel_build"] = *measured_on;
    document = validation_to_json(report, recorded_provenance);
  } else {
    document = validation_to_json(report, provenance(o, device_count, command_line(o)));
  }

  if (!global.out.empty()) {
    std::filesystem::create_directories(global.out);
    // Build every document before writing any, so a failure leaves no half-written set.
    const std::string json_text = document.dump(1) + "\n";
    const std::string timeline_text = measured_timeline_json(report, measured).dump() + "\n";
    const std::string cells_text = validation_cells_csv(report);
    write_file_atomically(json_path, json_text, global.force);
    write_file_atomically(timeline_path, timeline_text, global.force);
    write_file_atomically(cells_path, cells_text, global.force);
  }
  if (global.format == OutputFormat::json) {
    std::cout << document.dump(2) << '\n';
  } else {
    print_validation(std::cout, report);
    if (!global.out.empty()) {
      std::cout << "wrote " << json_path.string() << ", " << timeline_path.string() << " and " << cells_path.string()
                << "\n";
    }
  }
}

}  // namespace

void add_validate_command(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<ValidateOptions>();
  auto* cmd = app.add_subcommand(
      "validate", "Run a plan's attention layer on GPUs and print measured against predicted "
                  "(--replay: every virtual rank on one GPU; --out DIR writes validation.json, timeline.json and "
                  "cells.csv)");
  cmd->add_option("plan", options->plan_path, "Plan (configs/plans/<name>.yaml)")->required();
  cmd->add_option("--trace", options->trace_path, "Sparsity trace (.safetensors); default: the plan's `trace:`");
  cmd->add_option("--layer", options->layer, "Model layer whose patterns are run")->capture_default_str();
  cmd->add_option("--sample", options->sample, "Trace sample whose patterns are run")->capture_default_str();
  cmd->add_flag("--replay", options->replay,
                "Run every virtual rank of the ring one after another on one GPU (any ring size)");
  cmd->add_option("--ranks", options->ranks,
                  "With --replay: resize the ring to N positions (data parallel absorbs the change)");
  cmd->add_option("--iterations", options->iterations, "Timed repetitions per measurement (medians)")
      ->capture_default_str();
  cmd->add_option("--device", options->device, "With --replay: the CUDA device")->capture_default_str();
  cmd->add_option("--timeout-s", options->timeout_s, "Ring runs: bound on every wait for a peer (seconds)")
      ->capture_default_str();
  cmd->add_option("--measured", options->measured_path,
                  "With --replay: no GPU; predict again and compare with the compute matrices recorded in this "
                  "validation.json (same plan, layer and sample)");
  cmd->callback([options, &global] { run_validate(*options, global); });
}

}  // namespace sparsering::cli
