// The commit that measured results (validation.json, a calibration) name as their source tree.
#pragma once

#include <string>

namespace sparsering {

/// SPARSERING_COMMIT if set (for a copy of the tree whose git metadata is older than its files),
/// else `git rev-parse HEAD` in the working directory with "+modified" when the tracked files
/// differ from it, else "unknown".
std::string current_commit();

}  // namespace sparsering
