// Strong rank types of the ring runtime: a GlobalRank is a GPU of the job (NCCL rank, the
// plan's ring_order entries), a RingRank is a position 0..W-1 in the context-parallel ring (the
// rank the token layout deals chunks to). Distinct types with explicit conversion only, so a
// peer or broadcast root can never be a ring position by mistake (docs/algorithm.md section 6, defect 4).
// Tested in tests/ring/ring_topology_test.cpp.
#pragma once

#include <cstdint>

namespace sparsering {

/// A GPU of the job: the NCCL rank (on one host also the device index unless mapped).
class GlobalRank {
 public:
  constexpr GlobalRank() = default;
  constexpr explicit GlobalRank(int32_t value) : value_(value) {}
  /// The raw rank number.
  constexpr int32_t value() const { return value_; }
  friend constexpr bool operator==(GlobalRank, GlobalRank) = default;
  friend constexpr auto operator<=>(GlobalRank, GlobalRank) = default;

 private:
  int32_t value_ = 0;
};

/// A position 0..W-1 in the context-parallel ring (the layout's ring rank).
class RingRank {
 public:
  constexpr RingRank() = default;
  constexpr explicit RingRank(int32_t value) : value_(value) {}
  /// The raw position number.
  constexpr int32_t value() const { return value_; }
  friend constexpr bool operator==(RingRank, RingRank) = default;
  friend constexpr auto operator<=>(RingRank, RingRank) = default;

 private:
  int32_t value_ = 0;
};

}  // namespace sparsering
