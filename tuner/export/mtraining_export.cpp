#include "tuner/export/mtraining_export.hpp"

#include <cctype>
#include <map>
#include <sstream>

#include "common/error.hpp"
#include "tuner/export/common_losses.hpp"
#include "tuner/export/framework_rank_order.hpp"
#include "tuner/export/mtraining_pattern_config.hpp"
#include "tuner/export/plan_export_checks.hpp"
#include "tuner/export/plan_groups.hpp"
#include "tuner/export/token_permutation_file.hpp"

namespace sparsering {
namespace {

// MTraining's sparse kernel tiles keys in blocks of 64 (block_size_N); its query block is the
// `granularity` of the config, which is also the stripe size.
constexpr int64_t kMTrainingKeyBlock = 64;
// calc_index (minference/ops/op_utils/vertical_slash_utils.py) estimates the pattern from this
// many last queries; MTraining's ring ops do not pass another value.
constexpr int64_t kMTrainingLastQ = 64;

}  // namespace

std::string known_pattern_config(const std::string& model_name) {
  // The per-head budgets MInference published (configs in MInference's repository).
  static const std::map<std::string, std::string> known = {
      {"qwen2.5-3b", "Qwen2.5_3B_kv_out_v32_fit_o_best_pattern"},
      {"qwen2.5-7b", "Qwen2.5_7B_Instruct_1M"},
      {"llama-3.1-8b", "Llama_3.1_8B_Instruct_128k_kv_out_v32_fit_o_best_pattern"},
      {"llama-3-8b", "Llama_3_8B_Instruct_262k_kv_out_v32_fit_o_best_pattern"},
  };
  const auto it = known.find(model_name);
  return it == known.end() ? std::string() : it->second;
}

ExportBundle export_mtraining(const ExportInput& input, const ExportOptions& options) {
  check_export_input(input);
  const PlanConfig& plan = input.plan;
  ExportBundle bundle;
  bundle.target = "mtraining";
  bundle.plan_name = plan_label(plan);
  // A sparse plan's recall and caps are written as a flex pattern config unless the user names
  // another config; a dense plan has no recall, so it takes the published budget config.
  const bool write_flex = plan.sparse.enabled && options.pattern_config_name.empty();
  std::string pattern = options.pattern_config_name;
  if (write_flex) pattern = flex_pattern_config_name(plan, input.model);
  if (pattern.empty()) pattern = known_pattern_config(input.model.name);
  require(!pattern.empty(), "mtraining export: the plan is dense and no MInference pattern config is known for ",
          "model ", input.model.name, "; pass --pattern-config NAME (the per-head budget file MTraining loads)");
  for (const char c : pattern) {
    require(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.', "mtraining export: ",
            "pattern config name '", pattern, "' may only hold letters, digits, '_', '-' and '.'");
  }

  const int64_t heads = plan.head_parallel;
  const int64_t ring_size = heads * plan.context_parallel;
  if (heads > 1) {
    bundle.lost.push_back(str("head parallelism: MTraining (nnScaler) partitions the attention op either by sequence ",
                              "or by heads, not both; the plan's ", heads, " rings of ", plan.context_parallel,
                              " (each on 1/", heads, " of the heads) become one ring of ", ring_size,
                              " over all heads"));
  }
  const std::vector<size_t> levels = effective_levels(plan);
  std::string implementation;
  int64_t granularity = plan.sparse.block_q;
  switch (plan.layout.kind()) {
    case LayoutKind::striped:
      implementation = (levels.size() >= 2 && heads == 1) ? "dr_stripe" : "stripe";
      granularity = plan.layout.granularity_tokens();
      break;
    case LayoutKind::zigzag: implementation = "zigzag"; break;
    case LayoutKind::contiguous:
      implementation = "zigzag";
      bundle.lost.push_back("token layout: MTraining has no contiguous ring; closest equivalent written: zigzag "
                            "(contiguous chunks, balanced for dense causal attention)");
      break;
  }
  if (plan.layout.kind() == LayoutKind::striped && plan.sparse.block_q != granularity) {
    bundle.lost.push_back(str("block size: MTraining uses one granularity for the stripe and the query block; the ",
                              "plan has stripes of ", granularity, " tokens and query blocks of ", plan.sparse.block_q,
                              ". Closest equivalent written: granularity ", granularity));
  }
  if (plan.sparse.block_k != kMTrainingKeyBlock) {
    bundle.lost.push_back(str("block size: MTraining's key tile is ", kMTrainingKeyBlock, " tokens; the plan's block_k ",
                              plan.sparse.block_k, " cannot be selected"));
  }
  TokenLayout layout;
  try {
    layout = make_token_layout(plan.layout.kind() == LayoutKind::striped ? LayoutKind::striped : LayoutKind::zigzag,
                               plan.seq_len_tokens, static_cast<int32_t>(ring_size),
                               plan.layout.kind() == LayoutKind::striped ? granularity : 0);
  } catch (const InputError& error) {
    throw InputError(str("mtraining export: the layout over MTraining's ring of ", ring_size, ": ", error.what()));
  }

  if (write_flex) {
    const std::string file = str("minference_configs/", pattern, ".json");
    bundle.add_file(file, flex_pattern_config_json(plan, input.model));
    const std::string shipped = shipped_flex_pattern_config(plan, input.model);
    bundle.notes.push_back(str(
        "sparse budgets: ", file, " is a flex (top-p) pattern config holding the plan's recall ", plan.sparse.recall,
        " with caps of ", plan.sparse.max_verticals, " verticals and ", plan.sparse.max_slashes,
        " slashes for every head of every layer; MTraining loads <pattern_config_name>.json from MInference's ",
        "minference/configs/ folder, so copy the file there",
        shipped.empty() ? std::string() : str(" (MInference ships the same config as ", shipped, ".json)")));
    if (plan.sparse.last_q != kMTrainingLastQ) {
      bundle.lost.push_back(str("pattern estimation: MTraining estimates each head's verticals and slashes from the ",
                                "last ", kMTrainingLastQ, " queries (calc_index's last_q_size, not configurable); ",
                                "the plan's last_q ", plan.sparse.last_q, " cannot be selected"));
    }
  } else if (plan.sparse.enabled) {
    bundle.lost.push_back(str("sparse budgets: pattern config ", pattern, " (named with --pattern-config) sets the ",
                              "per-head budgets MTraining uses; the plan's top-p recall ", plan.sparse.recall,
                              ", caps of ", plan.sparse.max_verticals, " verticals and ", plan.sparse.max_slashes,
                              " slashes and last_q ", plan.sparse.last_q,
                              " apply only if that config says so. Leave --pattern-config out to export them as a ",
                              "flex pattern config"));
  } else {
    bundle.lost.push_back("dense attention: the plan is dense but MTraining's attention config always selects "
                          "MInference sparse attention; use a dense ring attention for this plan (the file is the "
                          "closest sparse equivalent)");
  }
  const std::vector<int64_t> order = framework_ring_order(plan, RankConvention::slot_order);
  // Ring structure: MTraining's rings are consecutive ranks (its scale unit); dr_stripe takes the
  // inner ring from the launcher's processes per node (LOCAL_WORLD_SIZE).
  if (implementation == "dr_stripe") {
    const int64_t inner = plan.ring_levels[levels.front()].size;
    if (levels.size() > 2) {
      bundle.lost.push_back(str("hierarchical ring: dr_stripe has two levels; the plan's ", levels.size(),
                                " levels become an inner ring of ", inner, " and an outer ring of ",
                                plan.context_parallel / inner, " (the outer levels flattened)"));
    }
    const std::string node_fit =
        inner == input.cluster.gpus_per_node
            ? std::string(" = the GPUs per node")
            : str("; the cluster has ", input.cluster.gpus_per_node,
                  " GPUs per node, so set LOCAL_WORLD_SIZE and LOCAL_RANK = rank mod ", inner, " yourself");
    bundle.notes.push_back(str("dr_stripe takes its inner ring from LOCAL_WORLD_SIZE and LOCAL_RANK: launch with ",
                               "LOCAL_WORLD_SIZE = ", inner, " (the plan's inner ring)", node_fit));
  } else if (levels.size() >= 2) {
    for (auto& line : describe_flattening(plan, input.cluster, order, str("MTraining ", implementation), heads)) {
      bundle.lost.push_back(line);
    }
  }
  auto order_change = describe_order_change(
      plan, input.cluster, order, "MTraining",
      str("each ring is ", ring_size, " consecutive ranks in ascending order (nnScaler scale unit)"), heads);
  if (!order_change.empty()) {
    for (auto& line : order_change) bundle.lost.push_back(line);
    bundle.add_file("rank_map.json", rank_map_json(plan, order, "mtraining"));
  }

  std::ostringstream yaml;
  yaml << "# MTraining attention config for plan " << bundle.plan_name
       << ", written by `sparsering export --to mtraining`.\n"
       << "# Ring: " << ring_size << " consecutive ranks per scale unit; what MTraining cannot express: NOTES.md.\n"
       << "pattern_config_name: " << pattern << "\n"
       << "implementation: " << implementation << "\n"
       << "granularity: " << granularity << "\n";
  bundle.add_file("mtraining_attn.yaml", yaml.str());
  add_token_permutation(bundle, layout, "MTraining ring rank (rank in the scale unit)");
  bundle.notes.push_back("MTraining's data loader keeps sequences contiguous: the attention op re-lays Q, K and V "
                         "out with an all-to-all into this layout and restores the output, so "
                         "token_permutation.npy is for checks");
  return bundle;
}

}  // namespace sparsering
