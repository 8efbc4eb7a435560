// Safetensors reading and writing for traces. The reader is written for hostile input: every
// length and offset is checked against the buffer before use, integer products are checked for
// overflow, the JSON nesting depth is bounded before parsing, and tensor bytes are copied with
// memcpy only after the whole header has been validated.
#include "traces/safetensors_trace.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/error.hpp"

namespace sparsering {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the trace reader and writer copy little-endian tensor bytes directly");

using Json = nlohmann::json;

constexpr const char* kFormatName = "sparsering-trace";
constexpr int kMaxJsonDepth = 8;  // a valid header nests 3 deep: {tensor: {shape: [...]}}
constexpr int64_t kMaxDimension = int64_t{1} << 31;
constexpr int64_t kMaxLayersOrHeads = 1 << 16;

const std::map<std::string, int64_t>& dtype_sizes() {
  static const std::map<std::string, int64_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"I64", 8},     {"U64", 8}, {"F64", 8}};
  return sizes;
}

struct TensorEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data section
  uint64_t end = 0;
};

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

// ---- reading ---------------------------------------------------------------------------------

class Reader {
 public:
  Reader(std::span<const std::byte> bytes, std::string_view name) : bytes_(bytes), name_(name) {}

  Trace parse() {
    const std::string_view header = header_text();
    check_depth(header);
    Json root;
    try {
      root = Json::parse(header.begin(), header.end());
    } catch (const Json::exception& e) {
      fail("JSON header does not parse: ", e.what());
    }
    if (!root.is_object()) fail("JSON header must be an object, got ", root.type_name());
    std::vector<TensorEntry> entries;
    const Json* metadata = nullptr;
    for (auto it = root.begin(); it != root.end(); ++it) {
      if (it.key() == "__metadata__") {
        metadata = &it.value();
      } else {
        entries.push_back(tensor_entry(it.key(), it.value()));
      }
    }
    check_tiling(entries);
    Trace trace;
    if (metadata == nullptr) fail("has no __metadata__ entry; not a sparsering trace");
    read_metadata(*metadata, trace.metadata);
    read_tensors(entries, trace);
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
    throw InputError(str(name_, ": ", std::forward<Args>(message)...));
  }

  std::string_view header_text() {
    if (bytes_.size() < 8) fail("file is ", bytes_.size(), " bytes, too short for the 8-byte header length");
    uint64_t header_bytes = 0;
    std::memcpy(&header_bytes, bytes_.data(), 8);
    if (header_bytes == 0) fail("header length is 0");
    if (header_bytes > kMaxTraceHeaderBytes) {
      fail("header length ", header_bytes, " bytes exceeds the limit of ", kMaxTraceHeaderBytes, " bytes");
    }
    if (header_bytes > bytes_.size() - 8) {
      fail("header length ", header_bytes, " bytes runs past the end of the file (", bytes_.size(), " bytes)");
    }
    data_ = bytes_.subspan(8 + header_bytes);
    return {reinterpret_cast<const char*>(bytes_.data()) + 8, static_cast<size_t>(header_bytes)};
  }

  // Bounds the nesting depth before the JSON parser sees the text, so deep nesting cannot exhaust
  // the stack in the parser or in the destructor of the parsed value.
  void check_depth(std::string_view text) const {
    int depth = 0;
    bool in_string = false;
    bool escaped = false;
    for (const char c : text) {
      if (in_string) {
        if (escaped) {
          escaped = false;
        } else if (c == '\\') {
          escaped = true;
        } else if (c == '"') {
          in_string = false;
        }
        continue;
      }
      if (c == '"') {
        in_string = true;
      } else if (c == '[' || c == '{') {
        if (++depth > kMaxJsonDepth) fail("JSON header nests deeper than ", kMaxJsonDepth, " levels");
      } else if (c == ']' || c == '}') {
        --depth;
      }
    }
  }

  static bool as_non_negative(const Json& value, uint64_t& out) {
    if (!value.is_number_unsigned() && !value.is_number_integer()) return false;
    if (value.is_number_integer() && !value.is_number_unsigned() && value.get<int64_t>() < 0) return false;
    out = value.get<uint64_t>();
    return true;
  }

  TensorEntry tensor_entry(const std::string& name, const Json& info) const {
    if (!info.is_object()) fail("tensor '", name, "': entry must be an object, got ", info.type_name());
    for (auto it = info.begin(); it != info.end(); ++it) {
      if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets") {
        fail("tensor '", name, "': unknown key '", it.key(), "' (expected dtype, shape, data_offsets)");
      }
    }
    TensorEntry entry;
    entry.name = name;
    const auto dtype = info.find("dtype");
    if (dtype == info.end() || !dtype->is_string()) fail("tensor '", name, "': dtype is missing or not a string");
    entry.dtype = dtype->get<std::string>();
    const auto size = dtype_sizes().find(entry.dtype);
    if (size == dtype_sizes().end()) fail("tensor '", name, "': unknown dtype '", entry.dtype, "'");

    const auto shape = info.find("shape");
    if (shape == info.end() || !shape->is_array()) fail("tensor '", name, "': shape is missing or not a list");
    if (shape->size() > 8) fail("tensor '", name, "': shape has ", shape->size(), " dimensions (at most 8)");
    uint64_t elements = 1;
    for (const auto& dim : *shape) {
      uint64_t value = 0;
      if (!as_non_negative(dim, value) || value >= static_cast<uint64_t>(kMaxDimension)) {
        fail("tensor '", name, "': shape ", shape->dump(), " has a dimension that is not an integer in [0, 2^31)");
      }
      entry.shape.push_back(static_cast<int64_t>(value));
      if (__builtin_mul_overflow(elements, value, &elements) || elements > data_.size())
        fail("tensor '", name, "': shape ", shape->dump(), " needs more bytes than the file has");
    }

    const auto offsets = info.find("data_offsets");
    if (offsets == info.end() || !offsets->is_array() || offsets->size() != 2 ||
        !as_non_negative((*offsets)[0], entry.begin) || !as_non_negative((*offsets)[1], entry.end)) {
      fail("tensor '", name, "': data_offsets must be a list of two non-negative integers");
    }
    if (entry.begin > entry.end)
      fail("tensor '", name, "': data_offsets [", entry.begin, ", ", entry.end, "] are reversed");
    if (entry.end > data_.size()) {
      fail("tensor '", name, "': data_offsets end ", entry.end, " lies past the data section (", data_.size(),
           " bytes)");
    }
    const uint64_t expected = elements * static_cast<uint64_t>(size->second);
    if (entry.end - entry.begin != expected) {
      fail("tensor '", name, "': data_offsets [", entry.begin, ", ", entry.end, "] span ", entry.end - entry.begin,
           " bytes, but dtype ", entry.dtype, " and shape ", shape->dump(), " need ", expected);
    }
    return entry;
  }

  // The tensors must cover the data section exactly, like the safetensors library requires.
  void check_tiling(std::vector<TensorEntry>& entries) const {
    std::sort(entries.begin(), entries.end(), [](const TensorEntry& a, const TensorEntry& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t position = 0;
    const TensorEntry* previous = nullptr;
    for (const auto& entry : entries) {
      if (entry.begin < position) {
        fail("tensors '", previous->name, "' and '", entry.name, "' overlap ('", previous->name, "' ends at byte ",
             position, ", '", entry.name, "' begins at ", entry.begin, ")");
      }
      if (entry.begin > position) {
        fail("bytes [", position, ", ", entry.begin, ") of the data section belong to no tensor (before '", entry.name,
             "')");
      }
      position = entry.end;
      previous = &entry;
    }
    if (position != data_.size()) {
      fail("the data section has ", data_.size() - position, " bytes after the last tensor (tensors end at ", position,
           ", data is ", data_.size(), " bytes)");
    }
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

  void read_metadata(const Json& metadata, TraceMetadata& out) const {
    if (!metadata.is_object()) fail("__metadata__ must be an object of strings, got ", metadata.type_name());
    std::map<std::string, std::string> values;
    for (auto it = metadata.begin(); it != metadata.end(); ++it) {
      if (!it.value().is_string())
        fail("__metadata__ '", it.key(), "' must be a string (safetensors metadata holds strings only)");
      values[it.key()] = it.value().get<std::string>();
    }
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
    out.model = values["model"];
    out.source = values["source"];
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

  const TensorEntry& find(const std::vector<TensorEntry>& entries, const char* name, const char* dtype,
                          size_t rank) const {
    const auto it = std::find_if(entries.begin(), entries.end(), [&](const TensorEntry& e) { return e.name == name; });
    if (it == entries.end()) fail("required tensor '", name, "' is missing");
    if (it->dtype != dtype) fail("tensor '", name, "' has dtype ", it->dtype, ", expected ", dtype);
    if (it->shape.size() != rank) fail("tensor '", name, "' has ", it->shape.size(), " dimensions, expected ", rank);
    return *it;
  }

  template <typename T>
  void copy(const TensorEntry& entry, std::vector<T>& out) const {
    out.resize(static_cast<size_t>((entry.end - entry.begin) / sizeof(T)));
    if (!out.empty()) std::memcpy(out.data(), data_.data() + entry.begin, static_cast<size_t>(entry.end - entry.begin));
  }

  static std::string shape_text(const std::vector<int64_t>& shape) {
    std::string text = "[";
    for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
    return text + "]";
  }

  void read_tensors(const std::vector<TensorEntry>& entries, Trace& trace) const {
    const auto& vertical_index = find(entries, "vertical.index", "I32", 4);
    const auto& vertical_mass = find(entries, "vertical.mass", "F32", 4);
    const auto& slash_offset = find(entries, "slash.offset", "I32", 4);
    const auto& slash_mass = find(entries, "slash.mass", "F32", 4);
    const auto& seq_len = find(entries, "sample.seq_len", "I64", 1);
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
    copy(vertical_index, trace.vertical_index);
    copy(vertical_mass, trace.vertical_mass);
    copy(slash_offset, trace.slash_offset);
    copy(slash_mass, trace.slash_mass);
    copy(seq_len, trace.sample_seq_len);
  }

  std::span<const std::byte> bytes_;
  std::span<const std::byte> data_;
  std::string name_;
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
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(str(path.string(), " is a folder, not a trace file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(str("cannot open trace file ", path.string()));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw InputError(str("cannot read trace file ", path.string()));
  in.seekg(0, std::ios::beg);
  std::vector<std::byte> bytes(static_cast<size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), size);
  if (in.gcount() != size) throw InputError(str("cannot read trace file ", path.string(), " (short read)"));
  return parse_trace(bytes, path.string());
}

}  // namespace sparsering
