#include "tuner/export/torchtitan_export.hpp"

#include <optional>
#include <sstream>

#include "common/error.hpp"
#include "tuner/export/common_losses.hpp"
#include "tuner/export/framework_rank_order.hpp"
#include "tuner/export/plan_export_checks.hpp"
#include "tuner/export/token_permutation_file.hpp"

namespace sparsering {
namespace {

// What both forms set: torchtitan's degrees, load balancer and training shape for the plan.
struct TorchtitanSettings {
  int64_t replicate = 1;
  int64_t shard = 1;
  int64_t cp_degree = 1;
  std::optional<std::string> balancer;  ///< std::nullopt = None (no load balancing)
  std::string rotate;                   ///< v0.2 only: "alltoall" (p2p ring) or "allgather"
};

std::string python_config(const PlanConfig& plan, const std::string& plan_name, const TorchtitanSettings& s) {
  std::string ac;
  std::string ac_import;
  switch (plan.recompute) {
    case RecomputeMode::none: ac = "None"; break;
    case RecomputeMode::selective:
      ac = "SelectiveAC.Config()";
      ac_import = "SelectiveAC";
      break;
    case RecomputeMode::full:
      ac = "FullAC.Config()";
      ac_import = "FullAC";
      break;
  }
  std::ostringstream py;
  py << "\"\"\"torchtitan configuration for plan " << plan_name << ", written by `sparsering export --to torchtitan`.\n"
     << "\n"
     << "Follows torchtitan at commit " << kTorchtitanCommit << " (after v0.2.2),\n"
     << "where a run is a Python Trainer.Config (torchtitan/trainer.py; ParallelismConfig and TrainingConfig in\n"
     << "torchtitan/config/configs.py; activation checkpointing in torchtitan/distributed/activation_checkpoint.py).\n"
     << "Apply the plan to the configuration function of your run:\n"
     << "\n"
     << "    from torchtitan_config import apply_sparsering_plan\n"
     << "\n"
     << "    def my_run() -> Trainer.Config:\n"
     << "        return apply_sparsering_plan(my_base_run())\n"
     << "\n"
     << "and launch it with NGPU=" << plan.world_size() << ". Mesh (outer -> inner): pp 1, dp_replicate " << s.replicate
     << ", dp_shard " << s.shard << ", cp " << s.cp_degree << ", tp 1 = " << plan.world_size() << " ranks.\n"
     << "What torchtitan cannot express of the plan: NOTES.md.\n"
     << "\"\"\"\n"
     << "\n"
     << "TORCHTITAN_COMMIT = \"" << kTorchtitanCommit << "\"\n"
     << "WORLD_SIZE = " << plan.world_size() << "\n"
     << "\n"
     << "\n"
     << "def apply_sparsering_plan(config):\n"
     << "    \"\"\"Sets the plan's degrees, sequence shape and activation checkpointing on a Trainer.Config.\"\"\"\n";
  if (!ac_import.empty()) {
    py << "    from torchtitan.distributed.activation_checkpoint import " << ac_import << "\n\n";
  }
  py << "    parallelism = config.parallelism\n"
     << "    parallelism.data_parallel_replicate_degree = " << s.replicate << "\n"
     << "    parallelism.data_parallel_shard_degree = " << s.shard << "\n"
     << "    parallelism.tensor_parallel_degree = 1\n"
     << "    parallelism.pipeline_parallel_degree = 1\n"
     << "    parallelism.context_parallel_degree = " << s.cp_degree << "\n"
     << "    parallelism.context_parallel_load_balancer = "
     << (s.balancer ? "\"" + *s.balancer + "\"" : std::string("None")) << "\n";
  // validate_cp_backend (torchtitan/distributed/context_parallel/api.py) refuses CP otherwise.
  if (s.cp_degree > 1) py << "    parallelism.spmd_backend = \"spmd_types\"\n";
  py << "    training = config.training\n"
     << "    training.max_context_length = " << plan.seq_len_tokens << "\n"
     << "    training.num_tokens_per_microbatch_per_dp_rank = " << plan.seq_len_tokens * plan.micro_batch_sequences
     << "\n"
     << "    config.activation_checkpoint = " << ac << "\n"
     << "    return config\n";
  return py.str();
}

std::string toml_v0_2(const PlanConfig& plan, const std::string& plan_name, const TorchtitanSettings& s) {
  std::ostringstream toml;
  toml << "# torchtitan job config fragment for plan " << plan_name
       << ", written by `sparsering export --to torchtitan --torchtitan-format toml-v0.2`.\n"
       << "# For torchtitan up to v0.2.2 (TOML job config; later torchtitan takes a Python Trainer.Config).\n"
       << "# Merge into your job config. Mesh (outer -> inner): pp 1, dp_replicate " << s.replicate << ", dp_shard "
       << s.shard << ", cp " << s.cp_degree << ", tp 1 = " << plan.world_size() << " ranks.\n"
       << "# What torchtitan cannot express of the plan: NOTES.md.\n"
       << "[parallelism]\n"
       << "data_parallel_replicate_degree = " << s.replicate << "\n"
       << "data_parallel_shard_degree = " << s.shard << "\n"
       << "tensor_parallel_degree = 1\n"
       << "pipeline_parallel_degree = 1\n"
       << "context_parallel_degree = " << s.cp_degree << "\n"
       << "context_parallel_rotate_method = \"" << s.rotate << "\"\n";
  if (s.balancer) {
    toml << "context_parallel_load_balancer = \"" << *s.balancer << "\"\n";
  } else {
    toml << "# The plan's contiguous layout needs context_parallel_load_balancer = None (no load\n"
         << "# balancing). TOML has no None: set it in the Python job config, or leave the key out if\n"
         << "# your torchtitan defaults to None.\n";
  }
  toml << "\n[training]\n"
       << "seq_len = " << plan.seq_len_tokens << "\n"
       << "local_batch_size = " << plan.micro_batch_sequences << "\n"
       << "\n[activation_checkpoint]\n"
       << "mode = \"" << to_string(plan.recompute) << "\"\n";
  return toml.str();
}

}  // namespace

ExportBundle export_torchtitan(const ExportInput& input, TorchtitanFormat format) {
  check_export_input(input);
  const PlanConfig& plan = input.plan;
  ExportBundle bundle;
  bundle.target = "torchtitan";
  bundle.plan_name = plan_label(plan);
  const int64_t heads = plan.head_parallel;
  TorchtitanSettings settings;
  settings.cp_degree = heads * plan.context_parallel;  // no Ulysses in torchtitan's CP: one flat ring
  const int64_t cp_degree = settings.cp_degree;
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

  switch (plan.layout.kind()) {
    case LayoutKind::zigzag: settings.balancer = "headtail"; break;
    case LayoutKind::striped:
      settings.balancer = "ptrr";
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
      settings.balancer = std::nullopt;
      if (format == TorchtitanFormat::toml_v0_2) {
        bundle.notes.push_back("contiguous layout: set parallelism.context_parallel_load_balancer to None (TOML cannot "
                               "spell None; see the comment in torchtitan.toml)");
      }
      break;
  }
  settings.rotate = plan.comm == CommPrimitive::p2p ? "alltoall" : "allgather";
  settings.replicate = plan.zero_stage == 0 ? plan.data_parallel : 1;
  settings.shard = plan.zero_stage == 0 ? 1 : plan.data_parallel;
  // torchtitan applies FSDP2 (ZeRO-3) over dp_shard x cp whenever either is above 1.
  const int64_t fsdp_ranks = settings.shard * cp_degree;
  const bool plan_shards = plan.zero_stage > 0 && plan.data_parallel > 1;
  const bool same_sharding =
      fsdp_ranks == 1 ? !plan_shards : (plan.zero_stage == 3 && cp_degree == 1 && plan.data_parallel == fsdp_ranks);
  if (!same_sharding) {
    bundle.lost.push_back(str("parameter sharding: torchtitan applies FSDP2 (ZeRO stage 3: parameters, gradients and ",
                              "optimizer state sharded) over dp_shard x cp = ", settings.shard, " x ", cp_degree, " = ",
                              fsdp_ranks, " ranks whenever either is above 1; the plan has ZeRO stage ", plan.zero_stage,
                              " over its ", plan.data_parallel, " data-parallel replicas. Closest equivalent written: ",
                              "data_parallel_replicate_degree = ", settings.replicate, ", data_parallel_shard_degree = ",
                              settings.shard, "; memory per GPU differs from the plan's prediction"));
  }

  if (format == TorchtitanFormat::python) {
    if (cp_degree > 1 && plan.comm == CommPrimitive::p2p) {
      bundle.lost.push_back(str(
          "communication primitive: torchtitan at ", kTorchtitanCommit, " has no rotate-method option (v0.2.2's ",
          "context_parallel_rotate_method is gone); its context-parallel attention runs PyTorch's _ContextParallel ",
          "with PyTorch's default K/V rotation (all-gather), not the plan's p2p ring. Closest equivalent: call ",
          "torch.distributed.tensor.experimental._attention.set_rotate_method(\"alltoall\") before training to rotate ",
          "K/V around the ring"));
    }
    bundle.add_file("torchtitan_config.py", python_config(plan, bundle.plan_name, settings));
    bundle.notes.push_back(str("torchtitan_config.py: apply_sparsering_plan(config) sets the plan on the Trainer.Config ",
                               "of your run (torchtitan at ", kTorchtitanCommit, "); for torchtitan up to v0.2.2 ",
                               "export with --torchtitan-format toml-v0.2"));
  } else {
    bundle.add_file("torchtitan.toml", toml_v0_2(plan, bundle.plan_name, settings));
    bundle.notes.push_back("torchtitan.toml: job-config fragment for torchtitan up to v0.2.2; current torchtitan takes "
                           "a Python Trainer.Config (export without --torchtitan-format)");
  }

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
  bundle.notes.push_back("torchtitan shards the sequence itself when it prepares the context-parallel inputs (with "
                         "the load balancer above) and shards the positions the same way; the data loader keeps "
                         "whole sequences");
  return bundle;
}

}  // namespace sparsering
