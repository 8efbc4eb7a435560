#include "tuner/export/torchtitan_export.hpp"

#include <sstream>

#include "common/error.hpp"
#include "tuner/export/common_losses.hpp"
#include "tuner/export/framework_rank_order.hpp"
#include "tuner/export/plan_export_checks.hpp"
#include "tuner/export/token_permutation_file.hpp"

namespace sparsering {

ExportBundle export_torchtitan(const ExportInput& input) {
  check_export_input(input);
  const PlanConfig& plan = input.plan;
  ExportBundle bundle;
  bundle.target = "torchtitan";
  bundle.plan_name = plan_label(plan);
  const int64_t heads = plan.head_parallel;
  const int64_t cp_degree = heads * plan.context_parallel;  // no Ulysses in torchtitan's CP: one flat ring
  if (heads > 1) {
    bundle.lost.push_back(str("head parallelism: torchtitan's context parallelism has no head-parallel (Ulysses) ",
                              "all-to-all; the plan's ", heads, " rings of ", plan.context_parallel,
                              " (each on 1/", heads, " of the heads) become one ring of ", cp_degree,
                              " over all heads. Closest equivalent written: context_parallel_degree = ", cp_degree));
  }
  TokenLayout layout;
  try {
    layout = make_token_layout(plan.layout.kind(), plan.seq_len_tokens, static_cast<int32_t>(cp_degree),
                               plan.layout.granularity_tokens());
  } catch (const InputError& error) {
    throw InputError(str("torchtitan export: the plan's layout over torchtitan's ", cp_degree,
                         " context-parallel ranks: ", error.what()));
  }

  std::string balancer;
  std::ostringstream balancer_comment;
  switch (plan.layout.kind()) {
    case LayoutKind::zigzag: balancer = "headtail"; break;
    case LayoutKind::striped:
      balancer = "ptrr";
      bundle.lost.push_back(str(
          "token layout: torchtitan's ptrr load balancer (FlexAttention only) deals BlockMask blocks (the BlockMask ",
          "block size, 128 tokens by default) to ranks in snake order of their causal work, not ",
          plan.layout.granularity_tokens(), "-token stripes round robin (stripe g to rank g mod ", cp_degree,
          "); under a plain causal mask rank r gets the blocks whose distance from the last block is r or ",
          2 * cp_degree - 1, " - r modulo ", 2 * cp_degree, ". Closest equivalent written: ptrr. ",
          "token_permutation.npy holds the plan's striped layout; a custom load balancer that applies it ",
          "reproduces the plan"));
      break;
    case LayoutKind::contiguous:
      balancer_comment << "# The plan's contiguous layout needs context_parallel_load_balancer = None (no load\n"
                       << "# balancing). TOML has no None: set it in the Python job config, or leave the key out if\n"
                       << "# your torchtitan defaults to None.\n";
      bundle.notes.push_back("contiguous layout: set parallelism.context_parallel_load_balancer to None (TOML cannot "
                             "spell None; see the comment in torchtitan.toml)");
      break;
  }
  const std::string rotate = plan.comm == CommPrimitive::p2p ? "alltoall" : "allgather";
  const int64_t replicate = plan.zero_stage == 0 ? plan.data_parallel : 1;
  const int64_t shard = plan.zero_stage == 0 ? 1 : plan.data_parallel;
  // torchtitan applies FSDP2 (ZeRO-3) over dp_shard x cp whenever either is above 1.
  const int64_t fsdp_ranks = shard * cp_degree;
  const bool plan_shards = plan.zero_stage > 0 && plan.data_parallel > 1;
  const bool same_sharding =
      fsdp_ranks == 1 ? !plan_shards : (plan.zero_stage == 3 && cp_degree == 1 && plan.data_parallel == fsdp_ranks);
  if (!same_sharding) {
    bundle.lost.push_back(str("parameter sharding: torchtitan applies FSDP2 (ZeRO stage 3: parameters, gradients and ",
                              "optimizer state sharded) over dp_shard x cp = ", shard, " x ", cp_degree, " = ",
                              fsdp_ranks, " ranks whenever either is above 1; the plan has ZeRO stage ", plan.zero_stage,
                              " over its ", plan.data_parallel, " data-parallel replicas. Closest equivalent written: ",
                              "data_parallel_replicate_degree = ", replicate, ", data_parallel_shard_degree = ", shard,
                              "; memory per GPU differs from the plan's prediction"));
  }

  std::ostringstream toml;
  toml << "# torchtitan job config fragment for plan " << bundle.plan_name
       << ", written by `sparsering export --to torchtitan`.\n"
       << "# Merge into your job config. Mesh (outer -> inner): pp 1, dp_replicate " << replicate << ", dp_shard "
       << shard << ", cp " << cp_degree << ", tp 1 = " << plan.world_size() << " ranks.\n"
       << "# What torchtitan cannot express of the plan: NOTES.md.\n"
       << "[parallelism]\n"
       << "data_parallel_replicate_degree = " << replicate << "\n"
       << "data_parallel_shard_degree = " << shard << "\n"
       << "tensor_parallel_degree = 1\n"
       << "pipeline_parallel_degree = 1\n"
       << "context_parallel_degree = " << cp_degree << "\n"
       << "context_parallel_rotate_method = \"" << rotate << "\"\n";
  if (!balancer.empty()) {
    toml << "context_parallel_load_balancer = \"" << balancer << "\"\n";
  } else {
    toml << balancer_comment.str();
  }
  toml << "\n[training]\n"
       << "seq_len = " << plan.seq_len_tokens << "\n"
       << "local_batch_size = " << plan.micro_batch_sequences << "\n"
       << "\n[activation_checkpoint]\n"
       << "mode = \"" << to_string(plan.recompute) << "\"\n";
  bundle.add_file("torchtitan.toml", toml.str());

  if (auto loss = dense_attention_loss(plan, "torchtitan (SDPA / FlexAttention ring)")) bundle.lost.push_back(*loss);
  const std::vector<int64_t> order = framework_ring_order(plan, RankConvention::slot_order);
  for (auto& line : describe_flattening(plan, input.cluster, order, "torchtitan", heads)) bundle.lost.push_back(line);
  auto order_change = describe_order_change(plan, input.cluster, order, "torchtitan",
                                            convention_rule(RankConvention::slot_order), heads);
  if (!order_change.empty()) {
    for (auto& line : order_change) bundle.lost.push_back(line);
    bundle.add_file("rank_map.json", rank_map_json(plan, order, "torchtitan"));
  }
  add_token_permutation(bundle, layout, "torchtitan context-parallel rank (index on the cp mesh dimension)");
  bundle.notes.push_back("torchtitan shards the sequence itself inside its context_parallel() buffers (with the "
                         "load balancer above) and shards position ids (freqs_cis) the same way; the data loader keeps "
                         "whole sequences");
  return bundle;
}

}  // namespace sparsering
