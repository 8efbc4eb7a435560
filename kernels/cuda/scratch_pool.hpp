// The stream-ordered memory pool that StreamBuffer scratch comes from: one per device, created
// on first use, that keeps up to kScratchPoolKeepBytes mapped across synchronizations. The
// device's default pool returns all unused memory at every synchronization unless its owner
// raises the threshold, and mapping it back costs more than the index preparation's kernels at
// 128K tokens; a pool of its own keeps that from depending on the host process's settings (a
// Python process with torch keeps the default) without changing the default pool for others.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace sparsering {

/// Bytes the scratch pool keeps mapped when idle (more is returned at synchronizations).
constexpr uint64_t kScratchPoolKeepBytes = uint64_t{256} << 20;

/// The scratch pool of the current device (thread-safe; created once per device).
cudaMemPool_t scratch_pool();

}  // namespace sparsering
