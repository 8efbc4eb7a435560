#include "sim/core/sim_time.hpp"

#include <cmath>

#include "common/error.hpp"

namespace sparsering {

SimNs round_to_ns(double nanoseconds) {
  constexpr double kLimit = 4.611686018427387904e18;  // 2^62
  require(std::isfinite(nanoseconds) && nanoseconds >= 0.0 && nanoseconds <= kLimit,
          "simulated duration must be a finite number of nanoseconds in [0, 2^62], got ", nanoseconds);
  return static_cast<SimNs>(std::llround(nanoseconds));
}

}  // namespace sparsering
