#include "tuner/export/common_losses.hpp"

#include "common/error.hpp"

namespace sparsering {

std::optional<std::string> dense_attention_loss(const PlanConfig& plan, std::string_view framework) {
  if (!plan.sparse.enabled) return std::nullopt;
  return str("dynamic sparse attention: ", framework, " computes dense causal attention in its ring, so the plan's ",
             "vertical-slash sparsity (recall ", plan.sparse.recall, ", at most ", plan.sparse.max_verticals,
             " verticals and ", plan.sparse.max_slashes, " slashes per head, estimated from the last ", plan.sparse.last_q,
             " queries, blocks ", plan.sparse.block_q, " x ", plan.sparse.block_k,
             ") is not applied; step times follow dense ring attention, not the plan's prediction");
}

std::optional<std::string> zigzag_only_loss(const PlanConfig& plan, std::string_view framework) {
  if (plan.layout.kind() == LayoutKind::zigzag) return std::nullopt;
  return str("token layout: ", framework, "'s causal ring attention and data loader use the zigzag layout ",
             "(DualChunkSwap: context-parallel rank r holds chunks r and 2 x CP - 1 - r); the plan's ",
             layout_text(plan.layout), " layout cannot be selected. Closest equivalent written: zigzag, which under dynamic ",
             "sparsity spreads the heavy local-window diagonals unevenly over ranks (MTraining reports a worker ",
             "imbalance above 2 for zigzag, about 1.0 for striped)");
}

std::string layout_text(const TokenLayout& layout) {
  if (layout.kind() == LayoutKind::striped) return str("striped (granularity ", layout.granularity_tokens(), " tokens)");
  return std::string(to_string(layout.kind()));
}

std::string plan_label(const PlanConfig& plan) {
  if (!plan.name.empty()) return plan.name;
  if (!plan.source_path.empty()) return plan.source_path.filename().string();
  return "plan";
}

}  // namespace sparsering
