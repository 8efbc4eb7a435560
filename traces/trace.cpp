#include "traces/trace.hpp"

#include <cmath>

#include "common/error.hpp"

namespace sparsering {
namespace {

constexpr double kMassSumTolerance = 1e-3;  // float rounding of masses summed over thousands of slots

template <typename T>
void check_size(const std::vector<T>& tensor, int64_t expected, const char* name) {
  require(static_cast<int64_t>(tensor.size()) == expected, "trace tensor ", name, " has ", tensor.size(),
          " elements, but its shape needs ", expected);
}

void check_candidates(const Trace& trace, bool vertical) {
  const char* index_name = vertical ? "vertical.index" : "slash.offset";
  const char* mass_name = vertical ? "vertical.mass" : "slash.mass";
  const int64_t slots = vertical ? trace.vertical_candidates : trace.slash_candidates;
  for (int64_t s = 0; s < trace.samples; ++s) {
    const int64_t seq_len = trace.sample_seq_len[static_cast<size_t>(s)];
    for (int64_t l = 0; l < trace.layers; ++l) {
      for (int64_t h = 0; h < trace.heads; ++h) {
        const auto index = vertical ? trace.verticals(s, l, h) : trace.slashes(s, l, h);
        const auto mass = vertical ? trace.vertical_masses(s, l, h) : trace.slash_masses(s, l, h);
        double sum = 0.0;
        bool padding = false;
        for (int64_t k = 0; k < slots; ++k) {
          const auto slot = static_cast<size_t>(k);
          const int32_t value = index[slot];
          const float m = mass[slot];
          auto where = [&] { return str(" at (sample ", s, ", layer ", l, ", head ", h, ", slot ", k, ")"); };
          if (value == -1) {
            padding = true;
            require(m == 0.0f, mass_name, where(), " is ", m, " on a padding slot (must be 0)");
            continue;
          }
          require(!padding, index_name, where(), " = ", value, " follows a -1 pad (pads must come last)");
          require(value >= 0 && value < seq_len, index_name, where(), " = ", value, " is outside [0, ", seq_len,
                  ") (sample length)");
          require(std::isfinite(m) && m >= 0.0f && m <= 1.0f, mass_name, where(), " = ", m, " is not in [0, 1]");
          require(k == 0 || m <= mass[slot - 1], mass_name, where(), " = ", m,
                  " is larger than the previous slot's ", mass[slot - 1], " (candidates must be sorted by mass)");
          sum += static_cast<double>(m);
        }
        require(sum <= 1.0 + kMassSumTolerance, mass_name, " of (sample ", s, ", layer ", l, ", head ", h,
                ") sums to ", sum, " > 1");
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
  const int64_t heads_total = trace.samples * trace.layers * trace.heads;
  check_size(trace.vertical_index, heads_total * trace.vertical_candidates, "vertical.index");
  check_size(trace.vertical_mass, heads_total * trace.vertical_candidates, "vertical.mass");
  check_size(trace.slash_offset, heads_total * trace.slash_candidates, "slash.offset");
  check_size(trace.slash_mass, heads_total * trace.slash_candidates, "slash.mass");
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
