// Safetensors reading and writing for traces. Reading is written for hostile input: the container
// reader (traces/safetensors_file.hpp) validates the whole header before any tensor byte is
// copied, and the trace checks here run before validate_trace() looks at the values.
#include "traces/safetensors_trace.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/input_file.hpp"
#include "common/text_safety.hpp"
#include "traces/safetensors_file.hpp"

namespace sparsering {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the trace reader and writer copy little-endian tensor bytes directly");

using Json = nlohmann::json;

constexpr const char* kFormatName = "sparsering-trace";
constexpr int64_t kMaxDimension = int64_t{1} << 31;
constexpr int64_t kMaxLayersOrHeads = 1 << 16;

// ---- writing ---------------------------------------------------------------------------------

template <typename T>
void write_bytes(std::ostream& out, const std::vector<T>& values) {
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(T)));
}

std::string header_json(const Trace& trace) {
  Json header = Json::object();
  Json metadata = Json::object();
  metadata["format"] = kFormatName;
  metadata["version"] = std::to_string(Trace::kFormatVersion);
  metadata["model"] = trace.metadata.model;
  metadata["source"] = trace.metadata.source;
  metadata["last_q"] = std::to_string(trace.metadata.last_q);
  metadata["block_q"] = std::to_string(trace.metadata.block_q);
  metadata["block_k"] = std::to_string(trace.metadata.block_k);
  for (const auto& [key, value] : trace.metadata.provenance) metadata["provenance." + key] = value;
  header["__metadata__"] = metadata;

  const std::vector<int64_t> head_shape = {trace.samples, trace.layers, trace.heads};
  auto shape_with = [&](int64_t slots) {
    auto shape = head_shape;
    shape.push_back(slots);
    return shape;
  };
  // The I64 tensor goes first so every tensor starts at a multiple of its element size.
  uint64_t offset = 0;
  auto add = [&](const char* name, const char* dtype, const std::vector<int64_t>& shape, uint64_t bytes) {
    header[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  };
  add("sample.seq_len", "I64", {trace.samples}, trace.sample_seq_len.size() * sizeof(int64_t));
  add("vertical.index", "I32", shape_with(trace.vertical_candidates), trace.vertical_index.size() * sizeof(int32_t));
  add("vertical.mass", "F32", shape_with(trace.vertical_candidates), trace.vertical_mass.size() * sizeof(float));
  add("slash.offset", "I32", shape_with(trace.slash_candidates), trace.slash_offset.size() * sizeof(int32_t));
  add("slash.mass", "F32", shape_with(trace.slash_candidates), trace.slash_mass.size() * sizeof(float));

  std::string text = header.dump();
  // Python's safetensors pads the header with spaces so the data section is 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

// ---- reading ----------------------------------------------------------------------------------

// The container checks (header, entries, tiling, metadata strings) are SafetensorsFile's; this
// reader adds what makes a container a trace: the metadata keys, the five tensors and their
// agreeing shapes, and validate_trace().
class Reader {
 public:
  Reader(std::span<const std::byte> bytes, std::string_view name) : file_(SafetensorsFile::parse(bytes, name)) {}

  Trace parse() const {
    Trace trace;
    if (!file_.metadata()) fail("has no __metadata__ entry; not a sparsering trace");
    read_metadata(*file_.metadata(), trace.metadata);
    read_tensors(trace);
    try {
      validate_trace(trace);
    } catch (const InputError& e) {
      fail(e.what());
    }
    return trace;
  }

 private:
  template <typename... Args>
  [[noreturn]] void fail(Args&&... message) const {
    file_.fail(std::forward<Args>(message)...);
  }

  int64_t metadata_int(const std::map<std::string, std::string>& values, const char* key) const {
    const auto it = values.find(key);
    if (it == values.end()) fail("__metadata__ has no '", key, "'");
    const std::string& text = it->second;
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value < 1 || value > kMaxDimension) {
      fail("__metadata__ '", key, "' must be an integer in [1, 2^31], got '", text, "'");
    }
    return value;
  }

  void read_metadata(const std::map<std::string, std::string>& values, TraceMetadata& out) const {
    const auto format = values.find("format");
    if (format == values.end() || format->second != kFormatName) {
      fail("__metadata__ 'format' must be '", kFormatName, "', got ",
           format == values.end() ? std::string("nothing") : "'" + format->second + "'");
    }
    const auto version = values.find("version");
    if (version == values.end() || version->second != std::to_string(Trace::kFormatVersion)) {
      fail("__metadata__ 'version' must be '", Trace::kFormatVersion, "' (the version this reader knows), got ",
           version == values.end() ? std::string("nothing") : "'" + version->second + "'");
    }
    for (const char* key : {"model", "source"}) {
      if (values.count(key) == 0) fail("__metadata__ has no '", key, "'");
    }
    out.model = values.at("model");
    // Printed by `trace info` and carried into simulator outputs: no control characters.
    try {
      require_safe_name(out.model, "__metadata__ 'model'");
    } catch (const InputError& e) {
      fail(e.what());
    }
    out.source = values.at("source");
    out.last_q = metadata_int(values, "last_q");
    out.block_q = metadata_int(values, "block_q");
    out.block_k = metadata_int(values, "block_k");
    static const std::string kProvenance = "provenance.";
    for (const auto& [key, value] : values) {
      if (key.rfind(kProvenance, 0) == 0) {
        out.provenance[key.substr(kProvenance.size())] = value;
      } else if (key != "format" && key != "version" && key != "model" && key != "source" && key != "last_q" &&
                 key != "block_q" && key != "block_k") {
        out.provenance[key] = value;
      }
    }
  }

  static std::string shape_text(const std::vector<int64_t>& shape) {
    std::string text = "[";
    for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
    return text + "]";
  }

  void read_tensors(Trace& trace) const {
    const auto& vertical_index = file_.require_tensor("vertical.index", "I32", 4);
    const auto& vertical_mass = file_.require_tensor("vertical.mass", "F32", 4);
    const auto& slash_offset = file_.require_tensor("slash.offset", "I32", 4);
    const auto& slash_mass = file_.require_tensor("slash.mass", "F32", 4);
    const auto& seq_len = file_.require_tensor("sample.seq_len", "I64", 1);
    if (vertical_mass.shape != vertical_index.shape) {
      fail("tensor 'vertical.mass' has shape ", shape_text(vertical_mass.shape), " but 'vertical.index' has ",
           shape_text(vertical_index.shape));
    }
    if (slash_mass.shape != slash_offset.shape) {
      fail("tensor 'slash.mass' has shape ", shape_text(slash_mass.shape), " but 'slash.offset' has ",
           shape_text(slash_offset.shape));
    }
    for (size_t d = 0; d < 3; ++d) {
      if (slash_offset.shape[d] != vertical_index.shape[d]) {
        fail("tensors 'slash.offset' ", shape_text(slash_offset.shape), " and 'vertical.index' ",
             shape_text(vertical_index.shape), " disagree in dimension ", d, " (S, L, H must match)");
      }
    }
    if (seq_len.shape[0] != vertical_index.shape[0]) {
      fail("tensor 'sample.seq_len' has ", seq_len.shape[0], " samples but 'vertical.index' has ",
           vertical_index.shape[0]);
    }
    trace.samples = vertical_index.shape[0];
    trace.layers = vertical_index.shape[1];
    trace.heads = vertical_index.shape[2];
    trace.vertical_candidates = vertical_index.shape[3];
    trace.slash_candidates = slash_offset.shape[3];
    if (trace.samples < 1 || trace.layers < 1 || trace.heads < 1) {
      fail("tensor 'vertical.index' has shape ", shape_text(vertical_index.shape), "; S, L and H must be >= 1");
    }
    if (trace.layers > kMaxLayersOrHeads || trace.heads > kMaxLayersOrHeads) {
      fail("tensor 'vertical.index' has shape ", shape_text(vertical_index.shape),
           "; L and H must be <= ", kMaxLayersOrHeads);
    }
    // With no candidate slot at all, S x L x H would be unbounded by the file size.
    if (trace.vertical_candidates + trace.slash_candidates < 1) {
      fail("tensors 'vertical.index' and 'slash.offset' both have 0 candidate slots");
    }
    trace.vertical_index = file_.read<int32_t>(vertical_index);
    trace.vertical_mass = file_.read<float>(vertical_mass);
    trace.slash_offset = file_.read<int32_t>(slash_offset);
    trace.slash_mass = file_.read<float>(slash_mass);
    trace.sample_seq_len = file_.read<int64_t>(seq_len);
  }

  SafetensorsFile file_;
};

void write_validated(std::ostream& out, const Trace& trace) {
  const std::string header = header_json(trace);
  const uint64_t header_bytes = header.size();
  char length[8];
  std::memcpy(length, &header_bytes, 8);
  out.write(length, 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  write_bytes(out, trace.sample_seq_len);
  write_bytes(out, trace.vertical_index);
  write_bytes(out, trace.vertical_mass);
  write_bytes(out, trace.slash_offset);
  write_bytes(out, trace.slash_mass);
}

}  // namespace

void write_trace(std::ostream& out, const Trace& trace) {
  validate_trace(trace);
  write_validated(out, trace);
}

std::string serialize_trace(const Trace& trace) {
  std::ostringstream out(std::ios::binary);
  write_trace(out, trace);
  return std::move(out).str();
}

void write_trace(const std::filesystem::path& path, const Trace& trace, bool overwrite) {
  validate_trace(trace);  // before the output file is created
  AtomicOutputFile file(path, overwrite);
  write_validated(file.stream(), trace);
  file.commit();
}

Trace parse_trace(std::span<const std::byte> bytes, std::string_view name) { return Reader(bytes, name).parse(); }

Trace read_trace(const std::filesystem::path& path) {
  // The container is opened first: it reads only the 8-byte length and the JSON header and checks
  // them against the file size, so a huge, sparse or hostile file fails before its data is read.
  (void)SafetensorsFile::open(path);
  InputFile in(path, std::numeric_limits<int64_t>::max());
  std::vector<std::byte> bytes(static_cast<size_t>(in.size_bytes()));
  in.read_exactly(reinterpret_cast<char*>(bytes.data()), in.size_bytes());
  return parse_trace(bytes, path.string());
}

}  // namespace sparsering
