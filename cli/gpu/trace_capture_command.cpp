// `sparsering trace capture --qk DUMP --out T.safetensors`: the CUDA pattern estimator (both
// passes of kernels/cuda/estimate_pattern.hpp, one rank holding every key) on a Q/K dump written
// by the Python capture (`python3 -m sparsering_capture ... --dump-qk DUMP`; format in
// traces/capture/sparsering_capture/qk_dump.py and docs/capture.md), candidates selected with
// select_pattern_candidates (kernels/reference/pattern_candidates.hpp) and the trace written with
// the C++ writer. The dump is read one (sample, layer) at a time, so host and GPU memory hold one
// layer's Q/K and masses. Every manifest field is checked before use, and every layer file is
// read through the safetensors container reader (traces/safetensors_file.hpp) with its header
// checked before the GPU is touched; errors are InputErrors naming the file and field. Tested
// against the Python capture on the same dump by tests/capture/agreement_test.py (label gpu).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/gpu/gpu_commands.hpp"
#include "common/error.hpp"
#include "common/input_file.hpp"
#include "kernels/attention_params.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/estimate_pattern.hpp"
#include "kernels/reference/pattern_candidates.hpp"
#include "core/token_layout.hpp"
#include "traces/safetensors_file.hpp"
#include "traces/safetensors_trace.hpp"
#include "traces/trace.hpp"

namespace sparsering::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct CaptureOptions {
  std::string qk_dir;
  int64_t slots = -1;
  int64_t vertical_slots = -1;
  int64_t slash_slots = -1;
  int device = 0;
};

struct DumpSample {
  int64_t seq_len_tokens = 0;
  std::vector<std::string> files;  ///< one per layer, inside the dump folder
};

/// The dump's qk_dump.json, validated.
struct DumpManifest {
  std::string model;
  int64_t layers = 0;
  int32_t q_heads = 0;
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
  int64_t last_q = 0;
  double softmax_scale = 0.0;
  std::vector<DumpSample> samples;
};

int64_t positive_int(const json& doc, const char* key, int64_t max, const std::string& where) {
  const auto it = doc.find(key);
  require(it != doc.end() && it->is_number_integer(), where, ": '", key, "' must be an integer");
  const auto value = it->get<int64_t>();
  require(value >= 1 && value <= max, where, ": '", key, "' = ", value, " must be in [1, ", max, "]");
  return value;
}

DumpManifest read_manifest(const fs::path& dir) {
  const fs::path path = dir / "qk_dump.json";
  const std::string where = path.string();
  std::string text;
  try {
    text = read_file(path);
  } catch (const InputError& e) {
    throw InputError(str(where, ": cannot open the Q/K dump manifest (is ", dir.string(), " a dump folder?): ", e.what()));
  }
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw InputError(str(where, ": not valid JSON: ", e.what()));
  }
  require(doc.is_object(), where, ": must be a JSON object");
  require(doc.value("format", json()) == "sparsering-qk-dump" && doc.value("version", json()) == 1, where,
          ": format/version must be sparsering-qk-dump/1");
  DumpManifest m;
  const auto model = doc.find("model");
  m.model = model != doc.end() && model->is_string() ? model->get<std::string>() : "unknown";
  m.layers = positive_int(doc, "layers", 1 << 16, where);
  m.q_heads = static_cast<int32_t>(positive_int(doc, "q_heads", 1 << 12, where));
  m.kv_heads = static_cast<int32_t>(positive_int(doc, "kv_heads", 1 << 12, where));
  m.head_dim = static_cast<int32_t>(positive_int(doc, "head_dim", 1 << 12, where));
  m.last_q = positive_int(doc, "last_q", 1 << 20, where);
  require(m.q_heads % m.kv_heads == 0, where, ": q_heads = ", m.q_heads, " must be a multiple of kv_heads = ",
          m.kv_heads);
  require(m.head_dim == 64 || m.head_dim == 128, where, ": head_dim = ", m.head_dim,
          " is not supported by the CUDA estimator (64 or 128)");
  const auto scale = doc.find("softmax_scale");
  require(scale != doc.end() && scale->is_number(), where, ": 'softmax_scale' must be a number");
  m.softmax_scale = scale->get<double>();
  require(std::isfinite(m.softmax_scale) && m.softmax_scale > 0.0, where, ": softmax_scale = ", m.softmax_scale,
          " must be finite and > 0");
  const auto samples = doc.find("samples");
  require(samples != doc.end() && samples->is_array() && !samples->empty(), where,
          ": 'samples' must be a non-empty list");
  for (size_t s = 0; s < samples->size(); ++s) {
    const json& entry = (*samples)[s];
    const std::string at = str(where, ": samples[", s, "]");
    require(entry.is_object(), at, " must be an object");
    DumpSample sample;
    sample.seq_len_tokens = positive_int(entry, "seq_len", std::numeric_limits<int32_t>::max() - 1, at);
    require(sample.seq_len_tokens >= m.last_q, at, ".seq_len = ", sample.seq_len_tokens, " is below last_q = ",
            m.last_q);
    const auto files = entry.find("files");
    require(files != entry.end() && files->is_array() && static_cast<int64_t>(files->size()) == m.layers, at,
            ".files must list one file per layer (", m.layers, ")");
    for (size_t l = 0; l < files->size(); ++l) {
      const json& file = (*files)[l];
      require(file.is_string(), at, ".files[", l, "] must be a string");
      const auto name = file.get<std::string>();
      require(!name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
                  name.find('\\') == std::string::npos,
              at, ".files[", l, "] = '", name, "' must be a plain file name inside the dump folder");
      sample.files.push_back(name);
    }
    m.samples.push_back(std::move(sample));
  }
  return m;
}

/// The BF16 tensor `name` of a dump layer file, checked to have shape `expected` (from
/// qk_dump.json). The container itself was validated when `file` was opened.
const SafetensorsTensor& dump_tensor(const SafetensorsFile& file, const char* name,
                                     const std::vector<int64_t>& expected) {
  const SafetensorsTensor& tensor = file.require_tensor(name, "BF16", expected.size());
  for (size_t d = 0; d < expected.size(); ++d) {
    if (tensor.shape[d] != expected[d]) {
      file.fail("tensor '", name, "' dimension ", d, " is ", tensor.shape[d], ", expected ", expected[d],
                " (from qk_dump.json)");
    }
  }
  return tensor;
}

struct LayerMasses {
  std::vector<float> vertical;  ///< (Hq, N) by key position
  std::vector<float> slash;     ///< (Hq, N) by offset
};

/// Both estimator passes on one (sample, layer), all keys on this GPU (contiguous layout, W = 1).
LayerMasses estimate_layer(const DumpManifest& m, int64_t seq_len, const std::vector<bf16_bits>& q_last,
                           const std::vector<bf16_bits>& keys, cudaStream_t stream) {
  const int64_t rows = m.q_heads;
  DeviceBuffer<bf16_bits> q_device(q_last);
  DeviceBuffer<bf16_bits> k_device(keys);
  DeviceBuffer<float> row_max(static_cast<size_t>(rows * m.last_q));
  DeviceBuffer<float> row_sum(static_cast<size_t>(rows * m.last_q));
  DeviceBuffer<float> vertical(static_cast<size_t>(rows * seq_len));
  DeviceBuffer<float> slash(static_cast<size_t>(rows * seq_len));
  slash.fill_bytes(0);

  EstimateParams params;
  params.shape = AttentionShape{1, m.q_heads, m.kv_heads, m.head_dim, m.last_q, seq_len};
  params.position = RingPosition{make_token_layout(LayoutKind::contiguous, seq_len, 1), 0, 0};
  params.softmax_scale = static_cast<float>(m.softmax_scale);
  params.q_last = q_device.data();
  params.k = k_device.data();
  params.row_max = row_max.data();
  params.row_sum = row_sum.data();
  params.vertical_mass = vertical.data();
  params.slash_mass = slash.data();
  launch_estimate_pattern_pass1(params, stream);
  launch_estimate_pattern_pass2(params, stream);
  SPARSERING_CUDA_CHECK(cudaStreamSynchronize(stream));
  return {vertical.download(), slash.download()};
}

void run_capture(const CaptureOptions& options, const GlobalOptions& global) {
  const auto start = std::chrono::steady_clock::now();
  require(!global.out.empty(), "trace capture needs --out FILE.safetensors");
  if (!global.force && fs::exists(global.out)) {
    throw InputError(str(global.out, " already exists; pass --force to overwrite it"));
  }
  const auto pick = [&options](int64_t specific) { return specific >= 0 ? specific : (options.slots >= 0 ? options.slots : 8192); };
  const int64_t vertical_slots = pick(options.vertical_slots);
  const int64_t slash_slots = pick(options.slash_slots);
  require(vertical_slots <= (int64_t{1} << 24) && slash_slots <= (int64_t{1} << 24),
          "slot counts must be at most 2^24 per head");
  const DumpManifest m = read_manifest(options.qk_dir);
  // Every layer file's header is checked before the GPU is touched: a broken dump fails at once.
  for (const DumpSample& sample : m.samples) {
    for (const std::string& name : sample.files) {
      const SafetensorsFile file = SafetensorsFile::open(fs::path(options.qk_dir) / name);
      (void)dump_tensor(file, "q_last", {m.q_heads, m.last_q, m.head_dim});
      (void)dump_tensor(file, "k", {m.kv_heads, sample.seq_len_tokens, m.head_dim});
    }
  }

  int devices = 0;
  SPARSERING_CUDA_CHECK(cudaGetDeviceCount(&devices));
  require(options.device >= 0 && options.device < devices, "--device ", options.device, " is outside [0, ", devices,
          ")");
  SPARSERING_CUDA_CHECK(cudaSetDevice(options.device));
  cudaDeviceProp properties{};
  SPARSERING_CUDA_CHECK(cudaGetDeviceProperties(&properties, options.device));
  cudaStream_t stream = nullptr;
  SPARSERING_CUDA_CHECK(cudaStreamCreate(&stream));
  const std::unique_ptr<CUstream_st, void (*)(cudaStream_t)> stream_owner(stream,
                                                                          [](cudaStream_t s) { (void)cudaStreamDestroy(s); });

  Trace trace;
  trace.metadata.model = m.model;
  trace.metadata.source = "captured";
  trace.metadata.last_q = m.last_q;
  trace.metadata.provenance = {{"capture", "sparsering trace capture (CUDA estimator)"},
                               {"qk_dump", options.qk_dir},
                               {"softmax_scale", str(m.softmax_scale)},
                               {"kv_heads", str(m.kv_heads)},
                               {"gpu", properties.name}};
  trace.samples = static_cast<int64_t>(m.samples.size());
  trace.layers = m.layers;
  trace.heads = m.q_heads;
  trace.vertical_candidates = vertical_slots;
  trace.slash_candidates = slash_slots;
  const auto total = [&](int64_t slots) { return static_cast<size_t>(trace.samples * trace.layers * trace.heads * slots); };
  trace.vertical_index.assign(total(vertical_slots), -1);
  trace.vertical_mass.assign(total(vertical_slots), 0.0f);
  trace.slash_offset.assign(total(slash_slots), -1);
  trace.slash_mass.assign(total(slash_slots), 0.0f);

  for (int64_t s = 0; s < trace.samples; ++s) {
    const DumpSample& sample = m.samples[static_cast<size_t>(s)];
    const int64_t n = sample.seq_len_tokens;
    trace.sample_seq_len.push_back(n);
    for (int64_t l = 0; l < m.layers; ++l) {
      const SafetensorsFile file =
          SafetensorsFile::open(fs::path(options.qk_dir) / sample.files[static_cast<size_t>(l)]);
      // The file's byte order is little-endian, as is every host the kernels run on.
      const auto q_last = file.read<bf16_bits>(dump_tensor(file, "q_last", {m.q_heads, m.last_q, m.head_dim}));
      const auto keys = file.read<bf16_bits>(dump_tensor(file, "k", {m.kv_heads, n, m.head_dim}));
      const LayerMasses masses = estimate_layer(m, n, q_last, keys, stream);
      for (int64_t h = 0; h < m.q_heads; ++h) {
        const auto head = static_cast<size_t>(h * n);
        const PatternCandidates candidates = select_pattern_candidates(
            std::span<const float>(masses.vertical.data() + head, static_cast<size_t>(n)),
            std::span<const float>(masses.slash.data() + head, static_cast<size_t>(n)), vertical_slots, slash_slots);
        const auto v_at = static_cast<std::ptrdiff_t>(trace.head_offset(s, l, h, vertical_slots));
        const auto s_at = static_cast<std::ptrdiff_t>(trace.head_offset(s, l, h, slash_slots));
        std::copy(candidates.vertical_index.begin(), candidates.vertical_index.end(), trace.vertical_index.begin() + v_at);
        std::copy(candidates.vertical_mass.begin(), candidates.vertical_mass.end(), trace.vertical_mass.begin() + v_at);
        std::copy(candidates.slash_offset.begin(), candidates.slash_offset.end(), trace.slash_offset.begin() + s_at);
        std::copy(candidates.slash_mass.begin(), candidates.slash_mass.end(), trace.slash_mass.begin() + s_at);
      }
      if (global.verbosity > 0) std::cerr << "sample " << s << " layer " << l << " estimated\n";
    }
  }
  write_trace(global.out, trace, global.force);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (global.format == OutputFormat::json) {
    const json doc = {{"out", global.out},     {"samples", trace.samples},         {"layers", trace.layers},
                      {"heads", trace.heads},  {"seq_len_tokens", trace.sample_seq_len},
                      {"gpu", properties.name}, {"wall_s", seconds}};
    std::cout << doc.dump(2) << '\n';
  } else {
    std::cout << "wrote " << global.out << ": " << trace.samples << " samples x " << trace.layers << " layers x "
              << trace.heads << " heads estimated on " << properties.name << " in " << seconds << " s\n";
  }
}

}  // namespace

void add_trace_capture_command(CLI::App& trace, const GlobalOptions& global) {
  auto options = std::make_shared<CaptureOptions>();
  auto* command = trace.add_subcommand(
      "capture",
      "Estimate vertical/slash candidates with the CUDA estimator from a Q/K dump written by\n"
      "`python3 -m sparsering_capture --dump-qk DIR` and write them as a trace (--out T.safetensors)");
  command->add_option("--qk", options->qk_dir, "Q/K dump folder (holds qk_dump.json)")->required();
  command->add_option("--slots", options->slots, "Candidate slots per head for verticals and slashes (default 8192)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  command->add_option("--vertical-slots", options->vertical_slots, "Vertical candidate slots per head")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  command->add_option("--slash-slots", options->slash_slots, "Slash candidate slots per head")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  command->add_option("--device", options->device, "CUDA device index (default 0)");
  command->callback([options, &global] { run_capture(*options, global); });
}

}  // namespace sparsering::cli
