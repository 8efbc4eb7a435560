// Export to TransformerEngine: te_cp_groups.json (per data-parallel replica the ordered
// cp_global_ranks, with the a2a index varying fastest for a2a+p2p, and the a2a / p2p sub-groups)
// and te_cp_setup.py, which builds the torch.distributed groups and calls
// set_context_parallel_group on the attention modules. TE takes a rank's ring position from its
// rank in the (ascending) process group, so each p2p and a2a sub-list must ascend; plans whose ring
// order does not are written in the closest ascending order. Tested in
// tests/tuner/framework_exports_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "tuner/export/export_bundle.hpp"
#include "tuner/export/export_target.hpp"

namespace sparsering {

/// The global rank TE puts at each slot (indexed like plan.ring_order): the plan's own order when
/// every p2p ring and a2a group ascends; else each ring's members sorted; else every replica's
/// ranks sorted and dealt a2a index fastest.
std::vector<int64_t> te_ring_order(const PlanConfig& plan);

/// Builds the TransformerEngine export. Throws InputError for a plan that fails check_export_input
/// or whose sequence TE's zigzag split cannot divide.
ExportBundle export_te(const ExportInput& input);

}  // namespace sparsering
