#include "tuner/export/plan_export_checks.hpp"

#include <string>
#include <vector>

#include "common/error.hpp"

namespace sparsering {
namespace {

constexpr int64_t kMaxWorld = int64_t{1} << 20;

}  // namespace

void check_plan_structure(const PlanConfig& plan) {
  const std::string name = plan.name.empty() ? std::string("plan") : str("plan ", plan.name);
  require(plan.context_parallel >= 1 && plan.head_parallel >= 1 && plan.data_parallel >= 1, name,
          ": context_parallel, head_parallel and data_parallel must be >= 1, got ", plan.context_parallel, ", ",
          plan.head_parallel, ", ", plan.data_parallel);
  require(plan.context_parallel <= kMaxWorld && plan.head_parallel <= kMaxWorld && plan.data_parallel <= kMaxWorld &&
              plan.world_size() <= kMaxWorld,
          name, ": a world of context_parallel x head_parallel x data_parallel = ", plan.context_parallel, " x ",
          plan.head_parallel, " x ", plan.data_parallel, " ranks is more than 2^20");
  const int64_t world = plan.world_size();
  require(static_cast<int64_t>(plan.ring_order.size()) == world, name, ": ring.order lists ", plan.ring_order.size(),
          " ranks but the world has context_parallel x head_parallel x data_parallel = ", plan.context_parallel, " x ",
          plan.head_parallel, " x ", plan.data_parallel, " = ", world);
  std::vector<int64_t> seen_at(static_cast<size_t>(world), -1);
  for (size_t i = 0; i < plan.ring_order.size(); ++i) {
    const int64_t rank = plan.ring_order[i];
    require(rank >= 0 && rank < world, name, ": ring.order[", i, "] is rank ", rank,
            ", which does not exist in a world of ", world, " ranks (0 .. ", world - 1, ")");
    int64_t& seen = seen_at[static_cast<size_t>(rank)];
    require(seen < 0, name, ": ring.order[", i, "] repeats rank ", rank, " (also at [", seen, "])");
    seen = static_cast<int64_t>(i);
  }
  require(!plan.ring_levels.empty(), name, ": ring.levels must list at least one level");
  int64_t product = 1;
  for (size_t l = 0; l < plan.ring_levels.size(); ++l) {
    const int64_t size = plan.ring_levels[l].size;
    require(size >= 1 && size <= kMaxWorld, name, ": ring.levels[", l, "].size must be in [1, 2^20], got ", size);
    product *= size;
    require(product <= kMaxWorld, name, ": ring.levels sizes multiply to more than 2^20");
  }
  require(product == plan.context_parallel, name, ": ring.levels sizes multiply to ", product,
          " but context_parallel is ", plan.context_parallel);
  require(plan.layout.ranks() == plan.context_parallel, name, ": the token layout is over ", plan.layout.ranks(),
          " ranks but context_parallel is ", plan.context_parallel);
  require(plan.layout.seq_len_tokens() == plan.seq_len_tokens, name, ": the token layout covers ",
          plan.layout.seq_len_tokens(), " tokens but seq_len_tokens is ", plan.seq_len_tokens);
  require(plan.micro_batch_sequences >= 1, name, ": micro_batch_sequences must be >= 1, got ",
          plan.micro_batch_sequences);
}

void check_export_input(const ExportInput& input) {
  check_plan_structure(input.plan);
  check_plan_against(input.plan, input.model, input.cluster);
}

void check_kv_heads_split(const ExportInput& input, std::string_view target, std::string_view framework) {
  const int64_t heads = input.plan.head_parallel;
  const int64_t kv_heads = input.model.kv_heads;
  if (heads <= 1 || kv_heads % heads == 0) return;
  std::string fitting;
  for (int64_t h = 1; h <= kv_heads; ++h) {
    if (kv_heads % h == 0 && input.model.q_heads % h == 0) fitting += str(fitting.empty() ? "" : ", ", h);
  }
  throw InputError(str(
      target, ": head_parallel ", heads, " does not divide the ", kv_heads, " K/V heads of model ", input.model.name,
      ". The simulator and tuner accept it by replicating each K/V head on head_parallel / kv_heads = ",
      heads / kv_heads, " ranks, but ", framework,
      "'s head-parallel (a2a) context parallelism splits the K/V heads over the a2a group and needs kv_heads % ",
      "head_parallel == 0 (TransformerEngine's all-to-all reshapes K and V into head_parallel head groups and fails ",
      "at the first forward). Choose head_parallel from {", fitting, "}, or export to torch, whose plan.json carries ",
      "the K/V heads of every rank"));
}

}  // namespace sparsering
