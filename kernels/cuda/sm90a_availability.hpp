// Whether this library's sm_90a (Hopper) kernels can run on the current device: the build must
// carry sm_90a code and the device must be of compute capability 9.0 (sm_90a code runs there
// only). Launchers with a Hopper path ask it before taking that path, or to refuse one asked for.
// The attention launchers (sparse_attn_fwd.cu, sparse_attn_bwd.cu) still carry the same check
// inline: their sources are part of the kernel build identity (docs/calibration.md), so moving
// them here waits for their next recalibrated change.
#pragma once

#include <string>

namespace sparsering {

/// Empty when the current device runs this library's sm_90a code, else why not (for a message).
std::string sm90a_code_unavailable();

}  // namespace sparsering
