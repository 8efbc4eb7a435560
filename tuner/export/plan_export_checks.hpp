// Checks every exporter runs before writing anything: the plan's own structure (so a plan built
// in code, not parsed, cannot make an exporter read a rank or a size that does not exist) and the
// plan against its model and cluster. Tested in tests/tuner/plan_export_checks_test.cpp.
#pragma once

#include "sim/config/plan_config.hpp"
#include "tuner/export/export_target.hpp"

namespace sparsering {

/// Checks what parse_plan guarantees: degrees >= 1 and a world of at most 2^20 ranks; ring_order
/// lists each rank 0 .. world-1 exactly once; ring levels non-empty, sizes >= 1, product =
/// context_parallel; the token layout is over context_parallel ranks and seq_len_tokens tokens
/// and valid (make_token_layout). Throws InputError naming the field and values.
void check_plan_structure(const PlanConfig& plan);

/// check_plan_structure, then check_plan_against(plan, model, cluster): the world must equal the
/// cluster's GPUs, head_parallel must fit the heads, each level's link must be right.
void check_export_input(const ExportInput& input);

}  // namespace sparsering
