#include "tuner/export/torch_export.hpp"

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "tuner/export/common_losses.hpp"
#include "tuner/export/plan_export_checks.hpp"
#include "tuner/export/plan_groups.hpp"
#include "tuner/export/torch_module_source.hpp"

namespace sparsering {

namespace {

// The heads a head-parallel rank holds, [first, end). K/V heads follow check_plan_against: split
// when head_parallel divides them, otherwise each K/V head is replicated on head_parallel /
// kv_heads consecutive head indices (the query heads of rank h all map to K/V head
// h x kv_heads / head_parallel under GQA).
nlohmann::json heads_of(const PlanConfig& plan, const ModelConfig& model, int64_t head_index) {
  const int64_t hp = plan.head_parallel;
  const int64_t q_per_rank = model.q_heads / hp;
  int64_t kv_first = 0;
  int64_t kv_end = 0;
  if (model.kv_heads % hp == 0) {
    kv_first = head_index * (model.kv_heads / hp);
    kv_end = kv_first + model.kv_heads / hp;
  } else {
    kv_first = head_index / (hp / model.kv_heads);
    kv_end = kv_first + 1;
  }
  return {{"q", {head_index * q_per_rank, (head_index + 1) * q_per_rank}}, {"kv", {kv_first, kv_end}}};
}

}  // namespace

std::string torch_plan_json(const PlanConfig& plan, const ModelConfig& model) {
  const int64_t local = plan.layout.local_len();
  require(local % plan.head_parallel == 0, "torch export: each ring position holds ", local,
          " tokens, which the head_parallel (", plan.head_parallel, ") ranks feeding it cannot split evenly");
  nlohmann::json levels = nlohmann::json::array();
  nlohmann::json level_rings = nlohmann::json::array();
  for (size_t l = 0; l < plan.ring_levels.size(); ++l) {
    levels.push_back({{"size", plan.ring_levels[l].size}, {"link", std::string(to_string(plan.ring_levels[l].link))}});
    level_rings.push_back(level_groups(plan, l));
  }
  nlohmann::json ranks = nlohmann::json::array();
  const std::vector<RankSlot> slots = rank_slots(plan);
  const int64_t slice = local / plan.head_parallel;
  for (int64_t g = 0; g < plan.world_size(); ++g) {
    const RankSlot& s = slots[static_cast<size_t>(g)];
    nlohmann::json level_index = nlohmann::json::array();
    nlohmann::json neighbours = nlohmann::json::array();
    for (size_t l = 0; l < plan.ring_levels.size(); ++l) {
      level_index.push_back(plan.level_index(s.position, l));
      int64_t stride = 1;
      for (size_t below = 0; below < l; ++below) stride *= plan.ring_levels[below].size;
      const int64_t size = plan.ring_levels[l].size;
      const int64_t index = plan.level_index(s.position, l);
      const int64_t prev = s.position + ((index + size - 1) % size - index) * stride;
      neighbours.push_back({{"level", l},
                            {"prev", plan.global_rank(s.ring, prev)},
                            {"next", plan.global_rank(s.ring, plan.next_position(s.position, l))}});
    }
    ranks.push_back({{"rank", g},
                     {"ring", s.ring},
                     {"cp_rank", s.position},
                     {"head_index", s.head_index},
                     {"replica", s.replica},
                     {"level_index", level_index},
                     {"neighbours", neighbours},
                     {"token_slice", {s.head_index * slice, (s.head_index + 1) * slice}},
                     {"heads", heads_of(plan, model, s.head_index)}});
  }
  nlohmann::json permutation = nlohmann::json::array();
  for (int32_t r = 0; r < plan.layout.ranks(); ++r) {
    std::vector<int64_t> row(static_cast<size_t>(local));
    for (int64_t i = 0; i < local; ++i) row[static_cast<size_t>(i)] = plan.layout.global_token(r, i);
    permutation.push_back(std::move(row));
  }
  const nlohmann::json doc = {
      {"format", "sparsering-torch-plan"},
      {"version", 2},
      {"plan", plan_label(plan)},
      {"world_size", plan.world_size()},
      {"context_parallel", plan.context_parallel},
      {"head_parallel", plan.head_parallel},
      {"data_parallel", plan.data_parallel},
      {"seq_len_tokens", plan.seq_len_tokens},
      {"micro_batch_sequences", plan.micro_batch_sequences},
      {"comm", std::string(to_string(plan.comm))},
      {"sparse",
       {{"enabled", plan.sparse.enabled},
        {"block_q", plan.sparse.block_q},
        {"block_k", plan.sparse.block_k},
        {"recall", plan.sparse.recall},
        {"max_verticals", plan.sparse.max_verticals},
        {"max_slashes", plan.sparse.max_slashes},
        {"last_q", plan.sparse.last_q}}},
      {"levels", levels},
      {"layout",
       {{"kind", std::string(to_string(plan.layout.kind()))},
        {"granularity_tokens", plan.layout.granularity_tokens()},
        {"local_tokens", local}}},
      {"rings", ring_groups(plan)},
      {"level_rings", level_rings},
      {"head_parallel_groups", head_parallel_groups(plan)},
      {"data_parallel_groups", data_parallel_groups(plan)},
      {"grad_sync_groups", grad_sync_groups(plan)},
      {"grad_sync",
       {{"zero_stage", plan.zero_stage},
        {"collective", plan.zero_stage >= 2 ? "reduce_scatter" : "all_reduce"},
        {"parameters", plan.zero_stage >= 3 ? "sharded" : "replicated"}}},
      {"attention_heads",
       {{"q_heads", model.q_heads},
        {"kv_heads", model.kv_heads},
        {"kv_head_replicas", model.kv_heads % plan.head_parallel == 0 ? 1 : plan.head_parallel / model.kv_heads}}},
      {"ranks", ranks},
      {"token_permutation", permutation}};
  return doc.dump() + "\n";
}

ExportBundle export_torch(const ExportInput& input) {
  check_export_input(input);
  const PlanConfig& plan = input.plan;
  ExportBundle bundle;
  bundle.target = "torch";
  bundle.plan_name = plan_label(plan);
  bundle.add_file("plan.json", torch_plan_json(plan, input.model));
  bundle.add_file("sparsering_plan.py", std::string(torch_module_source()));
  bundle.notes.push_back(str("plan.json + sparsering_plan.py: `import sparsering_plan; plan = sparsering_plan.load(",
                             "\"plan.json\"); me = plan.setup()` on every rank after init_process_group (",
                             plan.world_size(), " ranks) builds the rings, level rings, head-parallel, ",
                             "data-parallel and gradient-synchronisation groups and gives this rank's ring neighbours ",
                             "per level and its query and K/V heads"));
  bundle.notes.push_back("data: plan.permute_tokens(tensor, cp_rank) gives a ring position its tokens in local "
                         "order and plan.position_ids(cp_rank) their position ids; plan.local_token_ids(rank) is the "
                         "slice a head-parallel rank feeds; plan.unpermute_tokens(chunks) restores sequence order");
  bundle.notes.push_back("the attention itself (sparse or dense kernel, online-softmax merge) is the caller's: the "
                         "module carries the plan's groups, neighbours and layout exactly");
  return bundle;
}

}  // namespace sparsering
