// GPU config parsing, emission and calibration replacement. Calibration coefficients are times in
// microseconds; the bounds only exclude values no fit can produce (negative or non-finite times).
#include "sim/config/gpu_config.hpp"

#include <cmath>
#include <sstream>

#include "common/error.hpp"
#include "common/yaml_reader.hpp"

namespace sparsering {
namespace {

using yaml::NumberBounds;

KernelCostCoefficients read_coefficients(yaml::MapReader map) {
  KernelCostCoefficients c;
  c.launch_us = map.required_number("launch_us", NumberBounds::non_negative());
  c.per_tile_us = map.required_number("per_tile_us", NumberBounds::positive());
  c.per_vertical_chunk_us = map.required_number("per_vertical_chunk_us", NumberBounds::non_negative());
  map.finish();
  return c;
}

bool is_iso_date(const std::string& text) {
  if (text.size() < 10) return false;
  for (size_t i = 0; i < 10; ++i) {
    const bool dash = i == 4 || i == 7;
    if (dash ? text[i] != '-' : (text[i] < '0' || text[i] > '9')) return false;
  }
  return true;
}

GpuCalibration read_calibration(yaml::MapReader map) {
  GpuCalibration cal;
  cal.block_q = map.required_int("block_q", 1, 4096);
  cal.block_k = map.required_int("block_k", 1, 4096);
  cal.head_dim = map.required_int("head_dim", 1, 4096);
  cal.forward = read_coefficients(map.required_map("forward"));
  cal.backward = read_coefficients(map.required_map("backward"));
  cal.gemm_efficiency = map.required_number("gemm_efficiency", NumberBounds::left_open(0.0, 1.0));
  cal.fit_samples = map.optional_int("fit_samples", 0, 0);
  cal.fit_max_relative_error = map.optional_number("fit_max_relative_error", 0.0, NumberBounds::non_negative());
  yaml::MapReader prov = map.required_map("provenance");
  cal.provenance.gpu = prov.required_string("gpu");
  cal.provenance.driver = prov.required_string("driver");
  cal.provenance.cuda = prov.optional_string("cuda", "");
  cal.provenance.nccl = prov.required_string("nccl");
  cal.provenance.commit = prov.required_string("commit");
  cal.provenance.date = prov.required_string("date");
  require(is_iso_date(cal.provenance.date), prov.key_path("date"), " must be an ISO 8601 date (YYYY-MM-DD...), got \"",
          cal.provenance.date.substr(0, 48), "\"");
  prov.finish();
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
  out << YAML::Key << key << YAML::Value << YAML::BeginMap;
  emit_number(out, "launch_us", c.launch_us);
  emit_number(out, "per_tile_us", c.per_tile_us);
  emit_number(out, "per_vertical_chunk_us", c.per_vertical_chunk_us);
  out << YAML::EndMap;
}

void emit_calibration(YAML::Emitter& out, const GpuCalibration& cal) {
  out << YAML::BeginMap;
  out << YAML::Key << "block_q" << YAML::Value << cal.block_q;
  out << YAML::Key << "block_k" << YAML::Value << cal.block_k;
  out << YAML::Key << "head_dim" << YAML::Value << cal.head_dim;
  emit_coefficients(out, "forward", cal.forward);
  emit_coefficients(out, "backward", cal.backward);
  emit_number(out, "gemm_efficiency", cal.gemm_efficiency);
  if (cal.fit_samples > 0) out << YAML::Key << "fit_samples" << YAML::Value << cal.fit_samples;
  if (cal.fit_max_relative_error > 0) emit_number(out, "fit_max_relative_error", cal.fit_max_relative_error);
  out << YAML::Key << "provenance" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "gpu" << YAML::Value << YAML::DoubleQuoted << cal.provenance.gpu;
  out << YAML::Key << "driver" << YAML::Value << YAML::DoubleQuoted << cal.provenance.driver;
  if (!cal.provenance.cuda.empty()) out << YAML::Key << "cuda" << YAML::Value << YAML::DoubleQuoted << cal.provenance.cuda;
  out << YAML::Key << "nccl" << YAML::Value << YAML::DoubleQuoted << cal.provenance.nccl;
  out << YAML::Key << "commit" << YAML::Value << YAML::DoubleQuoted << cal.provenance.commit;
  out << YAML::Key << "date" << YAML::Value << YAML::DoubleQuoted << cal.provenance.date;
  out << YAML::EndMap;
  out << YAML::EndMap;
}

}  // namespace

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
