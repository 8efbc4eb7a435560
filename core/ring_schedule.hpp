// Which K/V chunk every ring position holds at every step of a flat or nested (hierarchical) ring,
// and which hops carry them. Positions and steps are mixed-radix numbers over the level sizes
// s_0 (innermost) .. s_{L-1}: p = i_0 + s_0 x (i_1 + s_1 x (...)), the same decomposition as the
// plan's ring order (sim/config/plan_config.hpp). At step t (digits t_l) position p holds the
// chunk of the position with digits (i_l - t_l) mod s_l: the global chunk offset of a two-level
// ring is outer_offset x inner_size + inner_offset. A flat ring is one level: p holds the chunk of
// p - t. Hops: at a step whose digits below level k are all zero and whose digit k is not the
// last, a position sends the chunk it holds to its level-k successor, which needs it stride_k
// steps later; so the outer hop of the next chunk is posted at the start of an outer step and
// overlaps the whole inner ring. Tested in tests/sim/ring_simulation_test.cpp (RingScheduleTest),
// tests/ring/ring_topology_test.cpp and tests/measure/validation/ring_rederive_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sparsering {

class RingSchedule {
 public:
  /// Level sizes inner -> outer; each >= 1, product = ring size W (<= 2^20). Throws InputError.
  explicit RingSchedule(std::vector<int64_t> level_sizes);
  /// A flat ring of `ranks` positions.
  static RingSchedule flat(int32_t ranks) { return RingSchedule({ranks}); }

  int32_t ranks() const { return ranks_; }
  int32_t levels() const { return static_cast<int32_t>(sizes_.size()); }
  int32_t level_size(int32_t level) const { return sizes_[static_cast<size_t>(level)]; }
  /// Steps between two consecutive chunks of a level: s_0 x ... x s_{level-1}.
  int32_t stride(int32_t level) const { return strides_[static_cast<size_t>(level)]; }
  /// Digit `level` of a position or step.
  int32_t digit(int32_t value, int32_t level) const { return (value / stride(level)) % level_size(level); }

  /// The position whose K/V chunk `position` holds at `step`.
  int32_t source(int32_t position, int32_t step) const;
  /// The level whose hop delivers the chunk of `step` (>= 1): the lowest nonzero digit of step.
  int32_t arrival_level(int32_t step) const;
  /// True if a position sends, at `step`, the chunk it holds over `level` (see the file comment).
  bool sends_at(int32_t step, int32_t level) const;
  /// Successor / predecessor of `position` in its level-`level` ring (digit +1 / -1, cyclic).
  int32_t next(int32_t position, int32_t level) const;
  int32_t prev(int32_t position, int32_t level) const;

 private:
  std::vector<int32_t> sizes_;
  std::vector<int32_t> strides_;
  int32_t ranks_ = 1;
};

}  // namespace sparsering
