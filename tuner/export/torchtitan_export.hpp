// Export to torchtitan: torchtitan.toml, a job-config fragment ([parallelism] degrees, CP rotate
// method and load balancer, [training] sequence length, [activation_checkpoint] mode), the token
// permutation of the plan's layout over torchtitan's CP ranks, and rank_map.json when torchtitan's
// mesh order (pp, dp_replicate, dp_shard, cp, tp) differs from the plan's ring order. Tested in
// tests/tuner/framework_exports_test.cpp.
#pragma once

#include "tuner/export/export_bundle.hpp"
#include "tuner/export/export_target.hpp"

namespace sparsering {

/// Builds the torchtitan export. Throws InputError for a plan that fails check_export_input or,
/// with head parallelism, whose layout cannot be dealt over the flattened ring.
ExportBundle export_torchtitan(const ExportInput& input);

}  // namespace sparsering
