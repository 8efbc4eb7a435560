// Safetensors container reading. Every length and offset is checked against the container size
// before use, element counts are checked for overflow, and the JSON nesting depth is bounded
// before the JSON parser sees the header, because the input may be hostile (fuzzed by
// tests/fuzz/trace_reader_fuzz.cpp through the trace reader).
#include "traces/safetensors_file.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/input_file.hpp"

namespace sparsering {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the header length and tensor bytes are little-endian and copied directly");

using Json = nlohmann::json;

constexpr int kMaxJsonDepth = 8;  // a valid header nests 3 deep: {tensor: {shape: [...]}}
constexpr uint64_t kMaxDimension = uint64_t{1} << 31;
constexpr size_t kMaxRank = 8;
constexpr size_t kLengthBytes = 8;

bool as_non_negative(const Json& value, uint64_t& out) {
  if (!value.is_number_unsigned() && !value.is_number_integer()) return false;
  if (value.is_number_integer() && !value.is_number_unsigned() && value.get<int64_t>() < 0) return false;
  out = value.get<uint64_t>();
  return true;
}

/// Bounds the nesting depth before the JSON parser sees the text, so deep nesting cannot exhaust
/// the stack in the parser or in the destructor of the parsed value. Returns false when too deep.
bool nesting_within_limit(std::string_view text) {
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
      if (++depth > kMaxJsonDepth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

/// The header length stored in the first 8 bytes of a container of `total_bytes`, checked
/// against the limit and the container size. `prefix` holds the first min(8, total) bytes.
uint64_t checked_header_length(const SafetensorsFile& file, std::span<const std::byte> prefix, uint64_t total_bytes) {
  if (total_bytes < kLengthBytes) {
    file.fail("file is ", total_bytes, " bytes, too short for the 8-byte header length");
  }
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, prefix.data(), kLengthBytes);
  if (header_bytes == 0) file.fail("header length is 0");
  if (header_bytes > kMaxSafetensorsHeaderBytes) {
    file.fail("header length ", header_bytes, " bytes exceeds the limit of ", kMaxSafetensorsHeaderBytes, " bytes");
  }
  if (header_bytes > total_bytes - kLengthBytes) {
    file.fail("header length ", header_bytes, " bytes runs past the end of the file (", total_bytes, " bytes)");
  }
  return header_bytes;
}

}  // namespace

int64_t safetensors_dtype_bytes(std::string_view dtype) {
  struct Entry {
    std::string_view name;
    int64_t bytes;
  };
  static constexpr std::array<Entry, 15> kSizes = {{{"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E5M2", 1},
                                                    {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
                                                    {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},
                                                    {"I64", 8}, {"U64", 8}, {"F64", 8}}};
  for (const Entry& entry : kSizes) {
    if (entry.name == dtype) return entry.bytes;
  }
  return 0;
}

SafetensorsFile SafetensorsFile::parse(std::span<const std::byte> bytes, std::string_view name) {
  SafetensorsFile file;
  file.name_ = name;
  file.memory_ = bytes;
  const uint64_t header_bytes =
      checked_header_length(file, bytes.first(std::min(bytes.size(), kLengthBytes)), bytes.size());
  file.data_begin_byte_ = kLengthBytes + header_bytes;
  file.data_bytes_ = bytes.size() - file.data_begin_byte_;
  file.parse_header({reinterpret_cast<const char*>(bytes.data()) + kLengthBytes, static_cast<size_t>(header_bytes)});
  return file;
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  SafetensorsFile file;
  file.name_ = path.string();
  file.path_ = path;
  file.from_file_ = true;
  // InputFile refuses folders, FIFOs and devices without blocking; only the header is read here.
  InputFile in(path, std::numeric_limits<int64_t>::max());
  const auto total_bytes = static_cast<uint64_t>(in.size_bytes());
  std::array<std::byte, kLengthBytes> prefix{};
  const size_t prefix_bytes = static_cast<size_t>(std::min<uint64_t>(total_bytes, kLengthBytes));
  in.read_exactly_at(0, reinterpret_cast<char*>(prefix.data()), static_cast<int64_t>(prefix_bytes));
  const uint64_t header_bytes = checked_header_length(file, std::span(prefix).first(prefix_bytes), total_bytes);
  std::string text(static_cast<size_t>(header_bytes), '\0');
  in.read_exactly_at(static_cast<int64_t>(kLengthBytes), text.data(), static_cast<int64_t>(header_bytes));
  file.data_begin_byte_ = kLengthBytes + header_bytes;
  file.data_bytes_ = total_bytes - file.data_begin_byte_;
  file.parse_header(text);
  return file;
}

void SafetensorsFile::parse_header(std::string_view text) {
  // A NUL byte can never be part of JSON text; the JSON parser would take it as the end of input
  // and accept garbage after it. Refused here, as the Python reader (traces/python) refuses it.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    fail("JSON header holds a NUL byte at offset ", nul, " of its ", text.size(), " bytes");
  }
  if (!nesting_within_limit(text)) fail("JSON header nests deeper than ", kMaxJsonDepth, " levels");
  Json root;
  try {
    root = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    fail("JSON header does not parse: ", e.what());
  }
  if (!root.is_object()) fail("JSON header must be an object, got ", root.type_name());
  const Json* metadata = nullptr;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == "__metadata__") {
      metadata = &it.value();
      continue;
    }
    const std::string& name = it.key();
    const Json& info = it.value();
    if (!info.is_object()) fail("tensor '", name, "': entry must be an object, got ", info.type_name());
    for (auto key = info.begin(); key != info.end(); ++key) {
      if (key.key() != "dtype" && key.key() != "shape" && key.key() != "data_offsets") {
        fail("tensor '", name, "': unknown key '", key.key(), "' (expected dtype, shape, data_offsets)");
      }
    }
    SafetensorsTensor entry;
    entry.name = name;
    const auto dtype = info.find("dtype");
    if (dtype == info.end() || !dtype->is_string()) fail("tensor '", name, "': dtype is missing or not a string");
    entry.dtype = dtype->get<std::string>();
    const int64_t element_bytes = safetensors_dtype_bytes(entry.dtype);
    if (element_bytes == 0) fail("tensor '", name, "': unknown dtype '", entry.dtype, "'");

    const auto shape = info.find("shape");
    if (shape == info.end() || !shape->is_array()) fail("tensor '", name, "': shape is missing or not a list");
    if (shape->size() > kMaxRank) {
      fail("tensor '", name, "': shape has ", shape->size(), " dimensions (at most ", kMaxRank, ")");
    }
    uint64_t elements = 1;
    for (const auto& dim : *shape) {
      uint64_t value = 0;
      if (!as_non_negative(dim, value) || value >= kMaxDimension) {
        fail("tensor '", name, "': shape ", shape->dump(), " has a dimension that is not an integer in [0, 2^31)");
      }
      entry.shape.push_back(static_cast<int64_t>(value));
      // Checked per dimension, so the product never overflows before it is compared.
      if (__builtin_mul_overflow(elements, value, &elements) || elements > data_bytes_) {
        fail("tensor '", name, "': shape ", shape->dump(), " needs more bytes than the file has");
      }
    }

    const auto offsets = info.find("data_offsets");
    if (offsets == info.end() || !offsets->is_array() || offsets->size() != 2 ||
        !as_non_negative((*offsets)[0], entry.begin_byte) || !as_non_negative((*offsets)[1], entry.end_byte)) {
      fail("tensor '", name, "': data_offsets must be a list of two non-negative integers");
    }
    if (entry.begin_byte > entry.end_byte) {
      fail("tensor '", name, "': data_offsets [", entry.begin_byte, ", ", entry.end_byte, "] are reversed");
    }
    if (entry.end_byte > data_bytes_) {
      fail("tensor '", name, "': data_offsets end ", entry.end_byte, " lies past the data section (", data_bytes_,
           " bytes)");
    }
    const uint64_t expected = elements * static_cast<uint64_t>(element_bytes);
    if (entry.bytes() != expected) {
      fail("tensor '", name, "': data_offsets [", entry.begin_byte, ", ", entry.end_byte, "] span ", entry.bytes(),
           " bytes, but dtype ", entry.dtype, " and shape ", shape->dump(), " need ", expected);
    }
    tensors_.push_back(std::move(entry));
  }

  // The tensors must cover the data section exactly, as the safetensors library requires.
  std::sort(tensors_.begin(), tensors_.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
    return a.begin_byte != b.begin_byte ? a.begin_byte < b.begin_byte : a.end_byte < b.end_byte;
  });
  uint64_t position = 0;
  const SafetensorsTensor* previous = nullptr;
  for (const SafetensorsTensor& entry : tensors_) {
    if (entry.begin_byte < position) {
      fail("tensors '", previous->name, "' and '", entry.name, "' overlap ('", previous->name, "' ends at byte ",
           position, ", '", entry.name, "' begins at ", entry.begin_byte, ")");
    }
    if (entry.begin_byte > position) {
      fail("bytes [", position, ", ", entry.begin_byte, ") of the data section belong to no tensor (before '",
           entry.name, "')");
    }
    position = entry.end_byte;
    previous = &entry;
  }
  if (position != data_bytes_) {
    fail("the data section has ", data_bytes_ - position, " bytes after the last tensor (tensors end at ", position,
         ", data is ", data_bytes_, " bytes)");
  }

  if (metadata != nullptr) {
    if (!metadata->is_object()) fail("__metadata__ must be an object of strings, got ", metadata->type_name());
    std::map<std::string, std::string> values;
    for (auto it = metadata->begin(); it != metadata->end(); ++it) {
      if (!it.value().is_string()) {
        fail("__metadata__ '", it.key(), "' must be a string (safetensors metadata holds strings only)");
      }
      values[it.key()] = it.value().get<std::string>();
    }
    metadata_ = std::move(values);
  }
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view tensor_name) const {
  const auto it = std::find_if(tensors_.begin(), tensors_.end(),
                               [&](const SafetensorsTensor& tensor) { return tensor.name == tensor_name; });
  return it == tensors_.end() ? nullptr : &*it;
}

const SafetensorsTensor& SafetensorsFile::require_tensor(std::string_view tensor_name, std::string_view dtype,
                                                         size_t rank) const {
  const SafetensorsTensor* tensor = find(tensor_name);
  if (tensor == nullptr) fail("required tensor '", tensor_name, "' is missing");
  if (tensor->dtype != dtype) fail("tensor '", tensor_name, "' has dtype ", tensor->dtype, ", expected ", dtype);
  if (tensor->shape.size() != rank) {
    fail("tensor '", tensor_name, "' has ", tensor->shape.size(), " dimensions, expected ", rank);
  }
  return *tensor;
}

void SafetensorsFile::check_element_bytes(const SafetensorsTensor& tensor, size_t element_bytes) const {
  if (safetensors_dtype_bytes(tensor.dtype) != static_cast<int64_t>(element_bytes)) {
    throw std::invalid_argument(str(name_, ": tensor '", tensor.name, "' of dtype ", tensor.dtype,
                                    " read as elements of ", element_bytes, " bytes"));
  }
}

void SafetensorsFile::read_bytes(const SafetensorsTensor& tensor, std::span<std::byte> out) const {
  if (out.size() != tensor.bytes() || tensor.end_byte > data_bytes_ || tensor.begin_byte > tensor.end_byte) {
    throw std::invalid_argument(str(name_, ": tensor '", tensor.name, "' read into ", out.size(), " bytes, or not ",
                                    "an entry of this container"));
  }
  if (out.empty()) return;
  if (!from_file_) {
    std::memcpy(out.data(), memory_.data() + data_begin_byte_ + tensor.begin_byte, out.size());
    return;
  }
  InputFile in(path_, std::numeric_limits<int64_t>::max());
  try {
    in.read_exactly_at(static_cast<int64_t>(data_begin_byte_ + tensor.begin_byte), reinterpret_cast<char*>(out.data()),
                       static_cast<int64_t>(out.size()));
  } catch (const InputError& e) {
    fail("short read of tensor '", tensor.name, "' (", e.what(), ")");
  }
}

}  // namespace sparsering
