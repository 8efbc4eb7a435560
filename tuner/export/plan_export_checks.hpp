// Checks every exporter runs before writing anything: the plan's own structure (so a plan built
// in code, not parsed, cannot make an exporter read a rank or a size that does not exist) and the
// plan against its model and cluster, and the K/V-head rule of the a2a frameworks. Tested in
// tests/tuner/plan_export_checks_test.cpp and tests/tuner/framework_exports_test.cpp.
#pragma once

#include <string_view>

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

/// For a framework whose head-parallel (a2a) context parallelism splits the K/V heads over the
/// a2a group (Megatron-LM, TransformerEngine): head_parallel must divide the model's K/V heads.
/// The simulator and tuner also accept head_parallel as a multiple of the K/V heads (each K/V head
/// replicated on head_parallel / kv_heads ranks); such a plan is refused with an InputError that
/// names the heads, the rule and the head_parallel values that fit. `target` prefixes the message
/// (e.g. "megatron export").
void check_kv_heads_split(const ExportInput& input, std::string_view target, std::string_view framework);

}  // namespace sparsering
