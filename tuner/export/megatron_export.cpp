#include "tuner/export/megatron_export.hpp"

#include <sstream>

#include "common/error.hpp"
#include "tuner/export/common_losses.hpp"
#include "tuner/export/framework_rank_order.hpp"
#include "tuner/export/plan_export_checks.hpp"
#include "tuner/export/plan_groups.hpp"
#include "tuner/export/token_permutation_file.hpp"

namespace sparsering {

ExportBundle export_megatron(const ExportInput& input) {
  check_export_input(input);
  check_kv_heads_split(input, "megatron export", "Megatron-LM");
  const PlanConfig& plan = input.plan;
  ExportBundle bundle;
  bundle.target = "megatron";
  bundle.plan_name = plan_label(plan);

  const int64_t heads = plan.head_parallel;
  const int64_t ring = plan.context_parallel;
  const int64_t cp_size = heads * ring;  // Megatron's CP group holds the a2a and the p2p dimension
  std::string comm;
  if (heads == 1) {
    comm = std::string(to_string(plan.comm));
  } else if (ring == 1) {
    comm = "a2a";
  } else {
    comm = "a2a+p2p";
    if (plan.comm == CommPrimitive::all_gather) {
      bundle.lost.push_back(str("communication primitive: Megatron combines head parallelism (a2a) only with a p2p ring ",
                                "(a2a+p2p); the plan's all_gather of K/V inside each ring of ", ring,
                                " is replaced by the p2p ring"));
    }
  }
  require(plan.seq_len_tokens % (2 * cp_size) == 0, "megatron export: Megatron's data loader splits the sequence into ",
          "2 x context-parallel size = ", 2 * cp_size, " chunks, but seq_len_tokens is ", plan.seq_len_tokens);

  std::ostringstream args;
  args << "# Megatron-LM arguments for plan " << bundle.plan_name << ", written by `sparsering export --to megatron`.\n"
       << "# Launch " << plan.world_size() << " processes: tensor 1 x context " << cp_size << " x data "
       << plan.data_parallel << " x pipeline 1. Megatron orders ranks tp-cp-ep-dp-pp (tensor index fastest), so\n"
       << "# rank = context-parallel rank + " << cp_size << " x data-parallel rank";
  if (heads > 1) args << "; inside a context-parallel group the a2a index varies fastest";
  args << ".\n"
       << "# Usage: source megatron_args.sh; torchrun ... pretrain_gpt.py \"${SPARSERING_MEGATRON_ARGS[@]}\" ...\n"
       << "# What Megatron cannot express of the plan, and the data layout: NOTES.md.\n"
       << "SPARSERING_MEGATRON_ARGS=(\n"
       << "  --tensor-model-parallel-size 1\n"
       << "  --pipeline-model-parallel-size 1\n"
       << "  --context-parallel-size " << cp_size << "\n"
       << "  --cp-comm-type " << comm << "\n";
  if (comm == "a2a+p2p") args << "  --hierarchical-context-parallel-sizes " << heads << " " << ring << "\n";
  args << "  --seq-length " << plan.seq_len_tokens << "\n"
       << "  --micro-batch-size " << plan.micro_batch_sequences << "\n";
  switch (plan.recompute) {
    case RecomputeMode::none: break;
    case RecomputeMode::selective: args << "  --recompute-granularity selective\n"; break;
    case RecomputeMode::full:
      args << "  --recompute-granularity full\n  --recompute-method uniform\n  --recompute-num-layers 1\n";
      break;
  }
  if (plan.zero_stage >= 1) args << "  --use-distributed-optimizer\n";
  args << ")\n";
  bundle.add_file("megatron_args.sh", args.str());

  if (plan.zero_stage >= 2) {
    bundle.lost.push_back(str("ZeRO stage ", plan.zero_stage, ": Megatron's distributed optimizer shards the optimizer ",
                              "state over data-parallel ranks (stage 1); stage ", plan.zero_stage,
                              " needs Megatron's FSDP options instead. Closest equivalent written: ",
                              "--use-distributed-optimizer"));
  }
  if (auto loss = dense_attention_loss(plan, "Megatron (TransformerEngine attention)")) bundle.lost.push_back(*loss);
  if (auto loss = zigzag_only_loss(plan, "Megatron")) bundle.lost.push_back(*loss);

  const std::vector<int64_t> order = framework_ring_order(plan, RankConvention::head_fastest);
  for (auto& line : describe_flattening(plan, input.cluster, order, "Megatron")) bundle.lost.push_back(line);
  auto order_change =
      describe_order_change(plan, input.cluster, order, "Megatron", convention_rule(RankConvention::head_fastest));
  if (!order_change.empty()) {
    for (auto& line : order_change) bundle.lost.push_back(line);
    bundle.add_file("rank_map.json", rank_map_json(plan, order, "megatron"));
  }

  const TokenLayout loader_layout =
      make_token_layout(LayoutKind::zigzag, plan.seq_len_tokens, static_cast<int32_t>(cp_size));
  add_token_permutation(bundle, loader_layout, "Megatron context-parallel rank (rank in the context-parallel group)");
  bundle.notes.push_back(str("Megatron's get_batch_on_this_cp_rank applies this zigzag split itself; the file lets a ",
                             "custom data loader or a check reproduce it. Position ids must follow the same reorder"));
  if (heads > 1) {
    bundle.notes.push_back(str("with a2a+p2p the ", heads, " ranks of an a2a group exchange their sequence chunks, so ",
                               "ring position p of the p2p ring works on the tokens of context-parallel ranks ",
                               heads, " x p .. ", heads, " x p + ", heads - 1,
                               " - for zigzag the same token set as the plan's ring position p"));
  }
  return bundle;
}

}  // namespace sparsering
