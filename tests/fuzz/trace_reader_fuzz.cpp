// libFuzzer target for the trace reader: any byte string must either parse into a valid trace or
// throw InputError; nothing else (no crash, no out-of-bounds read under ASan, no other exception).
// A trace that parses must survive a write/read round trip unchanged and be summarizable.
// Built with -DSPARSERING_FUZZ=ON (clang); run briefly by ctest (label fuzz), see CMakeLists.txt.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "common/error.hpp"
#include "traces/safetensors_trace.hpp"
#include "traces/trace_summary.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sparsering;
  Trace trace;
  try {
    trace = parse_trace(std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz-input");
  } catch (const InputError&) {
    return 0;
  }
  // Valid input: writing and reading back must give the same trace.
  const std::string bytes = serialize_trace(trace);
  const Trace again =
      parse_trace(std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()), "round-trip");
  if (again.vertical_index != trace.vertical_index || again.vertical_mass != trace.vertical_mass ||
      again.slash_offset != trace.slash_offset || again.slash_mass != trace.slash_mass ||
      again.sample_seq_len != trace.sample_seq_len || again.metadata.provenance != trace.metadata.provenance) {
    std::abort();
  }
  // Keep the summary cheap: it is linear in heads and kept entries.
  if (trace.samples * trace.layers * trace.heads <= 4096) {
    SummarySettings settings;
    settings.recall.recall = 0.9;
    const TraceSummary summary = summarize_trace(trace, settings);
    if (!(summary.tile_density >= 0.0 && summary.tile_density <= 1.0 + 1e-12)) std::abort();
    if (!(summary.element_density >= 0.0 && summary.element_density <= summary.tile_density + 1e-12)) std::abort();
  }
  return 0;
}
