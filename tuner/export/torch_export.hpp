// Export for plain PyTorch: plan.json (world and degrees, ring levels, context-parallel rings,
// level rings, head-parallel, data-parallel and gradient-synchronisation groups, the role, query
// and K/V heads and per-level ring neighbours of every rank, and the token permutation / position
// ids of every context-parallel rank) plus a copy
// of the helper module sparsering_plan.py (tuner/python/), which validates plan.json against the
// running torch.distributed world and builds the process groups. Nothing of the plan is lost: the
// module carries it exactly; the attention kernel is the caller's. Tested in
// tests/tuner/torch_export_test.cpp and, in real torch.distributed, tests/tuner/torch_ring_test.py.
#pragma once

#include <string>

#include "tuner/export/export_bundle.hpp"
#include "tuner/export/export_target.hpp"

namespace sparsering {

/// The content of plan.json for `plan` on `model` (format "sparsering-torch-plan", version 2).
/// Precondition: the plan passed check_export_input. Throws InputError when head_parallel does
/// not divide the local tokens of a ring position (each head-parallel rank feeds an equal slice).
std::string torch_plan_json(const PlanConfig& plan, const ModelConfig& model);

/// Builds the torch export. Throws InputError for a plan that fails check_export_input.
ExportBundle export_torch(const ExportInput& input);

}  // namespace sparsering
