// Trace invariants. Checked on every read and before every write, so a trace in memory that
// passed validate_trace() can be indexed without further bounds checks.
#include "traces/trace.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.hpp"

namespace sparsering {
namespace {

constexpr double kMassSumTolerance = 1e-3;  // float rounding of masses summed over thousands of slots

constexpr int64_t kBitmapLimit = int64_t{1} << 26;  // duplicate check: bitmap up to 8 MiB, else sort

// Returns a value that occurs twice in `values` (all in [0, seq_len)), or -1. With a bitmap of
// seq_len bits (all clear, and left clear) this is O(values); otherwise it sorts `values`.
int32_t first_repeat(std::vector<int32_t>& values, std::vector<uint64_t>& bits, int64_t seq_len) {
  int32_t repeat = -1;
  if (seq_len <= kBitmapLimit) {
    size_t marked = 0;
    for (; marked < values.size(); ++marked) {
      const auto v = static_cast<size_t>(values[marked]);
      const uint64_t bit = uint64_t{1} << (v & 63);
      if (bits[v >> 6] & bit) {
        repeat = values[marked];
        break;
      }
      bits[v >> 6] |= bit;
    }
    for (size_t i = 0; i < marked; ++i) bits[static_cast<size_t>(values[i]) >> 6] = 0;
    return repeat;
  }
  std::sort(values.begin(), values.end());
  const auto it = std::adjacent_find(values.begin(), values.end());
  return it == values.end() ? -1 : *it;
}

template <typename T>
void check_size(const std::vector<T>& tensor, int64_t expected, const char* name) {
  require(static_cast<int64_t>(tensor.size()) == expected, "trace tensor ", name, " has ", tensor.size(),
          " elements, but its shape needs ", expected);
}

void check_candidates(const Trace& trace, bool vertical) {
  const char* index_name = vertical ? "vertical.index" : "slash.offset";
  const char* mass_name = vertical ? "vertical.mass" : "slash.mass";
  const int64_t slots = vertical ? trace.vertical_candidates : trace.slash_candidates;
  std::vector<int32_t> seen;
  seen.reserve(static_cast<size_t>(slots));
  std::vector<uint64_t> bits;
  for (int64_t s = 0; s < trace.samples; ++s) {
    const int64_t seq_len = trace.sample_seq_len[static_cast<size_t>(s)];
    if (seq_len <= kBitmapLimit) bits.assign(static_cast<size_t>((seq_len + 63) / 64), 0);
    for (int64_t l = 0; l < trace.layers; ++l) {
      for (int64_t h = 0; h < trace.heads; ++h) {
        const auto index = vertical ? trace.verticals(s, l, h) : trace.slashes(s, l, h);
        const auto mass = vertical ? trace.vertical_masses(s, l, h) : trace.slash_masses(s, l, h);
        double sum = 0.0;
        bool padding = false;
        seen.clear();
        for (int64_t k = 0; k < slots; ++k) {
          const auto slot = static_cast<size_t>(k);
          const int32_t value = index[slot];
          const float m = mass[slot];
          // Messages are only built on failure: this loop runs over every slot of large traces.
          auto where = [&] { return str(" at (sample ", s, ", layer ", l, ", head ", h, ", slot ", k, ")"); };
          if (value == -1) {
            padding = true;
            if (m != 0.0f) throw InputError(str(mass_name, where(), " is ", m, " on a padding slot (must be 0)"));
            continue;
          }
          if (padding)
            throw InputError(str(index_name, where(), " = ", value, " follows a -1 pad (pads must come last)"));
          if (value < 0 || value >= seq_len) {
            throw InputError(str(index_name, where(), " = ", value, " is outside [0, ", seq_len, ") (sample length)"));
          }
          if (!(std::isfinite(m) && m >= 0.0f && m <= 1.0f)) {
            throw InputError(str(mass_name, where(), " = ", m, " is not in [0, 1]"));
          }
          if (k > 0 && m > mass[slot - 1]) {
            throw InputError(str(mass_name, where(), " = ", m, " is larger than the previous slot's ", mass[slot - 1],
                                 " (candidates must be sorted by mass, descending)"));
          }
          sum += static_cast<double>(m);
          seen.push_back(value);
        }
        // A key or offset listed twice would count its mass twice in recall selection.
        const int32_t repeat = first_repeat(seen, bits, seq_len);
        if (repeat >= 0) {
          throw InputError(str(index_name, " of (sample ", s, ", layer ", l, ", head ", h, ") lists ", repeat,
                               " twice (candidates must be distinct)"));
        }
        require(sum <= 1.0 + kMassSumTolerance, mass_name, " of (sample ", s, ", layer ", l, ", head ", h, ") sums to ",
                sum, " > 1");
      }
    }
  }
}

}  // namespace

void validate_trace(const Trace& trace) {
  require(trace.samples >= 1, "trace has ", trace.samples, " samples (need >= 1)");
  require(trace.layers >= 1, "trace has ", trace.layers, " layers (need >= 1)");
  require(trace.heads >= 1, "trace has ", trace.heads, " heads (need >= 1)");
  require(trace.vertical_candidates >= 0 && trace.slash_candidates >= 0, "trace candidate counts must be >= 0");
  int64_t heads_total = 0, vertical_slots = 0, slash_slots = 0;
  const bool overflow = __builtin_mul_overflow(trace.samples, trace.layers, &heads_total) ||
                        __builtin_mul_overflow(heads_total, trace.heads, &heads_total) ||
                        __builtin_mul_overflow(heads_total, trace.vertical_candidates, &vertical_slots) ||
                        __builtin_mul_overflow(heads_total, trace.slash_candidates, &slash_slots);
  require(!overflow, "trace shape (", trace.samples, ", ", trace.layers, ", ", trace.heads, ", ",
          trace.vertical_candidates, " / ", trace.slash_candidates, ") overflows 64-bit sizes");
  check_size(trace.vertical_index, vertical_slots, "vertical.index");
  check_size(trace.vertical_mass, vertical_slots, "vertical.mass");
  check_size(trace.slash_offset, slash_slots, "slash.offset");
  check_size(trace.slash_mass, slash_slots, "slash.mass");
  check_size(trace.sample_seq_len, trace.samples, "sample.seq_len");
  for (int64_t s = 0; s < trace.samples; ++s) {
    const int64_t n = trace.sample_seq_len[static_cast<size_t>(s)];
    require(n >= 1 && n <= (int64_t{1} << 31) - 1, "sample.seq_len[", s, "] = ", n, " is not in [1, 2^31)");
  }
  require(trace.metadata.last_q >= 1, "trace metadata last_q must be >= 1, got ", trace.metadata.last_q);
  require(trace.metadata.block_q >= 1 && trace.metadata.block_k >= 1, "trace metadata block sizes must be >= 1");
  check_candidates(trace, true);
  check_candidates(trace, false);
}

}  // namespace sparsering
