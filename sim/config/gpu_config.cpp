// GPU config parsing, emission and calibration replacement. Calibration coefficients are times in
// microseconds; the bounds only exclude values no fit can produce (negative or non-finite times).
// Shapes must be ones the kernels run (core/kernel_support.hpp): a calibration of any other shape
// could only have come from a typo.
#include "sim/config/gpu_config.hpp"

#include <cmath>
#include <sstream>

#include "common/error.hpp"
#include "common/yaml_reader.hpp"
#include "core/kernel_build.hpp"
#include "core/kernel_support.hpp"

namespace sparsering {
namespace {

using yaml::NumberBounds;

/// More shapes than the kernels have (block sizes x head dims) would be a runaway file.
constexpr size_t kMaxShapes = 64;
constexpr size_t kMaxSources = 64;

KernelCostCoefficients read_coefficients(yaml::MapReader map) {
  KernelCostCoefficients c;
  c.launch_us = map.required_number("launch_us", NumberBounds::non_negative());
  c.per_list_us = map.required_number("per_list_us", NumberBounds::non_negative());
  c.per_tile_us = map.required_number("per_tile_us", NumberBounds::positive());
  c.per_vertical_chunk_us = map.required_number("per_vertical_chunk_us", NumberBounds::non_negative());
  c.per_key_list_us = map.optional_number("per_key_list_us", 0.0, NumberBounds::non_negative());
  c.per_column_list_us = map.optional_number("per_column_list_us", 0.0, NumberBounds::non_negative());
  c.per_column_item_us = map.optional_number("per_column_item_us", 0.0, NumberBounds::non_negative());
  c.per_column_us = map.optional_number("per_column_us", 0.0, NumberBounds::non_negative());
  c.per_key_block_us = map.optional_number("per_key_block_us", 0.0, NumberBounds::non_negative());
  c.per_critical_entry_us = map.optional_number("per_critical_entry_us", 0.0, NumberBounds::non_negative());
  map.finish();
  return c;
}

CalibrationFit read_fit(yaml::MapReader map) {
  CalibrationFit fit;
  fit.samples = map.required_int("samples", 1);
  fit.median_relative_error = map.required_number("median_relative_error", NumberBounds::non_negative());
  fit.max_relative_error = map.required_number("max_relative_error", NumberBounds::non_negative());
  fit.heldout_median_relative_error = map.required_number("heldout_median_relative_error", NumberBounds::non_negative());
  fit.heldout_max_relative_error = map.required_number("heldout_max_relative_error", NumberBounds::non_negative());
  fit.folds = map.required_int("folds", 2, 1000);
  fit.dealings = map.optional_int("dealings", 1, 1, 100);
  require(fit.median_relative_error <= fit.max_relative_error, map.key_path("median_relative_error"), " (",
          fit.median_relative_error, ") exceeds max_relative_error (", fit.max_relative_error, ")");
  require(fit.heldout_median_relative_error <= fit.heldout_max_relative_error,
          map.key_path("heldout_median_relative_error"), " (", fit.heldout_median_relative_error,
          ") exceeds heldout_max_relative_error (", fit.heldout_max_relative_error, ")");
  require(fit.folds <= fit.samples, map.key_path("folds"), " (", fit.folds, ") exceeds samples (", fit.samples,
          "): every fold holds at least one benchmark case");
  map.finish();
  return fit;
}

int64_t read_supported(yaml::MapReader& map, std::string_view key, bool head_dim) {
  const int64_t value = map.required_int(key, 1, 4096);
  const std::string path = map.key_path(key);
  const std::optional<std::string> reason = head_dim ? head_dim_unsupported(value, path) : block_size_unsupported(value, path);
  require(!reason.has_value(), reason.value_or(""));
  return value;
}

CalibratedShape read_shape(const YAML::Node& node, const std::string& path, CalibrationSource source) {
  yaml::MapReader map(node, path);
  CalibratedShape s;
  s.shape.block_q = read_supported(map, "block_q", false);
  s.shape.block_k = read_supported(map, "block_k", false);
  s.shape.head_dim = read_supported(map, "head_dim", true);
  s.forward = read_coefficients(map.required_map("forward"));
  s.backward = read_coefficients(map.required_map("backward"));
  // The count it multiplies is the backward key-block pass's heaviest segment.
  require(s.forward.per_critical_entry_us == 0.0, map.key_path("forward"),
          ".per_critical_entry_us is the backward's critical-path cost; the forward has none (got ",
          s.forward.per_critical_entry_us, ")");
  if (source == CalibrationSource::measured) {
    s.fit = read_fit(map.required_map("fit"));
  } else {
    require(!map.has("fit"), map.key_path("fit"),
            " holds fit statistics of measurements; a published calibration has none (source: published)");
  }
  map.finish();
  return s;
}

bool is_iso_date(const std::string& text) {
  if (text.size() < 10) return false;
  for (size_t i = 0; i < 10; ++i) {
    const bool dash = i == 4 || i == 7;
    if (dash ? text[i] != '-' : (text[i] < '0' || text[i] > '9')) return false;
  }
  return true;
}

CalibrationProvenance read_provenance(yaml::MapReader prov) {
  CalibrationProvenance p;
  p.gpu = prov.required_string("gpu");
  p.driver = prov.required_string("driver");
  p.cuda = prov.optional_string("cuda", "");
  p.nccl = prov.required_string("nccl");
  p.commit = prov.required_string("commit");
  p.date = prov.required_string("date");
  p.sm_clock_mhz = prov.optional_number("sm_clock_mhz", 0.0, NumberBounds::non_negative());
  require(is_iso_date(p.date), prov.key_path("date"), " must be an ISO 8601 date (YYYY-MM-DD...), got \"", p.date.substr(0, 48), "\"");
  prov.finish();
  return p;
}

/// Earlier versions wrote one shape's three-term coefficients at the section's top level.
void refuse_single_shape_form(const yaml::MapReader& map) {
  bool has_shapes = false;
  std::string old_key;
  for (const auto& [key, value] : map.entries()) {
    has_shapes = has_shapes || key == "shapes";
    for (const char* old : {"block_q", "block_k", "head_dim", "forward", "backward", "fit_samples", "fit_max_relative_error"}) {
      if (key == old && old_key.empty()) old_key = key;
    }
  }
  require(has_shapes || old_key.empty(), map.path(), " is in the single-shape form of earlier versions (", map.key_path(old_key),
          " at its top level, three terms per direction), which this version does not read: a calibration now lists ",
          "four-term fits per kernel shape under `shapes:`, with `source` and `kernel_build`. Recalibrate with ",
          "`sparsering calibrate`, or refit the run's raw measurements; docs/calibration.md (\"Converting a ",
          "single-shape calibration\") says how");
}

GpuCalibration read_calibration(yaml::MapReader map) {
  refuse_single_shape_form(map);
  GpuCalibration cal;
  cal.source = map.required_choice("source", {"measured", "published"}) == "measured" ? CalibrationSource::measured
                                                                                      : CalibrationSource::published;
  cal.gemm_efficiency = map.required_number("gemm_efficiency", NumberBounds::left_open(0.0, 1.0));
  if (cal.source == CalibrationSource::measured) {
    cal.kernel_build = map.required_string("kernel_build");
    require(is_kernel_build_identity(cal.kernel_build) || cal.kernel_build == kUnknownKernelBuild, map.key_path("kernel_build"),
            " must be the kernel build identity `sparsering calibrate` records (\"sha256:\" and 64 lower-case hex digits) "
            "or \"", kUnknownKernelBuild, "\", got \"", cal.kernel_build.substr(0, 80), "\"");
    cal.provenance = read_provenance(map.required_map("provenance"));
    require(!map.has("sources"), map.key_path("sources"),
            " cites published figures; a measured calibration has `provenance` instead (or set source: published)");
  } else {
    require(!map.has("kernel_build"), map.key_path("kernel_build"),
            " belongs to measured calibrations: published figures were not measured on this project's kernels");
    require(!map.has("provenance"), map.key_path("provenance"),
            " belongs to measured calibrations: a published one cites its figures in `sources`");
    const std::vector<YAML::Node> items = map.required_sequence("sources", kMaxSources);
    require(!items.empty(), map.key_path("sources"), " must cite at least one published figure");
    for (size_t i = 0; i < items.size(); ++i) {
      cal.sources.push_back(yaml::to_string(items[i], str(map.key_path("sources"), "[", i, "]")));
    }
  }
  const std::vector<YAML::Node> items = map.required_sequence("shapes", kMaxShapes);
  require(!items.empty(), map.key_path("shapes"), " must list at least one kernel shape");
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string path = str(map.key_path("shapes"), "[", i, "]");
    CalibratedShape shape = read_shape(items[i], path, cal.source);
    const CalibratedShape* earlier = cal.find(shape.shape);
    require(earlier == nullptr, path, " repeats shape ", to_string(shape.shape), " of ", map.key_path("shapes"), "[",
            earlier - cal.shapes.data(), "]");
    cal.shapes.push_back(std::move(shape));
  }
  map.finish();
  return cal;
}

GpuConfig build_gpu(const YAML::Node& root) {
  yaml::MapReader map(root, "gpu");
  GpuConfig gpu;
  gpu.name = map.required_name("name");
  gpu.device_name = map.optional_string("device_name", "");
  gpu.compute_capability = map.optional_string("compute_capability", "");
  // Caps far above any real part keep byte counts inside int64.
  gpu.memory_gib = map.required_number("memory_gib", NumberBounds::left_open(0.0, 1e6));
  gpu.peak_tflops_bf16 = map.required_number("peak_tflops_bf16", NumberBounds::left_open(0.0, 1e9));
  gpu.memory_bandwidth_gbytes_per_s = map.required_number("memory_bandwidth_gbytes_per_s", NumberBounds::left_open(0.0, 1e9));
  gpu.sm_count = map.required_int("sm_count", 1, 1 << 20);
  gpu.l2_mib = map.required_number("l2_mib", NumberBounds::left_open(0.0, 1e6));
  if (auto calibration = map.optional_map("calibration")) gpu.calibration = read_calibration(*calibration);
  map.finish();
  return gpu;
}

void emit_number(YAML::Emitter& out, const char* key, double value) {
  out << YAML::Key << key << YAML::Value << yaml::format_number(value);
}

void emit_coefficients(YAML::Emitter& out, const char* key, const KernelCostCoefficients& c) {
  out << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginMap;
  emit_number(out, "launch_us", c.launch_us);
  emit_number(out, "per_list_us", c.per_list_us);
  emit_number(out, "per_tile_us", c.per_tile_us);
  emit_number(out, "per_vertical_chunk_us", c.per_vertical_chunk_us);
  // The backward's own units: written only when fitted, so configs without them read the same.
  if (c.per_key_list_us > 0.0) emit_number(out, "per_key_list_us", c.per_key_list_us);
  if (c.per_column_list_us > 0.0) emit_number(out, "per_column_list_us", c.per_column_list_us);
  if (c.per_column_item_us > 0.0) emit_number(out, "per_column_item_us", c.per_column_item_us);
  if (c.per_column_us > 0.0) emit_number(out, "per_column_us", c.per_column_us);
  if (c.per_key_block_us > 0.0) emit_number(out, "per_key_block_us", c.per_key_block_us);
  if (c.per_critical_entry_us > 0.0) emit_number(out, "per_critical_entry_us", c.per_critical_entry_us);
  out << YAML::EndMap;
}

void emit_fit(YAML::Emitter& out, const CalibrationFit& fit) {
  out << YAML::Key << "fit" << YAML::Value << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "samples" << YAML::Value << fit.samples;
  emit_number(out, "median_relative_error", fit.median_relative_error);
  emit_number(out, "max_relative_error", fit.max_relative_error);
  emit_number(out, "heldout_median_relative_error", fit.heldout_median_relative_error);
  emit_number(out, "heldout_max_relative_error", fit.heldout_max_relative_error);
  out << YAML::Key << "folds" << YAML::Value << fit.folds;
  if (fit.dealings > 1) out << YAML::Key << "dealings" << YAML::Value << fit.dealings;
  out << YAML::EndMap;
}

void emit_quoted(YAML::Emitter& out, const char* key, const std::string& value) {
  out << YAML::Key << key << YAML::Value << YAML::DoubleQuoted << value;
}

void emit_calibration(YAML::Emitter& out, const GpuCalibration& cal) {
  out << YAML::BeginMap;
  out << YAML::Key << "source" << YAML::Value << std::string(to_string(cal.source));
  if (!cal.published()) emit_quoted(out, "kernel_build", cal.kernel_build);
  emit_number(out, "gemm_efficiency", cal.gemm_efficiency);
  if (cal.published()) {
    out << YAML::Key << "sources" << YAML::Value << YAML::BeginSeq;
    for (const std::string& source : cal.sources) out << YAML::DoubleQuoted << source;
    out << YAML::EndSeq;
  } else {
    out << YAML::Key << "provenance" << YAML::Value << YAML::BeginMap;
    emit_quoted(out, "gpu", cal.provenance.gpu);
    emit_quoted(out, "driver", cal.provenance.driver);
    if (!cal.provenance.cuda.empty()) emit_quoted(out, "cuda", cal.provenance.cuda);
    emit_quoted(out, "nccl", cal.provenance.nccl);
    emit_quoted(out, "commit", cal.provenance.commit);
    emit_quoted(out, "date", cal.provenance.date);
    if (cal.provenance.sm_clock_mhz > 0.0) emit_number(out, "sm_clock_mhz", cal.provenance.sm_clock_mhz);
    out << YAML::EndMap;
  }
  out << YAML::Key << "shapes" << YAML::Value << YAML::BeginSeq;
  for (const CalibratedShape& s : cal.shapes) {
    out << YAML::BeginMap;
    out << YAML::Key << "block_q" << YAML::Value << s.shape.block_q;
    out << YAML::Key << "block_k" << YAML::Value << s.shape.block_k;
    out << YAML::Key << "head_dim" << YAML::Value << s.shape.head_dim;
    emit_coefficients(out, "forward", s.forward);
    emit_coefficients(out, "backward", s.backward);
    if (s.fit && !cal.published()) emit_fit(out, *s.fit);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::EndMap;
}

}  // namespace

std::string to_string(const KernelShape& shape) { return str(shape.block_q, "x", shape.block_k, "x", shape.head_dim); }

std::string_view to_string(CalibrationSource source) {
  return source == CalibrationSource::published ? "published" : "measured";
}

const CalibratedShape* GpuCalibration::find(const KernelShape& shape) const {
  for (const CalibratedShape& s : shapes) {
    if (s.shape == shape) return &s;
  }
  return nullptr;
}

int64_t GpuConfig::memory_bytes() const { return static_cast<int64_t>(std::llround(memory_gib * 1073741824.0)); }

GpuConfig parse_gpu(const std::string& yaml_text, std::string_view source_name) {
  const YAML::Node root = yaml::parse_document(yaml_text, source_name);
  return yaml::with_source(source_name, [&] { return build_gpu(root); });
}

GpuConfig load_gpu(const std::filesystem::path& path) {
  GpuConfig gpu = parse_gpu(yaml::read_config_file(path), path.string());
  gpu.source_path = path;
  return gpu;
}

std::string write_gpu_yaml(const GpuConfig& gpu) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << gpu.name;
  if (!gpu.device_name.empty()) out << YAML::Key << "device_name" << YAML::Value << YAML::DoubleQuoted << gpu.device_name;
  if (!gpu.compute_capability.empty()) {
    out << YAML::Key << "compute_capability" << YAML::Value << YAML::DoubleQuoted << gpu.compute_capability;
  }
  emit_number(out, "memory_gib", gpu.memory_gib);
  emit_number(out, "peak_tflops_bf16", gpu.peak_tflops_bf16);
  emit_number(out, "memory_bandwidth_gbytes_per_s", gpu.memory_bandwidth_gbytes_per_s);
  out << YAML::Key << "sm_count" << YAML::Value << gpu.sm_count;
  emit_number(out, "l2_mib", gpu.l2_mib);
  if (gpu.calibration) {
    out << YAML::Key << "calibration" << YAML::Value;
    emit_calibration(out, *gpu.calibration);
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string set_gpu_calibration(const std::string& gpu_yaml_text, const GpuCalibration& calibration,
                                std::string_view source_name) {
  // Keep every line outside the old section: the section starts at a column-0 "calibration:" and
  // runs until the next non-blank line that starts in column 0 (a key or a comment).
  std::istringstream in(gpu_yaml_text);
  std::ostringstream kept;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.rfind("calibration:", 0) == 0) {
      inside = true;
      continue;
    }
    if (inside) {
      const bool indented = !line.empty() && (line[0] == ' ' || line[0] == '\t');
      if (indented || line.find_first_not_of(" \t\r") == std::string::npos) continue;
      inside = false;
    }
    kept << line << "\n";
  }
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "calibration" << YAML::Value;
  emit_calibration(out, calibration);
  out << YAML::EndMap;
  std::string result = kept.str();
  while (result.size() >= 2 && result.compare(result.size() - 2, 2, "\n\n") == 0) result.pop_back();
  result += out.c_str();
  result += "\n";
  parse_gpu(result, source_name);  // the result must be a valid GPU config
  return result;
}

}  // namespace sparsering
