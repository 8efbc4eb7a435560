#include "tuner/export/te_export.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "tuner/export/common_losses.hpp"
#include "tuner/export/framework_rank_order.hpp"
#include "tuner/export/plan_export_checks.hpp"
#include "tuner/export/plan_groups.hpp"
#include "tuner/export/token_permutation_file.hpp"

namespace sparsering {
namespace {

// TE's list of one replica: entry h + H x p is the rank at head index h, position p.
std::vector<int64_t> replica_list(const PlanConfig& plan, const std::vector<int64_t>& order, int64_t replica) {
  const int64_t heads = plan.head_parallel;
  std::vector<int64_t> list(static_cast<size_t>(heads * plan.context_parallel));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t p = 0; p < plan.context_parallel; ++p) {
      list[static_cast<size_t>(h + heads * p)] =
          order[static_cast<size_t>(slot_index(plan, replica * heads + h, p))];
    }
  }
  return list;
}

bool te_consistent(const PlanConfig& plan, const std::vector<int64_t>& order) {
  const int64_t heads = plan.head_parallel;
  for (int64_t d = 0; d < plan.data_parallel; ++d) {
    const std::vector<int64_t> list = replica_list(plan, order, d);
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t p = 0; p < plan.context_parallel; ++p) {
        const int64_t rank = list[static_cast<size_t>(h + heads * p)];
        if (p > 0 && list[static_cast<size_t>(h + heads * (p - 1))] > rank) return false;
        if (h > 0 && list[static_cast<size_t>(h - 1 + heads * p)] > rank) return false;
      }
    }
  }
  return true;
}

const char* kSetupPy = R"PY("""Sets TransformerEngine context parallelism from te_cp_groups.json.

Written by `sparsering export --to te`. Call after torch.distributed.init_process_group, on every
rank (torch.distributed.new_group must be called by all ranks for every group, in the same order):

    from te_cp_setup import setup_te_context_parallel
    cp_group, cp_global_ranks = setup_te_context_parallel(attention_modules)

where attention_modules are the transformer_engine.pytorch DotProductAttention (or
TransformerLayer) modules of the model. The data loader must give context-parallel rank c (the
index of this rank in cp_global_ranks) the tokens of row c of token_permutation.npy.
"""
import json
import os

import torch
import torch.distributed as dist


def load_te_cp_groups(path=None):
    """Reads te_cp_groups.json (default: beside this file)."""
    if path is None:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "te_cp_groups.json")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def setup_te_context_parallel(attention_modules, path=None, cp_stream=None):
    """Builds the groups and calls set_context_parallel_group on every module.

    Returns (cp_group, cp_global_ranks) of this rank; cp_group is [a2a_group, p2p_group] for a2a+p2p.
    """
    spec = load_te_cp_groups(path)
    world = dist.get_world_size()
    rank = dist.get_rank()
    if spec["world_size"] != world:
        raise RuntimeError(
            f"te_cp_groups.json is for {spec['world_size']} ranks but the running world has {world}")
    comm_type = spec["cp_comm_type"]
    hierarchical = comm_type == "a2a+p2p"
    mine = None
    for entry in spec["groups"]:
        ranks = entry["cp_global_ranks"]
        if any(r < 0 or r >= world for r in ranks):
            raise RuntimeError(f"te_cp_groups.json lists ranks {ranks}, outside a world of {world}")
        if hierarchical:
            a2a = [(g, dist.new_group(g)) for g in entry["a2a_groups"]]
            p2p = [(g, dist.new_group(g)) for g in entry["p2p_groups"]]
            if rank in ranks:
                a2a_group = next(group for g, group in a2a if rank in g)
                p2p_group = next(group for g, group in p2p if rank in g)
                mine = ([a2a_group, p2p_group], ranks)
        else:
            group = dist.new_group(ranks)
            if rank in ranks:
                mine = (group, ranks)
    if mine is None:
        raise RuntimeError(f"rank {rank} is in no context-parallel group of te_cp_groups.json")
    if cp_stream is None and torch.cuda.is_available():
        cp_stream = torch.cuda.Stream()
    for module in attention_modules:
        module.set_context_parallel_group(mine[0], mine[1], cp_stream, comm_type)
    return mine
)PY";

}  // namespace

std::vector<int64_t> te_ring_order(const PlanConfig& plan) {
  if (te_consistent(plan, plan.ring_order)) return plan.ring_order;
  // Closest: keep every ring's members and sort them.
  std::vector<int64_t> order = plan.ring_order;
  for (int64_t ring = 0; ring < plan.ring_count(); ++ring) {
    const auto first = order.begin() + static_cast<std::ptrdiff_t>(ring * plan.context_parallel);
    std::sort(first, first + static_cast<std::ptrdiff_t>(plan.context_parallel));
  }
  if (te_consistent(plan, order)) return order;
  // Otherwise keep each replica's members, sorted and dealt with the a2a index fastest.
  const int64_t heads = plan.head_parallel;
  for (int64_t d = 0; d < plan.data_parallel; ++d) {
    std::vector<int64_t> members = replica_list(plan, plan.ring_order, d);
    std::sort(members.begin(), members.end());
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t p = 0; p < plan.context_parallel; ++p) {
        order[static_cast<size_t>(slot_index(plan, d * heads + h, p))] = members[static_cast<size_t>(h + heads * p)];
      }
    }
  }
  return order;
}

ExportBundle export_te(const ExportInput& input) {
  check_export_input(input);
  check_kv_heads_split(input, "te export", "TransformerEngine");
  const PlanConfig& plan = input.plan;
  ExportBundle bundle;
  bundle.target = "te";
  bundle.plan_name = plan_label(plan);
  const int64_t heads = plan.head_parallel;
  const int64_t ring = plan.context_parallel;
  const int64_t cp_size = heads * ring;
  std::string comm;
  if (heads == 1) {
    comm = std::string(to_string(plan.comm));
  } else if (ring == 1) {
    comm = "a2a";
  } else {
    comm = "a2a+p2p";
    if (plan.comm == CommPrimitive::all_gather) {
      bundle.lost.push_back(str("communication primitive: TransformerEngine combines a2a only with a p2p ring ",
                                "(a2a+p2p); the plan's all_gather of K/V inside each ring of ", ring,
                                " is replaced by the p2p ring"));
    }
  }
  require(plan.seq_len_tokens % (2 * cp_size) == 0, "te export: TransformerEngine's causal context parallelism splits ",
          "the sequence into 2 x context-parallel size = ", 2 * cp_size, " chunks, but seq_len_tokens is ",
          plan.seq_len_tokens);

  const std::vector<int64_t> order = te_ring_order(plan);
  nlohmann::json groups = nlohmann::json::array();
  for (int64_t d = 0; d < plan.data_parallel; ++d) {
    const std::vector<int64_t> list = replica_list(plan, order, d);
    nlohmann::json entry = {{"replica", d}, {"cp_global_ranks", list}};
    if (comm == "a2a+p2p") {
      nlohmann::json a2a = nlohmann::json::array();
      nlohmann::json p2p = nlohmann::json::array();
      for (int64_t p = 0; p < ring; ++p) {
        std::vector<int64_t> group;
        for (int64_t h = 0; h < heads; ++h) group.push_back(list[static_cast<size_t>(h + heads * p)]);
        a2a.push_back(group);
      }
      for (int64_t h = 0; h < heads; ++h) {
        std::vector<int64_t> group;
        for (int64_t p = 0; p < ring; ++p) group.push_back(list[static_cast<size_t>(h + heads * p)]);
        p2p.push_back(group);
      }
      entry["a2a_groups"] = a2a;
      entry["p2p_groups"] = p2p;
    }
    groups.push_back(entry);
  }
  const nlohmann::json doc = {{"format", "sparsering-te-cp-groups"},
                              {"version", 1},
                              {"plan", bundle.plan_name},
                              {"world_size", plan.world_size()},
                              {"cp_comm_type", comm},
                              {"cp_size", cp_size},
                              {"a2a_size", heads},
                              {"p2p_size", ring},
                              {"groups", groups}};
  bundle.add_file("te_cp_groups.json", doc.dump(1) + "\n");
  bundle.add_file("te_cp_setup.py", kSetupPy);

  if (auto loss = dense_attention_loss(plan, "TransformerEngine")) bundle.lost.push_back(*loss);
  if (auto loss = zigzag_only_loss(plan, "TransformerEngine")) bundle.lost.push_back(*loss);
  for (auto& line : describe_flattening(plan, input.cluster, order, "TransformerEngine")) bundle.lost.push_back(line);
  auto order_change = describe_order_change(
      plan, input.cluster, order, "TransformerEngine",
      "a rank's ring position is its rank in the torch.distributed group, i.e. ascending global rank, so every p2p "
      "ring and a2a group of cp_global_ranks must ascend");
  if (!order_change.empty()) {
    for (auto& line : order_change) bundle.lost.push_back(line);
    bundle.add_file("rank_map.json", rank_map_json(plan, order, "te"));
  }
  add_token_permutation(bundle, make_token_layout(LayoutKind::zigzag, plan.seq_len_tokens, static_cast<int32_t>(cp_size)),
                        "the rank at index r of cp_global_ranks");
  bundle.notes.push_back("te_cp_setup.py: call setup_te_context_parallel(attention_modules) on every rank after "
                         "init_process_group; it checks the world size and calls set_context_parallel_group");
  return bundle;
}

}  // namespace sparsering
