// The error a ring run ends with when a peer dies or stalls (timeout or NCCL asynchronous
// error): its message names the rank, the pass, the ring step and what the rank waited for.
// Not an InputError: the CLI maps it to exit code 1. Thrown by kernels/nccl/nccl_world.cu;
// tested by tests/nccl/nccl_world_test.cpp (a killed peer).
#pragma once

#include <stdexcept>
#include <string>

namespace sparsering {

/// A distributed run failed: a peer died, stalled past the timeout, or NCCL reported an error.
class RingError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace sparsering
