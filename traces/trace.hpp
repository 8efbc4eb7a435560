// The in-memory sparsity trace: per (sample, layer, head) the vertical and slash candidates with
// their share of the estimated attention mass (docs/formats.md section 1). The file format is
// traces/safetensors_trace.hpp; recall selection (candidates -> kept sets) is traces/recall.hpp.
// Tested in tests/traces/trace_test.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace sparsering {

/// How the trace was made; stored in the safetensors `__metadata__`.
struct TraceMetadata {
  std::string model;               ///< model config name, e.g. "qwen2.5-3b"
  std::string source = "synthetic";///< "synthetic" or "captured"
  int64_t last_q = 64;             ///< queries the estimator scored (docs/algorithm.md section 2)
  int64_t block_q = 64;            ///< estimator's query block size (tokens)
  int64_t block_k = 64;            ///< estimator's key block size (tokens)
  std::map<std::string, std::string> provenance;  ///< free-form: seed, generator, command, date
};

struct Trace {
  static constexpr int32_t kFormatVersion = 1;

  TraceMetadata metadata;
  int64_t samples = 0;              ///< S
  int64_t layers = 0;               ///< L
  int64_t heads = 0;                ///< H (query heads)
  int64_t vertical_candidates = 0;  ///< Kv: candidate slots per head
  int64_t slash_candidates = 0;     ///< Ks
  std::vector<int32_t> vertical_index;  ///< (S, L, H, Kv) key positions, mass-descending, -1 pads
  std::vector<float> vertical_mass;     ///< (S, L, H, Kv) share of estimated mass, 0 for pads
  std::vector<int32_t> slash_offset;    ///< (S, L, H, Ks) diagonal offsets q-k >= 0, -1 pads
  std::vector<float> slash_mass;        ///< (S, L, H, Ks)
  std::vector<int64_t> sample_seq_len;  ///< (S) tokens of each sample

  /// Flat index of the first candidate slot of (sample, layer, head) in a (S, L, H, K) tensor.
  int64_t head_offset(int64_t sample, int64_t layer, int64_t head, int64_t slots) const {
    return ((sample * layers + layer) * heads + head) * slots;
  }
  std::span<const int32_t> verticals(int64_t s, int64_t l, int64_t h) const {
    return {vertical_index.data() + head_offset(s, l, h, vertical_candidates), static_cast<size_t>(vertical_candidates)};
  }
  std::span<const float> vertical_masses(int64_t s, int64_t l, int64_t h) const {
    return {vertical_mass.data() + head_offset(s, l, h, vertical_candidates), static_cast<size_t>(vertical_candidates)};
  }
  std::span<const int32_t> slashes(int64_t s, int64_t l, int64_t h) const {
    return {slash_offset.data() + head_offset(s, l, h, slash_candidates), static_cast<size_t>(slash_candidates)};
  }
  std::span<const float> slash_masses(int64_t s, int64_t l, int64_t h) const {
    return {slash_mass.data() + head_offset(s, l, h, slash_candidates), static_cast<size_t>(slash_candidates)};
  }
};

/// Checks every invariant of a trace: shapes agree with the tensors' sizes; indices and offsets
/// lie in [0, seq_len) or are -1 pads that only follow real entries; masses are finite, in [0, 1],
/// non-increasing, 0 on pads, and sum to at most 1 (+ rounding) per head. Throws InputError naming
/// the tensor, the (sample, layer, head, slot) and the bad value.
void validate_trace(const Trace& trace);

}  // namespace sparsering
