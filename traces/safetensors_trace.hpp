// The trace file format (docs/formats.md section 1): a safetensors container holding the tensors
//   vertical.index I32 [S, L, H, Kv]   vertical.mass F32 [S, L, H, Kv]
//   slash.offset   I32 [S, L, H, Ks]   slash.mass    F32 [S, L, H, Ks]
//   sample.seq_len I64 [S]
// and a `__metadata__` map of strings: format = "sparsering-trace", version = "1", model, source,
// last_q, block_q, block_k, and one "provenance.<key>" entry per provenance item.
//
// Container: 8-byte little-endian header length n, n bytes of JSON (padded with spaces to a
// multiple of 8, as Python's safetensors writes it), then the raw little-endian tensor bytes.
// The reader checks everything before it touches tensor data: first the container
// (traces/safetensors_file.hpp: header length, JSON, each entry's dtype, shape and data_offsets,
// exact tiling of the data section, metadata strings), then the required tensors' dtypes and
// agreeing shapes, the metadata, and finally validate_trace(). Tensors with other names are
// checked like the rest and then ignored, so tools may add their own tensors. Metadata keys other
// than the ones above are kept in provenance under their own name. Every failure is an InputError
// that starts with the file name and names the tensor or key.
// Tested in tests/traces/safetensors_trace_test.cpp and fuzzed by tests/fuzz/trace_reader_fuzz.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

#include "traces/safetensors_file.hpp"
#include "traces/trace.hpp"

namespace sparsering {

/// Largest JSON header the reader accepts (bytes): the container reader's limit.
inline constexpr uint64_t kMaxTraceHeaderBytes = kMaxSafetensorsHeaderBytes;

/// Validates `trace` and writes it in the format above to `out` (binary stream).
void write_trace(std::ostream& out, const Trace& trace);

/// Validates `trace` and returns the file bytes (for tests, fuzz seeds and in-memory use).
std::string serialize_trace(const Trace& trace);

/// Validates `trace` and writes it to `path` atomically (temp file + rename). Throws InputError if
/// `path` exists and `overwrite` is false, or the trace is invalid; the target is then untouched.
void write_trace(const std::filesystem::path& path, const Trace& trace, bool overwrite);

/// Parses and fully validates a trace held in memory. `name` (usually the file path) starts
/// every error message. Never reads outside `bytes`.
Trace parse_trace(std::span<const std::byte> bytes, std::string_view name);

/// Reads a trace file; same checks as parse_trace, errors start with the path.
Trace read_trace(const std::filesystem::path& path);

}  // namespace sparsering
