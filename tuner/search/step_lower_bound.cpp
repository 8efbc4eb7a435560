// Lower bounds of the simulator's step time and memory for the tuner's candidates
// (tuner/search/step_lower_bound.hpp). Tested in tests/tuner_search/step_lower_bound_test.cpp.
#include "tuner/search/step_lower_bound.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "common/error.hpp"
#include "sim/memory/memory_model.hpp"
#include "core/ring_schedule.hpp"
#include "sim/network/link_model.hpp"
#include "sim/network/nic_contention.hpp"
#include "sim/ring/ring_simulation.hpp"
#include "sim/step/layer_shapes.hpp"
#include "tuner/search/parallel_for.hpp"
#include "tuner/search/work_lower_bound.hpp"

namespace sparsering {

namespace {

constexpr SimNs kNever = std::numeric_limits<SimNs>::max();

/// A plan carrying only what layer_shapes and estimate_memory read.
PlanConfig shape_plan(const SearchSpace& space, const ParallelDegrees& g, const PlanTemplate& tmpl) {
  PlanConfig plan;
  plan.seq_len_tokens = space.seq_len_tokens;
  plan.micro_batch_sequences = tmpl.micro_batch_sequences;
  plan.context_parallel = g.context_parallel;
  plan.head_parallel = g.head_parallel;
  plan.data_parallel = g.data_parallel;
  plan.ring_levels = {RingLevel{g.context_parallel, LinkKind::nvlink}};
  plan.sparse = tmpl.sparse;
  return plan;
}

std::vector<int64_t> members_of(const OrderChoice& order, int64_t ring, int64_t w) {
  const auto first = order.ring_order.begin() + static_cast<std::ptrdiff_t>(ring * w);
  return {first, first + static_cast<std::ptrdiff_t>(w)};
}

}  // namespace

struct StepLowerBound::DegreeTerms {
  LayerShapes shapes;
  SimNs qkv_f = 0, out_f = 0, mlp_f = 0, qkv_b = 0, out_b = 0, mlp_b = 0;
  SimNs scores = 0;  // pattern estimation: both passes and the recall selection
  SimNs lm_f = 0, lm_b = 0;
  int64_t bcast_bytes = 0, stats_bytes = 0, mass_bytes = 0;
};

struct StepLowerBound::OrderTerms {
  SimNs shuffle_in = 0, shuffle_out = 0;  // striped layouts only
  SimNs reduce = 0;                       // estimation all-reduces
  SimNs ulysses_in = 0, ulysses_out = 0;
  SimNs gather = 0, scatter = 0;          // all-gather primitive
  std::vector<std::vector<SimNs>> level_hop;     // [hierarchy][level]: fastest K/V hop of the level
  std::vector<std::vector<SimNs>> position_hop;  // [hierarchy][p x levels + level]: fastest over the rings
  std::vector<std::vector<SimNs>> position_dkv;  // [hierarchy][p x levels + level]: the same for dK/dV
  std::vector<SimNs> flat_chain;                 // [hierarchy]: flat rings, all hops but the fastest
  SimNs dkv_hop = 0;                      // fastest dK/dV hop over any fabric level
};

/// Per-cell kernel times of the head group the ring bound runs on (the busiest of the groups the
/// strong bound computed, per layer and direction: busiest_group): [(layer x W + rank) x W + src]
/// (a counted layer's: layer 0).
struct StepLowerBound::CellTimes {
  std::vector<SimNs> forward;
  std::vector<SimNs> backward;
};

struct StepLowerBound::GeometryTerms {
  SimNs index_build = 0;                  // building the sparse index, once per layer
  int64_t groups = 1;
  int64_t ranks = 1;
  std::vector<SimNs> coarse_f, coarse_b;  // per layer, max over groups
  int refined = 0;  // strength of the cell bound (0 = none)
  std::vector<SimNs> max_f, max_b;        // per layer, max over groups and ranks of summed kernel time
  std::vector<SimNs> sum_f, own_f, sum_b, own_b;  // [(layer x groups + group) x W + rank]
  std::vector<char> exact;                 // per layer: terms from the counted work
  int64_t exact_count = 0;
  std::map<int64_t, CellTimes> exact_cells;  // counted layers' cell times (rings the ring bound covers)
};


namespace {

/// The head group with the busiest rank of one layer and direction (the first on ties), among the
/// (layer, group) entries `among` marks if given: any group's ring pass bounds the layer, which
/// waits for every group.
int64_t busiest_group(const std::vector<SimNs>& sums, int64_t groups, size_t ranks, int64_t layer,
                      const std::vector<char>* among = nullptr) {
  int64_t group = 0;
  SimNs most = -1;
  for (int64_t g = 0; g < groups; ++g) {
    if (among != nullptr && (*among)[static_cast<size_t>(layer * groups + g)] == 0) continue;
    for (size_t p = 0; p < ranks; ++p) {
      const SimNs v = sums[static_cast<size_t>(layer * groups + g) * ranks + p];
      if (v > most) {
        most = v;
        group = g;
      }
    }
  }
  return group;
}

/// Copies the busiest group's cells of `layers` layers (cells [(layer x groups + group) x W^2])
/// into `out` ([layer x W^2]), per direction.
void keep_busiest(const std::vector<SimNs>& sums_f, const std::vector<SimNs>& sums_b, const std::vector<SimNs>& all_f,
                  const std::vector<SimNs>& all_b, int64_t groups, size_t w, const std::vector<int64_t>& layers,
                  const std::vector<int64_t>& sum_layers, std::vector<SimNs>& out_f, std::vector<SimNs>& out_b) {
  out_f.assign(layers.size() * w * w, 0);
  out_b.assign(layers.size() * w * w, 0);
  for (size_t k = 0; k < layers.size(); ++k) {
    const auto gf = static_cast<size_t>(busiest_group(sums_f, groups, w, sum_layers[k]));
    const auto gb = static_cast<size_t>(busiest_group(sums_b, groups, w, sum_layers[k]));
    const size_t from = static_cast<size_t>(layers[k] * groups);
    std::copy_n(all_f.begin() + static_cast<std::ptrdiff_t>((from + gf) * w * w), w * w,
                out_f.begin() + static_cast<std::ptrdiff_t>(k * w * w));
    std::copy_n(all_b.begin() + static_cast<std::ptrdiff_t>((from + gb) * w * w), w * w,
                out_b.begin() + static_cast<std::ptrdiff_t>(k * w * w));
  }
}

}  // namespace

StepLowerBound::StepLowerBound(const ModelConfig& model, const ClusterConfig& cluster, const SearchSpace& space,
                               const PatternSet& patterns, const PlanTemplate& tmpl, const SimulationOptions& options)
    : model_(model),
      cluster_(cluster),
      space_(space),
      patterns_(patterns),
      template_(tmpl),
      options_(options),
      network_(cluster),
      gemm_(make_gemm_cost_model(cluster.gpu_config, options.roofline)) {
  require(patterns.layers == model.layers && patterns.heads == model.q_heads && !patterns.dense,
          "the patterns do not match model ", model.name);
  const GpuConfig& gpu = cluster.gpu_config;
  for (const Geometry& g : space.geometries) {
    if (!cost_.count(g.block)) {
      cost_.emplace(g.block, make_attention_cost_model(gpu, g.block, g.block, model.head_dim, options.roofline));
    }
  }

  for (const ParallelDegrees& g : space.degrees) {
    auto t = std::make_unique<DegreeTerms>();
    const PlanConfig plan = shape_plan(space, g, tmpl);
    t->shapes = layer_shapes(plan, model);
    const LayerShapes& s = t->shapes;
    t->qkv_f = gemm_time_ns(gemm_, s.qkv_flops);
    t->out_f = gemm_time_ns(gemm_, s.out_proj_flops);
    t->mlp_f = gemm_time_ns(gemm_, s.mlp_flops);
    t->qkv_b = gemm_time_ns(gemm_, 2.0 * s.qkv_flops);
    t->out_b = gemm_time_ns(gemm_, 2.0 * s.out_proj_flops);
    t->mlp_b = gemm_time_ns(gemm_, 2.0 * s.mlp_flops);
    const int64_t b = tmpl.micro_batch_sequences;
    t->scores = estimate_time_ns(options.roofline, s.q_heads_local * b, s.attention_tokens / b, space.seq_len_tokens,
                                 tmpl.sparse.last_q);
    t->lm_f = gemm_time_ns(gemm_, s.lm_head_flops);
    t->lm_b = gemm_time_ns(gemm_, 2.0 * s.lm_head_flops);
    t->bcast_bytes = tmpl.sparse.last_q * s.q_heads_local * model.head_dim * s.bytes_per_value * b;
    t->stats_bytes = tmpl.sparse.last_q * s.q_heads_local * 2 * 4 * b;
    t->mass_bytes = space.seq_len_tokens * s.q_heads_local * 4 * b;
    degree_terms_.push_back(std::move(t));
  }

  for (const OrderChoice& order : space.orders) {
    auto t = std::make_unique<OrderTerms>();
    const ParallelDegrees& g = space.degrees[static_cast<size_t>(order.degrees)];
    const LayerShapes& s = degree_terms_[static_cast<size_t>(order.degrees)]->shapes;
    const int64_t w = g.context_parallel;
    const int64_t rings = g.head_parallel * g.data_parallel;
    t->shuffle_in = t->shuffle_out = t->reduce = t->gather = t->scatter = kNever;
    for (int64_t r = 0; r < rings; ++r) {
      const std::vector<int64_t> ring = members_of(order, r, w);
      t->shuffle_in = std::min(t->shuffle_in, network_.all_to_all_ns(ring, s.qkv_local_bytes));
      t->shuffle_out = std::min(t->shuffle_out, network_.all_to_all_ns(ring, s.out_local_bytes));
      const DegreeTerms& dt = *degree_terms_[static_cast<size_t>(order.degrees)];
      t->reduce = std::min(t->reduce, network_.all_reduce_ns(ring, dt.stats_bytes) + network_.all_reduce_ns(ring, dt.mass_bytes));
      t->gather = std::min(t->gather, network_.all_gather_ns(ring, s.kv_chunk_bytes * w));
      t->scatter = std::min(t->scatter, network_.all_gather_ns(ring, s.dkv_chunk_bytes * w));
    }
    if (g.head_parallel > 1) {
      const int64_t bpv = s.bytes_per_value;
      const int64_t qkv_bytes = s.dense_tokens * (model.q_heads + 2 * model.kv_heads) * model.head_dim * bpv;
      const int64_t out_bytes = s.dense_tokens * model.q_heads * model.head_dim * bpv;
      t->ulysses_in = t->ulysses_out = kNever;
      std::vector<int64_t> group(static_cast<size_t>(g.head_parallel));
      for (int64_t d = 0; d < g.data_parallel; ++d) {
        for (int64_t p = 0; p < w; ++p) {
          for (int64_t h = 0; h < g.head_parallel; ++h) {
            group[static_cast<size_t>(h)] = order.ring_order[static_cast<size_t>((d * g.head_parallel + h) * w + p)];
          }
          t->ulysses_in = std::min(t->ulysses_in, network_.all_to_all_ns(group, qkv_bytes));
          t->ulysses_out = std::min(t->ulysses_out, network_.all_to_all_ns(group, out_bytes));
        }
      }
    }
    for (const RingHierarchy& hierarchy : order.hierarchies) {
      // Every hop at its link's bandwidth shared among the ring hops that leave (enter) its node
      // over the same fabric at once, counted by the simulator's own NicContention so the shares
      // match exactly; the fastest over the rings.
      const auto nl = static_cast<size_t>(hierarchy.levels.size());
      std::vector<int64_t> strides(nl, 1);
      for (size_t k = 1; k < nl; ++k) strides[k] = strides[k - 1] * hierarchy.levels[k - 1].size;
      const auto next_of = [&](int64_t p, size_t k) {
        const int64_t size = hierarchy.levels[k].size;
        const int64_t digit = (p / strides[k]) % size;
        return p + (((digit + 1) % size) - digit) * strides[k];
      };
      NicContention nics(network_);
      for (int64_t r = 0; r < rings; ++r) {
        for (size_t k = 0; k < nl; ++k) {
          if (hierarchy.levels[k].size == 1) continue;
          for (int64_t p = 0; p < w; ++p) {
            nics.add_hop(order.ring_order[static_cast<size_t>(r * w + p)],
                         order.ring_order[static_cast<size_t>(r * w + next_of(p, k))]);
          }
        }
      }
      std::vector<SimNs> at(static_cast<size_t>(w) * nl, 0);
      std::vector<SimNs> at_dkv(static_cast<size_t>(w) * nl, 0);
      std::vector<SimNs> hops;
      for (size_t k = 0; k < nl; ++k) {
        const int64_t size = hierarchy.levels[k].size;
        SimNs fastest = kNever;
        for (int64_t p = 0; p < w && size > 1; ++p) {
          SimNs hop = kNever;
          SimNs dkv_hop = kNever;
          for (int64_t r = 0; r < rings; ++r) {
            const int64_t a = order.ring_order[static_cast<size_t>(r * w + p)];
            const int64_t b = order.ring_order[static_cast<size_t>(r * w + next_of(p, k))];
            const LinkModel& link = network_.link(a, b);
            const double share = nics.share(a, b);
            hop = std::min(hop, transfer_time_ns(link, s.kv_chunk_bytes, share));
            dkv_hop = std::min(dkv_hop, transfer_time_ns(link, s.dkv_chunk_bytes, share));
          }
          at[static_cast<size_t>(p) * nl + k] = hop;
          at_dkv[static_cast<size_t>(p) * nl + k] = dkv_hop;
          fastest = std::min(fastest, hop);
        }
        hops.push_back(size > 1 ? fastest : 0);
      }
      // A flat ring's last chunk of position p crossed every hop but p's own outgoing one.
      SimNs chain = 0;
      if (nl == 1 && w > 1) {
        SimNs total = 0;
        for (const SimNs hop : at) total += hop;
        chain = total - *std::min_element(at.begin(), at.end());
      }
      t->level_hop.push_back(std::move(hops));
      t->position_hop.push_back(std::move(at));
      t->position_dkv.push_back(std::move(at_dkv));
      t->flat_chain.push_back(chain);
    }
    t->dkv_hop = kNever;
    for (int32_t level = 0; level < cluster.level_count(); ++level) {
      t->dkv_hop = std::min(t->dkv_hop, transfer_time_ns(network_.level_link(level), s.dkv_chunk_bytes));
    }
    order_terms_.push_back(std::move(t));
  }
  // Ring bounds depend on an (order, hierarchy) only through the level sizes and the bounded hop
  // times: pairs that agree on them (e.g. node-major and snake orders whose hops cross the same
  // links) share one ring bound, under the first such pair.
  std::map<std::vector<SimNs>, std::pair<int32_t, int32_t>> ring_classes;
  for (size_t o = 0; o < space.orders.size(); ++o) {
    const OrderChoice& order = space.orders[o];
    const OrderTerms& terms = *order_terms_[o];
    std::vector<std::pair<int32_t, int32_t>> reps;
    for (size_t h = 0; h < order.hierarchies.size(); ++h) {
      std::vector<SimNs> key{space.degrees[static_cast<size_t>(order.degrees)].context_parallel, terms.dkv_hop};
      for (const RingLevel& level : order.hierarchies[h].levels) key.push_back(level.size);
      key.push_back(-1);
      key.insert(key.end(), terms.position_hop[h].begin(), terms.position_hop[h].end());
      key.insert(key.end(), terms.position_dkv[h].begin(), terms.position_dkv[h].end());
      reps.push_back(ring_classes.try_emplace(std::move(key), static_cast<int32_t>(o), static_cast<int32_t>(h)).first->second);
    }
    ring_rep_.push_back(std::move(reps));
  }

  // Coarse attention bounds: the total tile count of aligned layouts, spread over the ring.
  std::map<int64_t, std::vector<int64_t>> total_tiles;    // block -> [layer x heads + head]
  std::map<int64_t, std::vector<int64_t>> total_columns;  // block -> [layer x heads + head]: uncovered visible columns over all rows
  std::map<int64_t, std::vector<int64_t>> total_column_rows;  // block -> [layer x heads + head]: rows with one of them
  for (const Geometry& g : space.geometries) {
    if (total_tiles.count(g.block)) continue;
    std::vector<std::vector<int64_t>>& sets = diagonals_[g.block];
    std::vector<int64_t> totals(patterns.patterns.size(), 0);
    const int64_t blocks = (space.seq_len_tokens + g.block - 1) / g.block;
    std::vector<int64_t> columns(patterns.patterns.size(), 0);
    std::vector<int64_t> column_rows(patterns.patterns.size(), 0);
    for (size_t k = 0; k < totals.size(); ++k) {
      sets.push_back(touched_diagonals(patterns.patterns[k], g.block));
      const std::vector<int64_t>& d_set = sets.back();
      for (const int64_t d : d_set) totals[k] += std::max<int64_t>(0, blocks - d);
      // A kept column in key block K is seen by rows K .. blocks - 1 and covered by a tile in
      // rows K + d, d a touched diagonal: the same rows for every aligned layout.
      const std::vector<int64_t>& verticals = patterns.patterns[k].vertical_positions;
      for (const int64_t v : verticals) {
        const int64_t rows = blocks - v / g.block;
        columns[k] += rows - static_cast<int64_t>(std::lower_bound(d_set.begin(), d_set.end(), rows) - d_set.begin());
      }
      // The rows in which the earliest column is uncovered gather a column: each is at least one
      // column list (one per K/V rank it gathers from) of every aligned layout.
      if (!verticals.empty()) {
        const int64_t rows = blocks - verticals.front() / g.block;
        column_rows[k] = rows - static_cast<int64_t>(std::lower_bound(d_set.begin(), d_set.end(), rows) - d_set.begin());
      }
    }
    total_tiles.emplace(g.block, std::move(totals));
    total_columns.emplace(g.block, std::move(columns));
    total_column_rows.emplace(g.block, std::move(column_rows));
  }
  for (const Geometry& g : space.geometries) {
    auto t = std::make_unique<GeometryTerms>();
    const ParallelDegrees& deg = space.degrees[static_cast<size_t>(g.degrees)];
    t->groups = deg.head_parallel;
    t->ranks = deg.context_parallel;
    t->index_build = index_build_time_ns(options.roofline,
                                         degree_terms_[static_cast<size_t>(g.degrees)]->shapes.q_heads_local *
                                             tmpl.micro_batch_sequences,
                                         g.layout.local_len(), g.block, g.block);
    t->exact.assign(static_cast<size_t>(model.layers), 0);
    t->coarse_f.assign(static_cast<size_t>(model.layers), 0);
    t->coarse_b.assign(static_cast<size_t>(model.layers), 0);
    if (exact_tile_count(g.layout, g.block) && g.layout.seq_len_tokens() % g.block == 0 &&
        (g.layout.kind() != LayoutKind::striped || g.layout.granularity_tokens() % g.block == 0)) {
      const AttentionCostModel& cost = cost_.at(g.block);
      const std::vector<int64_t>& totals = total_tiles.at(g.block);
      const std::vector<int64_t>& column_totals = total_columns.at(g.block);
      const std::vector<int64_t>& row_totals = total_column_rows.at(g.block);
      const int64_t per_group = model.q_heads / t->groups;
      for (int64_t l = 0; l < model.layers; ++l) {
        for (int64_t group = 0; group < t->groups; ++group) {
          int64_t tiles = 0;
          int64_t columns = 0;
          int64_t column_rows = 0;
          for (int64_t h = group * per_group; h < (group + 1) * per_group; ++h) {
            tiles += totals[static_cast<size_t>(l * model.q_heads + h)];
            columns += column_totals[static_cast<size_t>(l * model.q_heads + h)];
            column_rows += row_totals[static_cast<size_t>(l * model.q_heads + h)];
          }
          // The busiest rank does at least the average: the group's tiles, columns and column
          // lists spread evenly over the ring (a row's chunks are at least its uncovered columns
          // / block and its 64-column items its uncovered columns / 64, and each at least one per
          // column list).
          const double batch = static_cast<double>(tmpl.micro_batch_sequences);
          const double ranks = static_cast<double>(t->ranks);
          const double per_rank = static_cast<double>(tiles) * batch / ranks;
          const double columns_per_rank = static_cast<double>(columns) * batch / ranks;
          const double column_lists_per_rank = static_cast<double>(column_rows) * batch / ranks;
          const double chunks_per_rank =
              std::max(columns_per_rank / static_cast<double>(g.block), column_lists_per_rank);
          const double items_per_rank = std::max(columns_per_rank / 64.0, column_lists_per_rank);
          // Every rank's own cell runs (a kernel with a list per local row and head: each row
          // has its diagonal tile there). Each cell's kernel time rounds to the nearest ns:
          // allow W ns of rounding per rank.
          // Its diagonal tiles list every key block of the rank's own chunk for each K/V head.
          const LaunchGeometry launch = launch_of(g, t->groups);
          const int64_t launch_heads = per_group * tmpl.micro_batch_sequences;
          const double own_lists = static_cast<double>(g.layout.local_len() / g.block * launch_heads);
          const double own_keys = static_cast<double>(launch.key_blocks());
          const auto bound = [&](const KernelCoefficients& c) {
            const double us = c.launch_us + c.per_head_us * static_cast<double>(launch_heads) +
                              c.per_list_us * own_lists + c.per_tile_us * per_rank +
                              c.per_vertical_chunk_us * chunks_per_rank + c.per_key_list_us * own_keys +
                              c.per_key_block_us * own_keys + c.per_column_list_us * column_lists_per_rank +
                              c.per_column_item_us * items_per_rank + c.per_column_us * columns_per_rank;
            return std::max<SimNs>(0, static_cast<SimNs>(us * 1e3) - t->ranks - 1);
          };
          t->coarse_f[static_cast<size_t>(l)] = std::max(t->coarse_f[static_cast<size_t>(l)], bound(cost.forward));
          t->coarse_b[static_cast<size_t>(l)] = std::max(t->coarse_b[static_cast<size_t>(l)], bound(cost.backward));
        }
      }
    }
    geometry_terms_.push_back(std::move(t));
  }

  // Gradient synchronisation and optimizer by ZeRO stage (the simulator's formulas).
  std::vector<int64_t> world(static_cast<size_t>(cluster.world_size()));
  for (size_t r = 0; r < world.size(); ++r) world[r] = static_cast<int64_t>(r);
  const int64_t grad_bytes = model.parameter_count() * model.bytes_per_param;
  const SimNs reduce = network_.all_reduce_ns(world, grad_bytes);
  const SimNs gathers = world.size() > 1 ? 2 * network_.all_gather_ns(world, grad_bytes) : 0;
  require(gpu.memory_bandwidth_gbytes_per_s > 0.0, "GPU '", gpu.name, "' has no memory_bandwidth_gbytes_per_s");
  for (int32_t zero = 0; zero <= 3; ++zero) {
    sync_.push_back(reduce + (zero >= 3 ? gathers : 0));
    const double shard = zero >= 1 ? static_cast<double>(cluster.world_size()) : 1.0;
    optimizer_.push_back(round_to_ns(36.0 * static_cast<double>(model.parameter_count()) / shard /
                                     gpu.memory_bandwidth_gbytes_per_s));
  }
}

StepLowerBound::~StepLowerBound() = default;

LaunchGeometry StepLowerBound::launch_of(const Geometry& geometry, int64_t groups) const {
  const int64_t batch = template_.micro_batch_sequences;
  return LaunchGeometry{.heads = model_.q_heads / groups * batch,
                        .kv_heads = std::max<int64_t>(1, model_.kv_heads / groups) * batch,
                        .chunk_tokens = geometry.layout.local_len(),
                        .block_k = geometry.block};
}

int64_t StepLowerBound::key_group(int64_t groups) const {
  return std::min(model_.q_heads / groups, model_.q_heads / model_.kv_heads);
}

BackwardTerms StepLowerBound::backward_terms(const Geometry& geometry, int64_t groups) const {
  const AttentionCostModel& cost = cost_.at(geometry.block);
  const auto charged = [&](double KernelCoefficients::*term) { return cost.forward.*term > 0.0 || cost.backward.*term > 0.0; };
  const bool columns = charged(&KernelCoefficients::per_column_us);
  return BackwardTerms{.key_group = charged(&KernelCoefficients::per_key_list_us) ? key_group(groups) : 0,
                       .column_units = columns || charged(&KernelCoefficients::per_column_list_us) ||
                                       charged(&KernelCoefficients::per_column_item_us),
                       .columns = columns};
}

const StepLowerBound::DegreeTerms& StepLowerBound::degree_terms(int32_t degrees) const {
  return *degree_terms_[static_cast<size_t>(degrees)];
}

const StepLowerBound::OrderTerms& StepLowerBound::order_terms(int32_t order) const {
  return *order_terms_[static_cast<size_t>(order)];
}

SimNs StepLowerBound::broadcast_ns(int32_t order, int32_t last_owner) const {
  std::lock_guard<std::mutex> lock(broadcast_mutex_);
  const auto key = std::make_tuple(order, last_owner);
  const auto it = broadcast_.find(key);
  if (it != broadcast_.end()) return it->second;
  const OrderChoice& choice = space_.orders[static_cast<size_t>(order)];
  const ParallelDegrees& g = space_.degrees[static_cast<size_t>(choice.degrees)];
  const DegreeTerms& dt = degree_terms(choice.degrees);
  SimNs best = kNever;
  for (int64_t r = 0; r < g.head_parallel * g.data_parallel; ++r) {
    std::vector<int64_t> ring = members_of(choice, r, g.context_parallel);
    std::rotate(ring.begin(), ring.begin() + last_owner, ring.end());
    best = std::min(best, network_.broadcast_ns(ring, dt.bcast_bytes));
  }
  broadcast_.emplace(key, best);
  return best;
}

SimNs StepLowerBound::hop_chain_ns(const Candidate& c) const {
  const OrderTerms& o = order_terms(c.order);
  const std::vector<SimNs>& hops = o.level_hop[static_cast<size_t>(c.hierarchy)];
  const RingHierarchy& hierarchy = space_.hierarchy_of(c);
  SimNs chain = 0;
  for (size_t l = 0; l < hops.size(); ++l) chain += (hierarchy.levels[l].size - 1) * hops[l];
  return std::max(chain, o.flat_chain[static_cast<size_t>(c.hierarchy)]);
}

SimNs StepLowerBound::sync_ns(int32_t zero_stage) const { return sync_[static_cast<size_t>(zero_stage)]; }
SimNs StepLowerBound::optimizer_ns(int32_t zero_stage) const { return optimizer_[static_cast<size_t>(zero_stage)]; }

int64_t StepLowerBound::memory_bytes(const Candidate& c) const {
  // Everything it reads: the order (degrees), the hierarchy, comm, recompute and ZeRO stage;
  // candidates that differ only in geometry or layout shuffle share it.
  const auto key = std::make_tuple(c.order, c.hierarchy, static_cast<int32_t>(c.comm), static_cast<int32_t>(c.recompute),
                                   c.zero_stage);
  {
    std::lock_guard<std::mutex> lock(memory_mutex_);
    const auto it = memory_.find(key);
    if (it != memory_.end()) return it->second;
  }
  const ParallelDegrees& g = space_.degrees_of(c);
  PlanConfig plan = shape_plan(space_, g, template_);
  plan.ring_levels = space_.hierarchy_of(c).levels;
  plan.comm = c.comm;
  plan.recompute = c.recompute;
  plan.zero_stage = c.zero_stage;
  const MemoryReport report = estimate_memory(plan, model_, cluster_.gpu_config,
                                              degree_terms(space_.order_of(c).degrees).shapes, 0);
  std::lock_guard<std::mutex> lock(memory_mutex_);
  memory_.emplace(key, report.peak_bytes);
  return report.peak_bytes;
}

int StepLowerBound::refined(int32_t geometry) const { return geometry_terms_[static_cast<size_t>(geometry)]->refined; }

void StepLowerBound::refine(int32_t geometry, int threads, int strength) {
  GeometryTerms& t = *geometry_terms_[static_cast<size_t>(geometry)];
  if (t.refined >= strength) return;
  // Strong bounds of small rings keep every cell's kernel time for the ring bounds.
  // Tiles only (chunks bounded by 0) for large rings, and at strength 1 for rings beyond
  // kCheapColumnRanks; otherwise representative columns (strength 1) or all (strength 2).
  const bool large = t.ranks > kMaxRingBoundRanks;
  const bool tiles_only = large || strength <= kTiles || (strength < kStrong && t.ranks > kCheapColumnRanks);
  if (tiles_only) {
    if (t.refined < kTiles) refine_tiles(geometry, threads);
    t.refined = strength;  // the same bound as the tiles one
    return;
  }
  const Geometry& g = space_.geometries[static_cast<size_t>(geometry)];
  const AttentionCostModel& cost = cost_.at(g.block);
  const int64_t layers = model_.layers;
  const int64_t per_group = model_.q_heads / t.groups;
  const int64_t batch = template_.micro_batch_sequences;
  const LaunchGeometry launch = launch_of(g, t.groups);
  const KernelTimer forward_time(cost.forward, launch);
  const KernelTimer backward_time(cost.backward, launch);
  const auto w = static_cast<size_t>(t.ranks);
  const size_t cells = static_cast<size_t>(layers * t.groups) * w;
  const bool keep_cells = strength >= kStrong;
  // Which (layer, group) entries to bound: every one the first time; once a bound exists, per layer
  // the groups busiest in either direction under it. The layer waits for every group, so any
  // subset bounds it; the other groups keep their current (weaker, still valid) terms, and the
  // busiest group under the new bound is among the bounded ones unless a weaker term beats it.
  std::vector<char> bounded(static_cast<size_t>(layers * t.groups), t.refined == 0 || t.groups <= 2 ? 1 : 0);
  if (t.refined > 0 && t.groups > 2) {
    for (int64_t l = 0; l < layers; ++l) {
      bounded[static_cast<size_t>(l * t.groups + busiest_group(t.sum_f, t.groups, w, l))] = 1;
      bounded[static_cast<size_t>(l * t.groups + busiest_group(t.sum_b, t.groups, w, l))] = 1;
    }
  }
  std::vector<int64_t> todo;
  for (int64_t index = 0; index < layers * t.groups; ++index) {
    if (bounded[static_cast<size_t>(index)] != 0) todo.push_back(index);
  }
  const bool partial = static_cast<int64_t>(todo.size()) < layers * t.groups;
  std::vector<SimNs> sum_f = partial ? t.sum_f : std::vector<SimNs>(cells, 0);
  std::vector<SimNs> own_f = partial ? t.own_f : std::vector<SimNs>(cells, 0);
  std::vector<SimNs> sum_b = partial ? t.sum_b : std::vector<SimNs>(cells, 0);
  std::vector<SimNs> own_b = partial ? t.own_b : std::vector<SimNs>(cells, 0);
  // The bounded entries' cells, at their position in `todo` (the busiest are kept below).
  CellTimes kept;
  if (keep_cells) {
    kept.forward.assign(todo.size() * w * w, 0);
    kept.backward.assign(todo.size() * w * w, 0);
  }
  parallel_for(static_cast<int64_t>(todo.size()), threads, [&](int64_t k) {
    const int64_t index = todo[static_cast<size_t>(k)];
    const int64_t l = index / t.groups;
    const int64_t group = index % t.groups;
    std::vector<const KeptPattern*> heads;
    std::vector<const std::vector<int64_t>*> sets;
    const std::vector<std::vector<int64_t>>& block_sets = diagonals_.at(g.block);
    for (int64_t h = group * per_group; h < (group + 1) * per_group; ++h) {
      heads.push_back(&patterns_.at(l, h));
      sets.push_back(&block_sets[static_cast<size_t>(l * model_.q_heads + h)]);
    }
    const WorkMatrix bound = work_lower_bound(heads, g.layout, g.block, sets,
                                              strength >= kStrong ? ColumnBound::dense : ColumnBound::representative,
                                              backward_terms(g, t.groups));
    for (size_t p = 0; p < w; ++p) {
      SimNs f = 0;
      SimNs b = 0;
      for (size_t src = 0; src < w; ++src) {
        WorkCounts cell = bound.at(static_cast<int32_t>(p), static_cast<int32_t>(src));
        cell *= batch;
        const SimNs cf = forward_time(cell);
        const SimNs cb = backward_time(cell);
        f += cf;
        b += cb;
        if (keep_cells) {
          kept.forward[(static_cast<size_t>(k) * w + p) * w + src] = cf;
          kept.backward[(static_cast<size_t>(k) * w + p) * w + src] = cb;
        }
        if (src == p) {
          own_f[static_cast<size_t>(index) * w + p] = cf;
          own_b[static_cast<size_t>(index) * w + p] = cb;
        }
      }
      sum_f[static_cast<size_t>(index) * w + p] = f;
      sum_b[static_cast<size_t>(index) * w + p] = b;
    }
  });
  set_rank_sums(t, std::move(sum_f), std::move(own_f), std::move(sum_b), std::move(own_b));
  t.refined = strength;
  if (keep_cells) {
    // Only the busiest bounded group's cells of each layer and direction: the ones the ring bound
    // runs on.
    std::vector<size_t> position(bounded.size(), 0);
    for (size_t k = 0; k < todo.size(); ++k) position[static_cast<size_t>(todo[k])] = k;
    auto busiest = std::make_shared<CellTimes>();
    busiest->forward.assign(static_cast<size_t>(layers) * w * w, 0);
    busiest->backward.assign(static_cast<size_t>(layers) * w * w, 0);
    for (int64_t l = 0; l < layers; ++l) {
      const auto copy = [&](const std::vector<SimNs>& sums, const std::vector<SimNs>& from, std::vector<SimNs>& to) {
        const int64_t group = busiest_group(sums, t.groups, w, l, &bounded);
        const size_t k = position[static_cast<size_t>(l * t.groups + group)];
        std::copy_n(from.begin() + static_cast<std::ptrdiff_t>(k * w * w), w * w,
                    to.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(l) * w * w));
      };
      copy(t.sum_f, kept.forward, busiest->forward);
      copy(t.sum_b, kept.backward, busiest->backward);
    }
    remember_cells(geometry, std::move(busiest));
  }
}

void StepLowerBound::set_rank_sums(GeometryTerms& t, std::vector<SimNs> sum_f, std::vector<SimNs> own_f,
                                   std::vector<SimNs> sum_b, std::vector<SimNs> own_b) {
  const auto per_layer = static_cast<size_t>(t.groups * t.ranks);
  for (size_t l = 0; l < t.exact.size(); ++l) {  // counted layers keep their exact terms
    if (!t.exact[l]) continue;
    for (size_t at = l * per_layer; at < (l + 1) * per_layer; ++at) {
      sum_f[at] = t.sum_f[at];
      own_f[at] = t.own_f[at];
      sum_b[at] = t.sum_b[at];
      own_b[at] = t.own_b[at];
    }
  }
  t.sum_f = std::move(sum_f);
  t.own_f = std::move(own_f);
  t.sum_b = std::move(sum_b);
  t.own_b = std::move(own_b);
  const auto w = static_cast<size_t>(t.ranks);
  t.max_f.assign(static_cast<size_t>(model_.layers), 0);
  t.max_b.assign(static_cast<size_t>(model_.layers), 0);
  for (int64_t l = 0; l < model_.layers; ++l) {
    for (size_t k = static_cast<size_t>(l * t.groups) * w; k < static_cast<size_t>((l + 1) * t.groups) * w; ++k) {
      t.max_f[static_cast<size_t>(l)] = std::max(t.max_f[static_cast<size_t>(l)], t.sum_f[k]);
      t.max_b[static_cast<size_t>(l)] = std::max(t.max_b[static_cast<size_t>(l)], t.sum_b[k]);
    }
  }
}

void StepLowerBound::refine_tiles(int32_t geometry, int threads) {
  const Geometry& g = space_.geometries[static_cast<size_t>(geometry)];
  const int64_t w = g.layout.ranks();
  const int64_t layers = model_.layers;
  const int64_t heads = model_.q_heads;
  const std::vector<std::vector<int64_t>>& block_sets = diagonals_.at(g.block);
  // Every head's rank-pair table once, for this geometry and the ones that differ from it only
  // in how heads are grouped (other head-parallel degrees with the same ring and layout).
  std::vector<RankPairTiles> tables(static_cast<size_t>(layers * heads));
  parallel_for(layers, threads, [&](int64_t l) {
    for (int64_t h = 0; h < heads; ++h) {
      const auto k = static_cast<size_t>(l * heads + h);
      tables[k] = rank_pair_tiles({&patterns_.at(l, h)}, g.layout, g.block, {&block_sets[k]},
                                  backward_terms(g, 1).key_group > 0);
    }
  });
  if (tables.front().form == RankPairTiles::Form::none) {
    tiles_from_cells(geometry, threads);
    return;
  }
  for (size_t other = 0; other < space_.geometries.size(); ++other) {
    const Geometry& o = space_.geometries[other];
    GeometryTerms& t = *geometry_terms_[other];
    const bool same_tiles = o.block == g.block && o.layout.ranks() == w && o.layout.kind() == g.layout.kind() &&
                            o.layout.granularity_tokens() == g.layout.granularity_tokens();
    if (!same_tiles || t.refined >= kTiles) continue;
    tiles_from_tables(t, o, tables, threads);
    t.refined = kTiles;
  }
}

void StepLowerBound::tiles_from_tables(GeometryTerms& t, const Geometry& g, const std::vector<RankPairTiles>& tables,
                                       int threads) {
  const AttentionCostModel& cost = cost_.at(g.block);
  const int64_t per_group = model_.q_heads / t.groups;
  const int64_t batch = template_.micro_batch_sequences;
  const int64_t heads_per_launch = per_group * batch;
  const LaunchGeometry launch = launch_of(g, t.groups);
  const int64_t run = key_group(t.groups);
  const auto w = static_cast<size_t>(t.ranks);
  const size_t cells = static_cast<size_t>(model_.layers * t.groups) * w;
  std::vector<SimNs> sum_f(cells, 0), own_f(cells, 0), sum_b(cells, 0), own_b(cells, 0);
  const KernelTimer forward_time(cost.forward, launch);
  const KernelTimer backward_time(cost.backward, launch);
  const auto cell_time = [&](const KernelTimer& time, int64_t tiles, int64_t lists, int64_t keys) {
    WorkCounts cell;
    cell.tiles = tiles * batch;
    cell.lists = lists * batch;
    cell.key_lists = keys * batch;
    return time(cell);
  };
  parallel_for(model_.layers * t.groups, threads, [&](int64_t index) {
    const int64_t l = index / t.groups;
    const int64_t group = index % t.groups;
    RankPairTiles table = tables[static_cast<size_t>(l * model_.q_heads + group * per_group)];
    for (int64_t h = group * per_group + 1; h < (group + 1) * per_group; ++h) {
      const RankPairTiles& head = tables[static_cast<size_t>(l * model_.q_heads + h)];
      if ((h - group * per_group) % run == 0) {
        table += head;  // the next K/V head
      } else {
        table.merge_same_kv_head(head);
      }
    }
    const size_t base = static_cast<size_t>(index) * w;
    if (table.form == RankPairTiles::Form::offset) {
      // Cells depend on p - src alone: per-rank sums are differences of prefix sums over offsets.
      std::vector<SimNs> prefix_f(table.table.size() + 1, 0);
      std::vector<SimNs> prefix_b(table.table.size() + 1, 0);
      for (size_t r = 0; r < table.table.size(); ++r) {
        prefix_f[r + 1] = prefix_f[r] + cell_time(forward_time, table.table[r], table.lists[r], table.keys[r]);
        prefix_b[r + 1] = prefix_b[r] + cell_time(backward_time, table.table[r], table.lists[r], table.keys[r]);
      }
      for (size_t p = 0; p < w; ++p) {
        // src = 0 .. W-1 is offset index p - src + W - 1 = p .. p + W - 1.
        sum_f[base + p] = prefix_f[p + w] - prefix_f[p];
        sum_b[base + p] = prefix_b[p + w] - prefix_b[p];
        own_f[base + p] = prefix_f[w] - prefix_f[w - 1];
        own_b[base + p] = prefix_b[w] - prefix_b[w - 1];
      }
      return;
    }
    // Zigzag: the cells of a rank, summed in closed form. A cell with tiles costs
    // round(fixed + per list x lists + per key list x key lists + per tile x tiles), the fixed
    // part holding the launch, head and chunk key-block terms; rounding each of n cells loses at
    // most n / 2 ns, so n x fixed + the per-unit terms - n / 2 (less 1 ns for floating point)
    // bounds their sum (the lists and keys bounds count rows and keys with a tile: cells without
    // tiles add none).
    const auto relaxed = [&](const KernelCoefficients& c, int64_t nonzero, int64_t tiles, int64_t lists, int64_t keys) {
      const double fixed_ns = (c.launch_us + c.per_head_us * static_cast<double>(heads_per_launch) +
                               c.per_key_block_us * static_cast<double>(launch.key_blocks())) * 1e3;
      const double total = static_cast<double>(nonzero) * (fixed_ns - 0.5) +
                           c.per_tile_us * 1e3 * static_cast<double>(tiles * batch) +
                           c.per_list_us * 1e3 * static_cast<double>(lists * batch) +
                           c.per_key_list_us * 1e3 * static_cast<double>(keys * batch) - 1.0;
      return std::max<SimNs>(0, static_cast<SimNs>(std::floor(total)));
    };
    for (size_t p = 0; p < w; ++p) {
      const auto pp = static_cast<int32_t>(p);
      const RankPairTiles::RowSums row = table.row_sums(pp);
      const int64_t nonzero = row.cells_with_tiles;
      const int64_t tiles = row.tiles;
      const int64_t lists = row.lists;
      const int64_t keys = row.keys;
      const int64_t own = table.at(pp, pp);
      own_f[base + p] = cell_time(forward_time, own, table.lists_at(pp, pp), table.keys_at(pp, pp));
      own_b[base + p] = cell_time(backward_time, own, table.lists_at(pp, pp), table.keys_at(pp, pp));
      sum_f[base + p] = std::max(own_f[base + p], relaxed(cost.forward, nonzero, tiles, lists, keys));
      sum_b[base + p] = std::max(own_b[base + p], relaxed(cost.backward, nonzero, tiles, lists, keys));
    }
  });
  set_rank_sums(t, std::move(sum_f), std::move(own_f), std::move(sum_b), std::move(own_b));
}

void StepLowerBound::tiles_from_cells(int32_t geometry, int threads) {
  GeometryTerms& t = *geometry_terms_[static_cast<size_t>(geometry)];
  const Geometry& g = space_.geometries[static_cast<size_t>(geometry)];
  const AttentionCostModel& cost = cost_.at(g.block);
  const int64_t per_group = model_.q_heads / t.groups;
  const int64_t batch = template_.micro_batch_sequences;
  const LaunchGeometry launch = launch_of(g, t.groups);
  const KernelTimer forward_time(cost.forward, launch);
  const KernelTimer backward_time(cost.backward, launch);
  const auto w = static_cast<size_t>(t.ranks);
  const size_t cells = static_cast<size_t>(model_.layers * t.groups) * w;
  std::vector<SimNs> sum_f(cells, 0), own_f(cells, 0), sum_b(cells, 0), own_b(cells, 0);
  const std::vector<std::vector<int64_t>>& block_sets = diagonals_.at(g.block);
  parallel_for(model_.layers * t.groups, threads, [&](int64_t index) {
    const int64_t l = index / t.groups;
    const int64_t group = index % t.groups;
    std::vector<const KeptPattern*> heads;
    std::vector<const std::vector<int64_t>*> sets;
    for (int64_t h = group * per_group; h < (group + 1) * per_group; ++h) {
      heads.push_back(&patterns_.at(l, h));
      sets.push_back(&block_sets[static_cast<size_t>(l * model_.q_heads + h)]);
    }
    const WorkMatrix bound = work_lower_bound(heads, g.layout, g.block, sets, ColumnBound::none, backward_terms(g, t.groups));
    for (size_t p = 0; p < w; ++p) {
      for (size_t src = 0; src < w; ++src) {
        WorkCounts cell = bound.at(static_cast<int32_t>(p), static_cast<int32_t>(src));
        cell *= batch;
        const SimNs cf = forward_time(cell);
        const SimNs cb = backward_time(cell);
        sum_f[static_cast<size_t>(index) * w + p] += cf;
        sum_b[static_cast<size_t>(index) * w + p] += cb;
        if (src == p) {
          own_f[static_cast<size_t>(index) * w + p] = cf;
          own_b[static_cast<size_t>(index) * w + p] = cb;
        }
      }
    }
  });
  set_rank_sums(t, std::move(sum_f), std::move(own_f), std::move(sum_b), std::move(own_b));
  t.refined = kTiles;
}

void StepLowerBound::remember_cells(int32_t geometry, std::shared_ptr<const CellTimes> cells) {
  const size_t bytes = (cells->forward.size() + cells->backward.size()) * sizeof(SimNs);
  cell_cache_.emplace_front(geometry, std::move(cells));
  cell_cache_bytes_ += bytes;
  while (cell_cache_.size() > 1 && cell_cache_bytes_ > kCellCacheBytes) {
    const auto& last = cell_cache_.back().second;
    cell_cache_bytes_ -= (last->forward.size() + last->backward.size()) * sizeof(SimNs);
    cell_cache_.pop_back();
  }
}

std::shared_ptr<const StepLowerBound::CellTimes> StepLowerBound::cell_times(int32_t geometry, int threads) {
  for (auto it = cell_cache_.begin(); it != cell_cache_.end(); ++it) {
    if (it->first == geometry) {
      cell_cache_.splice(cell_cache_.begin(), cell_cache_, it);  // most recently used first
      return cell_cache_.front().second;
    }
  }
  // Evicted (or never strong): recompute the strong bound, which stores the cells again.
  geometry_terms_[static_cast<size_t>(geometry)]->refined = std::min(refined(geometry), kCells);
  refine(geometry, threads, kStrong);
  return cell_cache_.front().second;
}

bool StepLowerBound::ring_bound_applies(const Candidate& c) const {
  const int64_t w = space_.degrees_of(c).context_parallel;
  return c.comm == CommPrimitive::p2p && w > 1 && w <= kMaxRingBoundRanks;
}

std::tuple<int32_t, int32_t, int32_t> StepLowerBound::ring_key(const Candidate& c) const {
  const auto [order, hierarchy] = ring_rep_[static_cast<size_t>(c.order)][static_cast<size_t>(c.hierarchy)];
  return {c.geometry, order, hierarchy};
}

bool StepLowerBound::ring_refined(const Candidate& c) const {
  return ring_terms_.count(ring_key(c)) > 0;
}

StepLowerBound::RingSetup StepLowerBound::ring_setup(int32_t order, int32_t hierarchy_index) const {
  const OrderChoice& choice = space_.orders[static_cast<size_t>(order)];
  const RingHierarchy& hierarchy = choice.hierarchies[static_cast<size_t>(hierarchy_index)];
  const std::vector<SimNs>& hops = order_terms(order).position_hop[static_cast<size_t>(hierarchy_index)];
  std::vector<int64_t> sizes;
  for (const RingLevel& level : hierarchy.levels) sizes.push_back(level.size);
  RingSetup setup{RingSchedule(sizes), {}, {}, {}, order_terms(order).dkv_hop,
                  options_.accumulator_route == AccumulatorRoute::mirror};
  const RingSchedule& schedule = setup.schedule;
  const int32_t w = schedule.ranks();
  const int32_t levels = schedule.levels();
  const auto ww = static_cast<size_t>(w);
  const auto nl = static_cast<size_t>(levels);
  // Forward hops at the fastest link of their level, posted where the simulator posts them.
  setup.kv_send.assign(ww * ww * nl, 0);
  for (int32_t t = 0; t < w; ++t) {
    for (int32_t k = 0; k < levels; ++k) {
      if (schedule.level_size(k) == 1 || !schedule.sends_at(t, k)) continue;
      for (size_t p = 0; p < ww; ++p) {
        setup.kv_send[(p * ww + static_cast<size_t>(t)) * nl + static_cast<size_t>(k)] = hops[p * nl + static_cast<size_t>(k)];
      }
    }
  }
  setup.source.resize(ww * ww);
  for (int32_t p = 0; p < w; ++p) {
    for (int32_t t = 0; t < w; ++t) setup.source[static_cast<size_t>(p) * ww + static_cast<size_t>(t)] = schedule.source(p, t);
  }
  // Mirror route: the accumulators' hops as the simulator posts them, each at its bounded time.
  if (setup.mirror) {
    const std::vector<SimNs>& per = order_terms(order).position_dkv[static_cast<size_t>(hierarchy_index)];
    setup.dkv_hops.assign(ww * ww * nl, 0);
    for (size_t p = 0; p < ww; ++p) {
      for (size_t t = 0; t < ww; ++t) {
        for (size_t k = 0; k < nl; ++k) setup.dkv_hops[(p * ww + t) * nl + k] = per[p * nl + k];
      }
    }
  }
  return setup;
}

SimNs StepLowerBound::ring_layer_ns(const RingSetup& setup, const GeometryTerms& gt, const CellTimes& bounded,
                                    int64_t layer, bool backward) const {
  const RingSchedule& schedule = setup.schedule;
  const int32_t w = schedule.ranks();
  const auto ww = static_cast<size_t>(w);
  // One ring per layer and direction, on the cells of the head group with the busiest rank (kept
  // by refine and add_exact_layers). Exact layers use their counted cells; the others the bounded ones.
  const auto exact = gt.exact_cells.find(layer);
  const CellTimes& source = exact != gt.exact_cells.end() ? exact->second : bounded;
  const size_t base = static_cast<size_t>(exact != gt.exact_cells.end() ? 0 : layer) * ww * ww;
  const std::vector<SimNs>& cells = backward ? source.backward : source.forward;
  RingInput input;
  input.keep_transfers = false;
  input.kv_send_ns = setup.kv_send;
  input.compute_ns.resize(ww * ww);
  if (backward && setup.mirror) {
    input.route = AccumulatorRoute::mirror;
    input.dkv_hop_ns = setup.dkv_hops;
  }
  for (size_t at = 0; at < ww * ww; ++at) {
    input.compute_ns[at] = cells[base + (at / ww) * ww + static_cast<size_t>(setup.source[at])];
  }
  // Direct-return accumulators wait in queues chosen by fabric: leave them out (they only delay
  // the K/V hops) and add the fastest hop that must follow the last kernel.
  const RingRun run = simulate_ring(schedule, input, backward && setup.mirror);
  return backward && !setup.mirror ? run.end_ns + setup.dkv : run.end_ns;
}

void StepLowerBound::refine_ring(const Candidate& c, int threads) {
  require(ring_bound_applies(c), "the ring bound needs a p2p ring of 2 to ", kMaxRingBoundRanks, " positions");
  if (ring_refined(c)) return;
  refine(c.geometry, threads, kStrong);
  const std::shared_ptr<const CellTimes> cell = cell_times(c.geometry, threads);
  const GeometryTerms& gt = *geometry_terms_[static_cast<size_t>(c.geometry)];
  const RingSetup setup = ring_setup(c.order, c.hierarchy);
  const auto ww = static_cast<size_t>(setup.schedule.ranks());
  RingTerms terms;
  terms.attention_fwd.assign(static_cast<size_t>(model_.layers), 0);
  terms.attention_bwd.assign(static_cast<size_t>(model_.layers), 0);
  // Within an event budget: the layers with the busiest ranks first; the others keep their cell
  // bound (terms stay 0 there, and step_ns takes the larger of the two).
  std::vector<int64_t> layers = layers_by_bound(c.geometry);
  const int64_t per_layer = 2 * static_cast<int64_t>(ww * ww);
  layers.resize(static_cast<size_t>(std::clamp<int64_t>(kRingBoundSteps / per_layer, 1, model_.layers)));
  terms.layers = layers;
  parallel_for(static_cast<int64_t>(layers.size()) * 2, threads, [&](int64_t index) {
    const int64_t l = layers[static_cast<size_t>(index / 2)];
    const bool backward = index % 2 == 1;
    (backward ? terms.attention_bwd : terms.attention_fwd)[static_cast<size_t>(l)] =
        ring_layer_ns(setup, gt, *cell, l, backward);
  });
  ring_terms_.emplace(ring_key(c), std::move(terms));
}

void StepLowerBound::add_exact_layers(int32_t geometry, const std::vector<int64_t>& layers, const WorkSet& work,
                                      int threads) {
  GeometryTerms& t = *geometry_terms_[static_cast<size_t>(geometry)];
  const Geometry& g = space_.geometries[static_cast<size_t>(geometry)];
  require(work.layers == static_cast<int64_t>(layers.size()) && work.head_groups == t.groups,
          "exact layers: ", work.layers, " counted layers of ", work.head_groups, " groups for ", layers.size(),
          " layers of ", t.groups);
  if (t.refined < kTiles) refine(geometry, threads, kTiles);
  const AttentionCostModel& cost = cost_.at(g.block);
  const LaunchGeometry launch = launch_of(g, t.groups);
  const KernelTimer forward_time(cost.forward, launch);
  const KernelTimer backward_time(cost.backward, launch);
  const auto w = static_cast<size_t>(t.ranks);
  const bool keep_cells = t.ranks <= kMaxRingBoundRanks;
  std::vector<CellTimes> cells(layers.size());
  parallel_for(static_cast<int64_t>(layers.size()), threads, [&](int64_t k) {
    const int64_t l = layers[static_cast<size_t>(k)];
    CellTimes& kept = cells[static_cast<size_t>(k)];
    if (keep_cells) {
      kept.forward.assign(static_cast<size_t>(t.groups) * w * w, 0);
      kept.backward.assign(static_cast<size_t>(t.groups) * w * w, 0);
    }
    for (int64_t group = 0; group < t.groups; ++group) {
      const WorkMatrix& matrix = work.at(k, group);
      for (size_t p = 0; p < w; ++p) {
        SimNs f = 0;
        SimNs b = 0;
        for (size_t src = 0; src < w; ++src) {
          const WorkCounts& cell = matrix.at(static_cast<int32_t>(p), static_cast<int32_t>(src));
          const SimNs cf = forward_time(cell);
          const SimNs cb = backward_time(cell);
          f += cf;
          b += cb;
          if (keep_cells) {
            kept.forward[(static_cast<size_t>(group) * w + p) * w + src] = cf;
            kept.backward[(static_cast<size_t>(group) * w + p) * w + src] = cb;
          }
          const size_t at = static_cast<size_t>(l * t.groups + group) * w + p;
          if (src == p) {
            t.own_f[at] = cf;
            t.own_b[at] = cb;
          }
        }
        const size_t at = static_cast<size_t>(l * t.groups + group) * w + p;
        t.sum_f[at] = f;
        t.sum_b[at] = b;
      }
    }
  });
  for (size_t k = 0; k < layers.size(); ++k) {
    const int64_t l = layers[k];
    const auto ul = static_cast<size_t>(l);
    t.max_f[ul] = 0;
    t.max_b[ul] = 0;
    for (size_t at = static_cast<size_t>(l * t.groups) * w; at < static_cast<size_t>((l + 1) * t.groups) * w; ++at) {
      t.max_f[ul] = std::max(t.max_f[ul], t.sum_f[at]);
      t.max_b[ul] = std::max(t.max_b[ul], t.sum_b[at]);
    }
    if (!t.exact[ul]) ++t.exact_count;
    t.exact[ul] = 1;
    if (keep_cells) {
      CellTimes busiest;
      keep_busiest(t.sum_f, t.sum_b, cells[k].forward, cells[k].backward, t.groups, w, {0}, {l}, busiest.forward,
                   busiest.backward);
      t.exact_cells[l] = std::move(busiest);
      cells[k] = CellTimes{};
    }
  }
  // The ring bounds of this geometry, again for the layers they cover that are now exact.
  const auto first = ring_terms_.lower_bound(std::make_tuple(geometry, std::numeric_limits<int32_t>::min(),
                                                             std::numeric_limits<int32_t>::min()));
  for (auto it = first; it != ring_terms_.end() && std::get<0>(it->first) == geometry; ++it) {
    RingTerms& terms = it->second;
    const RingSetup setup = ring_setup(std::get<1>(it->first), std::get<2>(it->first));
    std::vector<int64_t> redo;
    for (const int64_t l : terms.layers) {
      if (std::find(layers.begin(), layers.end(), l) != layers.end()) redo.push_back(l);
    }
    const std::shared_ptr<const CellTimes> bounded = redo.empty() ? nullptr : cell_times(geometry, threads);
    parallel_for(static_cast<int64_t>(redo.size()) * 2, threads, [&](int64_t index) {
      const int64_t l = redo[static_cast<size_t>(index / 2)];
      const bool backward = index % 2 == 1;
      // Both are bounds; the counted cells may make another head group the busiest, whose ring
      // can end earlier than the bounded one did: keep the larger.
      SimNs& term = (backward ? terms.attention_bwd : terms.attention_fwd)[static_cast<size_t>(l)];
      term = std::max(term, ring_layer_ns(setup, t, *bounded, l, backward));
    });
  }
}

std::vector<int64_t> StepLowerBound::layers_by_bound(int32_t geometry) const {
  const GeometryTerms& gt = *geometry_terms_[static_cast<size_t>(geometry)];
  std::vector<int64_t> layers(static_cast<size_t>(model_.layers));
  for (int64_t l = 0; l < model_.layers; ++l) layers[static_cast<size_t>(l)] = l;
  if (gt.max_f.empty()) return layers;
  std::stable_sort(layers.begin(), layers.end(), [&](int64_t a, int64_t b) {
    return gt.max_f[static_cast<size_t>(a)] + gt.max_b[static_cast<size_t>(a)] >
           gt.max_f[static_cast<size_t>(b)] + gt.max_b[static_cast<size_t>(b)];
  });
  return layers;
}

int64_t StepLowerBound::exact_layers(int32_t geometry) const {
  return geometry_terms_[static_cast<size_t>(geometry)]->exact_count;
}

void StepLowerBound::release_exact_cells(int32_t geometry) {
  geometry_terms_[static_cast<size_t>(geometry)]->exact_cells.clear();
}

SimNs StepLowerBound::step_ns(const Candidate& c) const {
  const OrderChoice& order = space_.order_of(c);
  const ParallelDegrees& deg = space_.degrees_of(c);
  const Geometry& geometry = space_.geometry_of(c);
  const DegreeTerms& d = degree_terms(order.degrees);
  const OrderTerms& o = order_terms(c.order);
  const GeometryTerms& gt = *geometry_terms_[static_cast<size_t>(c.geometry)];
  const bool striped = geometry.layout.kind() == LayoutKind::striped;
  const bool all_gather = c.comm == CommPrimitive::all_gather;
  const int64_t w = deg.context_parallel;

  const bool shuffled = striped && c.shuffle == LayoutShuffleMode::per_layer;
  const SimNs shuffle_in = shuffled ? o.shuffle_in : 0;
  const SimNs shuffle_out = shuffled ? o.shuffle_out : 0;
  const SimNs bcast = broadcast_ns(c.order, geometry.layout.owner(space_.seq_len_tokens - 1).ring_rank);
  const SimNs forward_rest = d.qkv_f + o.ulysses_in + shuffle_in + bcast + d.scores + o.reduce + gt.index_build +
                             shuffle_out + o.ulysses_out + d.out_f + d.mlp_f;
  const SimNs backward_rest = d.mlp_b + d.out_b + o.ulysses_out + shuffle_out + shuffle_in + o.ulysses_in + d.qkv_b;
  const SimNs chain = all_gather ? 0 : hop_chain_ns(c);
  const SimNs dkv = (!all_gather && w > 1) ? o.dkv_hop : 0;

  const auto ring_it = all_gather ? ring_terms_.end() : ring_terms_.find(ring_key(c));
  const RingTerms* ring = ring_it == ring_terms_.end() ? nullptr : &ring_it->second;

  SimNs forward = 0;
  SimNs backward = 0;
  SimNs first_backward = 0;
  for (int64_t l = 0; l < model_.layers; ++l) {
    SimNs attn_f = 0;
    SimNs attn_b = 0;
    // The coarse terms bound the busiest rank's kernel time too: a floor under every strength.
    const SimNs busiest_f = gt.refined == 0 ? gt.coarse_f[static_cast<size_t>(l)]
                                            : std::max(gt.max_f[static_cast<size_t>(l)], gt.coarse_f[static_cast<size_t>(l)]);
    const SimNs busiest_b = gt.refined == 0 ? gt.coarse_b[static_cast<size_t>(l)]
                                            : std::max(gt.max_b[static_cast<size_t>(l)], gt.coarse_b[static_cast<size_t>(l)]);
    if (ring != nullptr) {
      attn_f = std::max({ring->attention_fwd[static_cast<size_t>(l)], busiest_f, chain});
      attn_b = std::max({ring->attention_bwd[static_cast<size_t>(l)], std::max(busiest_b, chain) + dkv});
    } else if (gt.refined == 0) {
      // All-gather: compute past the own chunk waits for the gather; the scatter follows it all.
      const SimNs wait = all_gather ? o.gather : chain;
      attn_f = std::max(gt.coarse_f[static_cast<size_t>(l)], wait);
      attn_b = std::max(gt.coarse_b[static_cast<size_t>(l)], wait) + (all_gather ? o.scatter : dkv);
    } else if (!all_gather) {
      attn_f = std::max(busiest_f, chain);
      attn_b = std::max(busiest_b, chain) + dkv;
    } else {
      const auto ww = static_cast<size_t>(w);
      for (int64_t group = 0; group < gt.groups; ++group) {
        const size_t base = static_cast<size_t>(l * gt.groups + group) * ww;
        SimNs end_f = 0;
        SimNs end_b = 0;
        for (size_t p = 0; p < ww; ++p) {
          end_f = std::max(end_f, std::max(gt.own_f[base + p], o.gather) + gt.sum_f[base + p] - gt.own_f[base + p]);
          end_b = std::max(end_b, std::max(gt.own_b[base + p], o.gather) + gt.sum_b[base + p] - gt.own_b[base + p]);
        }
        attn_f = std::max(attn_f, end_f);
        attn_b = std::max(attn_b, end_b + o.scatter);
      }
      attn_f = std::max(attn_f, std::max(gt.coarse_f[static_cast<size_t>(l)], o.gather));
      attn_b = std::max(attn_b, std::max(gt.coarse_b[static_cast<size_t>(l)], o.gather) + o.scatter);
    }
    const SimNs layer_forward = forward_rest + attn_f;
    SimNs layer_backward = backward_rest + attn_b;
    if (c.recompute == RecomputeMode::full) layer_backward += layer_forward;
    if (c.recompute == RecomputeMode::selective) layer_backward += attn_f;
    forward += layer_forward;
    backward += layer_backward;
    if (l == 0) first_backward = layer_backward;
  }
  const SimNs sync = sync_ns(c.zero_stage);
  SimNs exposed = sync;
  if (options_.overlap_grad_sync && model_.layers > 0) {
    exposed = std::max<SimNs>(0, std::max(sync - (backward - first_backward), sync / model_.layers));
  }
  return forward + d.lm_f + backward + d.lm_b + exposed + optimizer_ns(c.zero_stage);
}

}  // namespace sparsering
