// Error checking for NCCL calls: SPARSERING_NCCL_CHECK(expr) throws RingError carrying the
// failed expression, NCCL's message, file:line and the current device, unless the call returned
// ncclSuccess or (non-blocking communicators) ncclInProgress. Host code of .cu files only;
// exercised by every test in tests/nccl/.
#pragma once

#include <nccl.h>

namespace sparsering {

/// Builds the message for a failed NCCL call and throws RingError.
[[noreturn]] void throw_nccl_error(ncclResult_t code, const char* expression, const char* file, int line);

}  // namespace sparsering

/// Evaluates an ncclResult_t expression once; throws sparsering::RingError unless it is
/// ncclSuccess or ncclInProgress (a non-blocking call still completing: poll the communicator).
#define SPARSERING_NCCL_CHECK(expr)                                                        \
  do {                                                                                     \
    const ncclResult_t sparsering_nccl_status_ = (expr);                                   \
    if (sparsering_nccl_status_ != ncclSuccess && sparsering_nccl_status_ != ncclInProgress) { \
      ::sparsering::throw_nccl_error(sparsering_nccl_status_, #expr, __FILE__, __LINE__); \
    }                                                                                      \
  } while (false)
