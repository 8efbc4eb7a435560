// Helpers shared by the trace tests: random valid traces and safetensors files assembled by hand
// (so tests can build malformed ones).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "traces/synth/prng.hpp"
#include "traces/trace.hpp"

namespace sparsering::testing {

/// A valid random trace: each head has a random number of real candidates (distinct positions in
/// [0, seq_len), masses sorted descending, summing to at most 1) followed by -1 pads.
inline Trace random_trace(uint64_t seed, int64_t samples, int64_t layers, int64_t heads, int64_t vertical_slots,
                          int64_t slash_slots, int64_t seq_len) {
  synth::SplitMix64 rng(seed);
  Trace t;
  t.metadata.model = "test-model";
  t.metadata.source = "synthetic";
  t.metadata.provenance["seed"] = std::to_string(seed);
  t.metadata.provenance["note"] = "random test trace";
  t.samples = samples;
  t.layers = layers;
  t.heads = heads;
  t.vertical_candidates = vertical_slots;
  t.slash_candidates = slash_slots;
  t.sample_seq_len.assign(static_cast<size_t>(samples), seq_len);
  auto fill = [&](std::vector<int32_t>& index, std::vector<float>& mass, int64_t slots) {
    index.assign(static_cast<size_t>(samples * layers * heads * slots), -1);
    mass.assign(index.size(), 0.0f);
    for (int64_t head = 0; head < samples * layers * heads; ++head) {
      const int64_t real = static_cast<int64_t>(rng.below(static_cast<uint64_t>(std::min(slots, seq_len) + 1)));
      std::vector<int32_t> all(static_cast<size_t>(seq_len));
      std::iota(all.begin(), all.end(), 0);
      for (int64_t i = 0; i < real; ++i) {
        std::swap(all[static_cast<size_t>(i)],
                  all[static_cast<size_t>(i) + rng.below(all.size() - static_cast<size_t>(i))]);
      }
      std::vector<double> m(static_cast<size_t>(real));
      double sum = 0.0;
      for (auto& x : m) sum += (x = rng.uniform());
      std::sort(m.begin(), m.end(), [](double a, double b) { return a > b; });
      const double total = rng.uniform(0.1, 0.99);
      for (int64_t i = 0; i < real; ++i) {
        const auto at = static_cast<size_t>(head * slots + i);
        index[at] = all[static_cast<size_t>(i)];
        mass[at] = static_cast<float>(m[static_cast<size_t>(i)] / sum * total);
      }
    }
  };
  fill(t.vertical_index, t.vertical_mass, vertical_slots);
  fill(t.slash_offset, t.slash_mass, slash_slots);
  return t;
}

/// Bytes of a safetensors file: 8-byte little-endian length, `header` text, `data`.
inline std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

/// Splits serialized trace bytes into (header JSON, data section).
inline std::pair<nlohmann::json, std::string> split_safetensors(const std::string& bytes) {
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return {nlohmann::json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
}

inline std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace sparsering::testing
