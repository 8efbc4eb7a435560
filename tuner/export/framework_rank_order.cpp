#include "tuner/export/framework_rank_order.hpp"

#include <map>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "tuner/export/plan_groups.hpp"

namespace sparsering {
namespace {

std::string counts_text(const std::map<std::string, int64_t>& counts) {
  std::string text;
  for (const auto& [kind, count] : counts) {
    text += (text.empty() ? "" : ", ") + std::to_string(count) + " over " + kind;
  }
  return text.empty() ? std::string("no hops") : text;
}

std::string ranks_text(const std::vector<int64_t>& ranks, size_t max_shown) {
  std::string text = "[";
  for (size_t i = 0; i < ranks.size() && i < max_shown; ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > max_shown) text += str(", ... (", ranks.size(), " ranks)");
  return text + "]";
}

std::vector<int64_t> ring_slice(const PlanConfig& plan, const std::vector<int64_t>& order, int64_t ring) {
  const auto first = order.begin() + static_cast<std::ptrdiff_t>(ring * plan.context_parallel);
  return {first, first + static_cast<std::ptrdiff_t>(plan.context_parallel)};
}

}  // namespace

std::string_view convention_rule(RankConvention convention) {
  return convention == RankConvention::head_fastest
             ? "rank = (replica x context_parallel + position) x head_parallel + head index"
             : "rank = (replica x head_parallel + head index) x context_parallel + position";
}

std::vector<int64_t> framework_ring_order(const PlanConfig& plan, RankConvention convention) {
  std::vector<int64_t> order(static_cast<size_t>(plan.world_size()));
  for (int64_t slot = 0; slot < plan.world_size(); ++slot) {
    const RankSlot role = slot_of_index(plan, slot);
    order[static_cast<size_t>(slot)] =
        convention == RankConvention::head_fastest
            ? (role.replica * plan.context_parallel + role.position) * plan.head_parallel + role.head_index
            : slot;
  }
  return order;
}

std::string flat_ring_hops_text(const PlanConfig& plan, const ClusterConfig& cluster, const std::vector<int64_t>& order,
                                int64_t merged_rings) {
  std::map<std::string, int64_t> counts;
  const int64_t length = plan.context_parallel * merged_rings;
  if (length > 1) {
    for (int64_t ring = 0; ring < plan.ring_count() / merged_rings; ++ring) {
      for (int64_t c = 0; c < length; ++c) {
        const int64_t from = order[static_cast<size_t>(ring * length + c)];
        const int64_t to = order[static_cast<size_t>(ring * length + (c + 1) % length)];
        ++counts[std::string(to_string(cluster.link(from, to).kind))];
      }
    }
  }
  return counts_text(counts);
}

std::string plan_level_hops_text(const PlanConfig& plan, const ClusterConfig& cluster) {
  std::string text;
  for (const size_t level : effective_levels(plan)) {
    std::map<std::string, int64_t> counts;
    for (int64_t ring = 0; ring < plan.ring_count(); ++ring) {
      for (int64_t p = 0; p < plan.context_parallel; ++p) {
        const int64_t from = plan.global_rank(ring, p);
        const int64_t to = plan.global_rank(ring, plan.next_position(p, level));
        ++counts[std::string(to_string(cluster.link(from, to).kind))];
      }
    }
    text += str(text.empty() ? "" : "; ", "level ", level, " (", plan.ring_levels[level].size, " ranks, ",
                to_string(plan.ring_levels[level].link), "): ", counts_text(counts));
  }
  return text.empty() ? std::string("no hops (a ring of one rank)") : text;
}

std::vector<std::string> describe_order_change(const PlanConfig& plan, const ClusterConfig& cluster,
                                               const std::vector<int64_t>& framework_order,
                                               std::string_view framework, std::string_view rule,
                                               int64_t merged_rings) {
  if (framework_order == plan.ring_order) return {};
  int64_t moved = 0;
  int64_t example = -1;
  for (size_t i = 0; i < framework_order.size(); ++i) {
    if (framework_order[i] != plan.ring_order[i]) {
      ++moved;
      if (example < 0) example = static_cast<int64_t>(i);
    }
  }
  const RankSlot role = slot_of_index(plan, example);
  return {str("ring order: ", framework, " assigns ring positions to ranks by its own rule (", rule, "), not by the plan's ",
              "ring.order; ", moved, " of ", plan.world_size(), " roles run on another GPU than planned. Ring ", role.ring,
              " is ", ranks_text(ring_slice(plan, plan.ring_order, role.ring), 16), " in the plan but ",
              ranks_text(ring_slice(plan, framework_order, role.ring), 16), " in ", framework,
              ". Flat-ring hops by link (all rings): plan order ",
              flat_ring_hops_text(plan, cluster, plan.ring_order, merged_rings), "; ", framework, " order ",
              flat_ring_hops_text(plan, cluster, framework_order, merged_rings),
              ". Closest equivalent written: ", framework, "'s own order. To run the plan's placement exactly, start ",
              framework, " rank f on plan GPU rank_map.json[\"plan_gpu_of_rank\"][f] (e.g. a launcher that sets RANK per ",
              "process); the data layout files follow ", framework, " ranks")};
}

std::vector<std::string> describe_flattening(const PlanConfig& plan, const ClusterConfig& cluster,
                                             const std::vector<int64_t>& framework_order,
                                             std::string_view framework, int64_t merged_rings) {
  const std::vector<size_t> levels = effective_levels(plan);
  if (levels.size() <= 1) return {};
  std::string sizes;
  for (const size_t l : levels) {
    sizes += str(sizes.empty() ? "" : " x ", plan.ring_levels[l].size, " (", to_string(plan.ring_levels[l].link), ")");
  }
  const std::string target =
      merged_rings == 1 ? str("one flat ring of ", plan.context_parallel, " positions in position order")
                        : str("part of one flat ring of ", merged_rings * plan.context_parallel, " (", merged_rings,
                              " plan rings joined), in position order");
  return {str("hierarchical ring: ", framework, " has no nested rings, so the plan's ", sizes,
              " hierarchy (inner first) becomes ", target, ". The plan's hops: ", plan_level_hops_text(plan, cluster),
              "; the outer hop was posted first and overlapped with the whole inner ring. In ", framework,
              " every ring step waits for its slowest hop; flat-ring hops by link (all rings): ",
              flat_ring_hops_text(plan, cluster, framework_order, merged_rings))};
}

std::string rank_map_json(const PlanConfig& plan, const std::vector<int64_t>& framework_order,
                          std::string_view framework) {
  const int64_t world = plan.world_size();
  std::vector<int64_t> plan_gpu(static_cast<size_t>(world), -1);
  nlohmann::json roles = nlohmann::json::array();
  std::vector<RankSlot> role_of_rank(static_cast<size_t>(world));
  for (int64_t slot = 0; slot < world; ++slot) {
    const auto f = static_cast<size_t>(framework_order[static_cast<size_t>(slot)]);
    plan_gpu[f] = plan.ring_order[static_cast<size_t>(slot)];
    role_of_rank[f] = slot_of_index(plan, slot);
  }
  for (int64_t f = 0; f < world; ++f) {
    const RankSlot& r = role_of_rank[static_cast<size_t>(f)];
    roles.push_back({{"rank", f},
                     {"plan_gpu", plan_gpu[static_cast<size_t>(f)]},
                     {"ring", r.ring},
                     {"position", r.position},
                     {"head_index", r.head_index},
                     {"replica", r.replica}});
  }
  const nlohmann::json doc = {
      {"format", "sparsering-rank-map"},
      {"version", 1},
      {"framework", std::string(framework)},
      {"description", str("Framework rank f must run on GPU plan_gpu_of_rank[f] (global rank of the plan's cluster, ",
                          "node-major) to reproduce the plan's placement.")},
      {"plan_gpu_of_rank", plan_gpu},
      {"ranks", roles}};
  return doc.dump(1) + "\n";
}

}  // namespace sparsering
