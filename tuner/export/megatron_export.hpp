// Export to Megatron-LM: megatron_args.sh, a bash array of the parallelism arguments
// (--context-parallel-size, --cp-comm-type, --hierarchical-context-parallel-sizes, tensor and
// pipeline sizes, sequence length, recompute, distributed optimizer), the token permutation of
// Megatron's zigzag data loader, and, when Megatron's tp-cp-ep-dp-pp rank order differs from the
// plan's ring order, rank_map.json. Tested in tests/tuner/framework_exports_test.cpp.
#pragma once

#include "tuner/export/export_bundle.hpp"
#include "tuner/export/export_target.hpp"

namespace sparsering {

/// Builds the Megatron-LM export of a plan. Throws InputError for a plan that fails
/// check_export_input or whose sequence Megatron's zigzag loader cannot split
/// (seq_len_tokens not divisible by 2 x context-parallel size).
ExportBundle export_megatron(const ExportInput& input);

}  // namespace sparsering
