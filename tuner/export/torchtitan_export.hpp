// Export to torchtitan. The default form follows current torchtitan (pytorch/torchtitan at commit
// b5bcd76c66d0acb1a08b176d9639425bc55e0b2a, after v0.2.2), whose run configuration is a Python
// Trainer.Config: torchtitan_config.py holds apply_sparsering_plan(config), which sets
// config.parallelism (ParallelismConfig: dp_replicate / dp_shard / cp / tp / pp degrees, CP load
// balancer), config.training (TrainingConfig: max_context_length,
// num_tokens_per_microbatch_per_dp_rank) and config.activation_checkpoint (SelectiveAC.Config,
// FullAC.Config or None). TorchtitanFormat::toml_v0_2 writes the job-config TOML of torchtitan up
// to v0.2.2 instead (torchtitan.toml: [parallelism] with context_parallel_rotate_method, [training]
// seq_len and local_batch_size, [activation_checkpoint] mode). Both come with the token permutation
// of the plan's layout over torchtitan's CP ranks, and rank_map.json when torchtitan's mesh order
// (pp, dp_replicate, dp_shard, cp, tp) differs from the plan's ring order. Tested in
// tests/tuner/framework_exports_test.cpp and, against torchtitan's config classes, in
// tests/tuner/framework_rules_test.py.
#pragma once

#include "tuner/export/export_bundle.hpp"
#include "tuner/export/export_target.hpp"

namespace sparsering {

/// The torchtitan commit the Python form follows.
inline constexpr const char* kTorchtitanCommit = "b5bcd76c66d0acb1a08b176d9639425bc55e0b2a";

/// Builds the torchtitan export in `format`. Throws InputError for a plan that fails
/// check_export_input or, with head parallelism, whose layout cannot be dealt over the flattened ring.
ExportBundle export_torchtitan(const ExportInput& input, TorchtitanFormat format = TorchtitanFormat::python);

}  // namespace sparsering
