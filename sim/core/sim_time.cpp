#include "sim/core/sim_time.hpp"

#include "common/error.hpp"

namespace sparsering {

void throw_bad_duration(double nanoseconds) {
  throw InputError(str("simulated duration must be a finite number of nanoseconds in [0, 2^62], got ", nanoseconds));
}

}  // namespace sparsering
