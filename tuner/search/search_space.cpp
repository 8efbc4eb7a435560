// The plan space (tuner/search/search_space.hpp). Tested in tests/tuner_search/search_space_test.cpp.
#include "tuner/search/search_space.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "core/kernel_support.hpp"

namespace sparsering {

namespace {

bool is_power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

/// A striped layout laid out once by the data loader (named apart from the per-layer default).
bool is_loader_striped(const Geometry& geometry, const Candidate& candidate) {
  return geometry.layout.kind() == LayoutKind::striped && candidate.shuffle == LayoutShuffleMode::loader;
}

/// Ascending; O(sqrt n), so a cluster of millions of GPUs costs nothing here.
std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> low;
  std::vector<int64_t> high;
  for (int64_t d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    low.push_back(d);
    if (d != n / d) high.push_back(n / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

void check_options(const SearchSpaceOptions& o) {
  require(!o.block_sizes.empty(), "the search needs at least one block size");
  for (const int64_t b : o.block_sizes) {
    require(is_power_of_two(b) && b >= 16 && b <= 512, "block sizes must be powers of two in [16, 512], got ", b);
    // Only blocks the kernels run: every candidate must be a plan parse_plan accepts.
    if (const auto why = block_size_unsupported(b, "a block size")) {
      throw InputError(str(*why, " (the CUDA attention kernels' tile)"));
    }
  }
  require(!o.layouts.empty(), "the search needs at least one token layout");
  if (std::find(o.layouts.begin(), o.layouts.end(), LayoutKind::striped) != o.layouts.end()) {
    require(!o.stripe_shifts.empty(), "the striped layout needs at least one stripe granularity");
  }
  for (const int32_t s : o.stripe_shifts) require(s >= -6 && s <= 6, "stripe shifts must be in [-6, 6], got ", s);
  require(!o.comms.empty(), "the search needs at least one communication primitive");
  require(!o.layout_shuffles.empty(), "the search needs at least one layout shuffle (per_layer, loader)");
  require(!o.recomputes.empty(), "the search needs at least one recomputation mode");
  require(!o.zero_stages.empty(), "the search needs at least one ZeRO stage");
  for (const int64_t z : o.zero_stages) require(z >= 0 && z <= 3, "ZeRO stages must be 0-3, got ", z);
  require(o.max_candidates >= 0, "the candidate limit must be >= 0, got ", o.max_candidates);
  require(!o.placements.empty() && !o.families.empty(), "the search needs at least one ring-order family");
}

/// Layouts of one (degrees, block), deduplicated: striped with one stripe per rank is contiguous.
void add_geometries(SearchSpace& space, int32_t degrees_index, int64_t block, const SearchSpaceOptions& o) {
  const int64_t n = space.seq_len_tokens;
  const int64_t w = space.degrees[static_cast<size_t>(degrees_index)].context_parallel;
  const auto add = [&](LayoutKind kind, int64_t granularity) {
    const TokenLayout layout = make_token_layout(kind, n, static_cast<int32_t>(w), granularity);
    for (const Geometry& g : space.geometries) {
      if (g.degrees == degrees_index && g.block == block && g.layout.kind() == layout.kind() &&
          g.layout.granularity_tokens() == layout.granularity_tokens()) {
        return;
      }
    }
    space.geometries.push_back(Geometry{degrees_index, layout, block});
  };
  if (w == 1) {
    add(LayoutKind::contiguous, 0);
    return;
  }
  for (const LayoutKind kind : o.layouts) {
    if (kind == LayoutKind::contiguous && n % w == 0) add(kind, 0);
    if (kind == LayoutKind::zigzag && n % (2 * w) == 0) add(kind, 0);
    if (kind != LayoutKind::striped) continue;
    std::vector<int64_t> grains;
    for (const int32_t s : o.stripe_shifts) {
      const int64_t g = s >= 0 ? block << s : block >> (-s);
      if (g >= 1 && n % (g * w) == 0 && g * w != n) grains.push_back(g);
    }
    std::sort(grains.begin(), grains.end());
    grains.erase(std::unique(grains.begin(), grains.end()), grains.end());
    for (const int64_t g : grains) add(LayoutKind::striped, g);
  }
}

}  // namespace

std::vector<ParallelDegrees> enumerate_parallel_degrees(const ModelConfig& model, const ClusterConfig& cluster,
                                                      int64_t seq_len_tokens) {
  require(seq_len_tokens >= 1, "the sequence length must be >= 1 token, got ", seq_len_tokens);
  require(model.q_heads >= 1 && model.kv_heads >= 1, "model ", model.name, " needs query and KV heads");
  const int64_t world = cluster.world_size();
  require(world >= 1, "cluster ", cluster.name, " has no GPUs");
  std::vector<ParallelDegrees> degrees;
  for (const int64_t h : divisors(model.q_heads)) {
    if (world % h != 0) continue;
    if (model.kv_heads % h != 0 && h % model.kv_heads != 0) continue;
    for (const int64_t w : divisors(world / h)) {
      if (seq_len_tokens % (w * h) != 0) continue;
      degrees.push_back(ParallelDegrees{w, h, world / (w * h)});
    }
  }
  require(!degrees.empty(), "no parallel layout of the ", world, " GPUs of cluster ", cluster.name,
          " splits a sequence of ", seq_len_tokens, " tokens: context_parallel x head_parallel must divide it");
  return degrees;
}

SearchSpace enumerate_search_space(const ModelConfig& model, const ClusterConfig& cluster, int64_t seq_len_tokens,
                                   const SearchSpaceOptions& options) {
  check_options(options);
  SearchSpace space;
  space.seq_len_tokens = seq_len_tokens;
  space.degrees = enumerate_parallel_degrees(model, cluster, seq_len_tokens);

  for (size_t di = 0; di < space.degrees.size(); ++di) {
    const auto degrees_index = static_cast<int32_t>(di);
    const ParallelDegrees& g = space.degrees[di];
    const size_t first_order = space.orders.size();
    for (const RankPlacement placement : options.placements) {
      if (placement == RankPlacement::hp_inner && g.head_parallel == 1 &&
          std::find(options.placements.begin(), options.placements.end(), RankPlacement::cp_inner) !=
              options.placements.end()) {
        continue;  // the same as cp-inner
      }
      for (const RingOrderFamily family : options.families) {
        std::vector<int64_t> order = make_ring_order(cluster, g, placement, family);
        const std::string name = str(to_string(placement), "/", to_string(family));
        bool duplicate = false;
        for (size_t k = first_order; k < space.orders.size(); ++k) {
          if (space.orders[k].ring_order == order) {
            space.orders[k].same_as.push_back(name);
            duplicate = true;
            break;
          }
        }
        if (duplicate) continue;
        OrderChoice choice;
        choice.degrees = degrees_index;
        choice.placement = placement;
        choice.family = family;
        choice.hierarchies = ring_hierarchies(cluster, order, g.context_parallel);
        choice.ring_order = std::move(order);
        space.orders.push_back(std::move(choice));
      }
    }
    const size_t first_geometry = space.geometries.size();
    for (const int64_t block : options.block_sizes) add_geometries(space, degrees_index, block, options);

    for (size_t oi = first_order; oi < space.orders.size(); ++oi) {
      const OrderChoice& order = space.orders[oi];
      for (size_t hi = 0; hi < order.hierarchies.size(); ++hi) {
        for (size_t gi = first_geometry; gi < space.geometries.size(); ++gi) {
          const bool striped = space.geometries[gi].layout.kind() == LayoutKind::striped;
          const std::vector<LayoutShuffleMode> shuffles =
              striped ? options.layout_shuffles : std::vector<LayoutShuffleMode>{LayoutShuffleMode::loader};
          for (const LayoutShuffleMode shuffle : shuffles) {
            for (const CommPrimitive comm : options.comms) {
              if (comm == CommPrimitive::all_gather && (g.context_parallel == 1 || hi != 0)) continue;
              for (const RecomputeMode recompute : options.recomputes) {
                for (const int64_t zero : options.zero_stages) {
                  require(options.max_candidates <= 0 || static_cast<int64_t>(space.candidates.size()) < options.max_candidates,
                          "the plan space holds more than ", options.max_candidates, " candidates (--max-candidates); ",
                          "narrow it (--blocks, --granularities, --layouts, --layout-shuffles, --comms, --recompute, ",
                          "--zero) or raise the limit");
                  space.candidates.push_back(Candidate{static_cast<int32_t>(oi), static_cast<int32_t>(hi),
                                                       static_cast<int32_t>(gi), comm, recompute,
                                                       static_cast<int32_t>(zero), shuffle});
                }
              }
            }
          }
        }
      }
    }
  }
  require(!space.candidates.empty(), "the search space is empty for ", seq_len_tokens, " tokens on cluster ",
          cluster.name, ": no layout or communication primitive applies");
  return space;
}

PlanConfig make_candidate_plan(const SearchSpace& space, const Candidate& candidate, const PlanTemplate& tmpl) {
  const ParallelDegrees& g = space.degrees_of(candidate);
  const OrderChoice& order = space.order_of(candidate);
  const Geometry& geometry = space.geometry_of(candidate);
  PlanConfig plan;
  plan.model = tmpl.model;
  plan.cluster = tmpl.cluster;
  plan.trace = tmpl.trace;
  plan.seq_len_tokens = space.seq_len_tokens;
  plan.micro_batch_sequences = tmpl.micro_batch_sequences;
  plan.context_parallel = g.context_parallel;
  plan.head_parallel = g.head_parallel;
  plan.data_parallel = g.data_parallel;
  plan.ring_levels = space.hierarchy_of(candidate).levels;
  plan.ring_order = order.ring_order;
  plan.layout = geometry.layout;
  plan.sparse = tmpl.sparse;
  plan.sparse.block_q = geometry.block;
  plan.sparse.block_k = geometry.block;
  plan.comm = candidate.comm;
  plan.recompute = candidate.recompute;
  plan.zero_stage = candidate.zero_stage;
  plan.layout_shuffle = candidate.shuffle;
  std::string levels;
  for (const RingLevel& level : plan.ring_levels) levels += str(levels.empty() ? "" : "x", level.size);
  plan.name = str(tmpl.name_prefix, "-h", g.head_parallel, "-cp", g.context_parallel, "-dp", g.data_parallel, "-",
                  to_string(order.placement), "-", to_string(order.family), "-r", levels, "-",
                  to_string(geometry.layout.kind()),
                  geometry.layout.kind() == LayoutKind::striped ? str(geometry.layout.granularity_tokens()) : "", "-b",
                  geometry.block, "-", to_string(candidate.comm), "-", to_string(candidate.recompute), "-z",
                  candidate.zero_stage, is_loader_striped(geometry, candidate) ? "-loader" : "");
  return plan;
}

std::string describe_degrees(const ParallelDegrees& degrees) {
  return str("H", degrees.head_parallel, " W", degrees.context_parallel, " D", degrees.data_parallel);
}

std::string describe_order(const OrderChoice& order) {
  return str(to_string(order.placement), "/", to_string(order.family));
}

std::string describe_hierarchy(const RingHierarchy& hierarchy) {
  std::string out;
  for (const RingLevel& level : hierarchy.levels) {
    out += str(out.empty() ? "" : " x ", level.size, " ", to_string(level.link));
  }
  return out;
}

std::string describe_layout(const TokenLayout& layout) {
  if (layout.kind() == LayoutKind::striped) return str("striped G=", layout.granularity_tokens());
  return std::string(to_string(layout.kind()));
}

std::string describe_candidate(const SearchSpace& space, const Candidate& candidate) {
  const Geometry& geometry = space.geometry_of(candidate);
  return str(describe_degrees(space.degrees_of(candidate)), " | ", describe_order(space.order_of(candidate)), " | ",
             describe_hierarchy(space.hierarchy_of(candidate)), " | ", describe_layout(geometry.layout), " | b",
             geometry.block, is_loader_striped(geometry, candidate) ? " (loader)" : "", " | ", to_string(candidate.comm),
             " | ", to_string(candidate.recompute), " | zero", candidate.zero_stage);
}

}  // namespace sparsering
