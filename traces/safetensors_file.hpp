// The safetensors container, read: 8-byte little-endian header length n, n bytes of JSON
// (tensor name -> {dtype, shape, data_offsets}, plus an optional `__metadata__` map of strings),
// then the raw little-endian tensor bytes. The reader is written for hostile input and checks the
// whole header before any tensor byte is read: the header length (at most 100 MiB and inside the
// file), JSON syntax and nesting depth, each entry's keys, dtype, shape (at most 8 dimensions,
// each in [0, 2^31)) and data_offsets (in order, inside the data section, as many bytes as dtype
// and shape need), that the tensors tile the data section exactly (no gap, no overlap, nothing
// after the last tensor, as the safetensors library requires), and that the metadata holds
// strings only. A container is read from memory or from a file; from a file only the header is
// read up front and each tensor read takes exactly the byte range its header entry names.
// Every failure is an InputError that starts with the container's name and names the tensor or
// key. Used by the trace reader (traces/safetensors_trace.hpp) and `sparsering trace capture`
// (Q/K dumps). Tested in tests/traces/safetensors_file_test.cpp, and through
// tests/traces/safetensors_trace_test.cpp and tests/fuzz/trace_reader_fuzz.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/error.hpp"

namespace sparsering {

/// Largest JSON header the reader accepts (bytes). Real headers are a few hundred bytes.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = uint64_t{100} << 20;

/// Bytes per element of a safetensors dtype name ("BF16" -> 2, "I64" -> 8), or 0 for a name the
/// format does not define.
int64_t safetensors_dtype_bytes(std::string_view dtype);

/// One tensor entry of a container's header.
struct SafetensorsTensor {
  std::string name;
  std::string dtype;           ///< safetensors dtype name, e.g. "BF16", "F32", "I32"
  std::vector<int64_t> shape;  ///< extents, outermost first (row-major)
  uint64_t begin_byte = 0;     ///< first byte, counted from the start of the data section
  uint64_t end_byte = 0;       ///< one past the last byte, counted from the start of the data section

  /// Bytes the tensor occupies (end_byte - begin_byte).
  uint64_t bytes() const { return end_byte - begin_byte; }
};

/// A validated safetensors container: its header, and reads of the tensor bytes it names.
class SafetensorsFile {
 public:
  /// Opens the file at `path` and reads and validates its header (8 + n bytes; no tensor data).
  /// Errors start with the path.
  static SafetensorsFile open(const std::filesystem::path& path);

  /// Validates the header of a container held in `bytes`, which must outlive the returned object.
  /// `name` (usually the file path) starts every error message. Never reads outside `bytes`.
  static SafetensorsFile parse(std::span<const std::byte> bytes, std::string_view name);

  /// The name that starts every error message.
  const std::string& name() const { return name_; }
  /// Every tensor entry, in data-offset order.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  /// The `__metadata__` map, or nullopt when the header has none.
  const std::optional<std::map<std::string, std::string>>& metadata() const { return metadata_; }
  /// Size of the data section (bytes); the tensors tile it exactly.
  uint64_t data_bytes() const { return data_bytes_; }

  /// The entry named `tensor_name`, or nullptr.
  const SafetensorsTensor* find(std::string_view tensor_name) const;

  /// The entry named `tensor_name`, which must exist with `dtype` and `rank` dimensions. Throws
  /// InputError "<name>: required tensor '<t>' is missing", "... tensor '<t>' has dtype F32,
  /// expected I32" or "... tensor '<t>' has 5 dimensions, expected 4".
  const SafetensorsTensor& require_tensor(std::string_view tensor_name, std::string_view dtype, size_t rank) const;

  /// Copies the bytes of `tensor` (an entry of tensors()) into `out`, which must hold exactly
  /// tensor.bytes() bytes. From a file, reads that byte range only; throws InputError when the
  /// file cannot be read back (e.g. it shrank since open()).
  void read_bytes(const SafetensorsTensor& tensor, std::span<std::byte> out) const;

  /// The elements of `tensor` (an entry of tensors()) as T, in file byte order (little-endian).
  /// Precondition: sizeof(T) is the element size of tensor.dtype (else std::invalid_argument).
  template <typename T>
  std::vector<T> read(const SafetensorsTensor& tensor) const;

  /// Throws InputError "<name>: <message...>".
  template <typename... Args>
  [[noreturn]] void fail(Args&&... message) const {
    throw InputError(str(name_, ": ", std::forward<Args>(message)...));
  }

 private:
  SafetensorsFile() = default;
  void parse_header(std::string_view text);
  void check_element_bytes(const SafetensorsTensor& tensor, size_t element_bytes) const;

  std::string name_;
  bool from_file_ = false;
  std::filesystem::path path_;          ///< set when read from a file
  std::span<const std::byte> memory_;   ///< the whole container when parsed from memory
  uint64_t data_begin_byte_ = 0;        ///< 8 + header length
  uint64_t data_bytes_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::optional<std::map<std::string, std::string>> metadata_;
};

template <typename T>
std::vector<T> SafetensorsFile::read(const SafetensorsTensor& tensor) const {
  static_assert(std::is_trivially_copyable_v<T>, "tensor elements are copied as bytes");
  check_element_bytes(tensor, sizeof(T));
  std::vector<T> values(static_cast<size_t>(tensor.bytes() / sizeof(T)));
  read_bytes(tensor, std::as_writable_bytes(std::span<T>(values)));
  return values;
}

}  // namespace sparsering
