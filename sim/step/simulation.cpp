// The end-to-end simulator (sim/step/simulation.hpp): one training step of a plan, phase by phase.
// Tested in tests/sim/simulation_test.cpp and end to end in tests/golden/golden_test.cpp.
#include "sim/step/simulation.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "sim/network/cluster_network.hpp"
#include "sim/network/nic_contention.hpp"
#include "sim/ring/all_gather_pass.hpp"
#include "sim/step/layer_shapes.hpp"
#include "sim/work/pattern_set.hpp"
#include "sim/work/run_set.hpp"

namespace sparsering {

namespace {

/// Transfer times of one ring (for building RingInput), plus what identifies rings that time alike.
struct RingLinks {
  std::vector<SimNs> hop_ns;       // [p x L + level]: K/V hop (kv_send_ns posts it at its steps)
  std::vector<SimNs> dkv_step_ns;  // [p x L + level]: dK/dV hop (dkv_hop_ns posts it at every step)
  std::vector<SimNs> kv_send_ns;   // [(p x W + t) x L + level]
  std::vector<SimNs> dkv_hop_ns;   // mirror route: [(p x W + t) x L + level]
  std::vector<SimNs> dkv_send_ns;  // direct returns: [p x W + t]
  std::vector<int32_t> dkv_level;  // direct returns: [p x W + t]
};

/// Whether two rings have the same transfer times everywhere (then one simulation serves both).
bool same_links(const RingLinks& a, const RingLinks& b) {
  return a.kv_send_ns == b.kv_send_ns && a.dkv_hop_ns == b.dkv_hop_ns && a.dkv_send_ns == b.dkv_send_ns &&
         a.dkv_level == b.dkv_level;
}

/// Innermost ring level with more than one position (where the dK/dV accumulators start).
int32_t accumulator_level(const RingSchedule& schedule) {
  int32_t inner = 0;
  while (inner + 1 < schedule.levels() && schedule.level_size(inner) == 1) ++inner;
  return inner;
}

/// Link timing of every ring. NIC sharing counts the hops of all rings that leave (enter) a node
/// through one fabric level's NICs, summed over the ring levels: an outer hop is in flight while
/// the inner ring runs, so hops of different ring levels overlap (every ring sends at the same
/// steps). The dK/dV accumulators take the same shares as the K/V hops of their level.
std::vector<RingLinks> ring_links(const ClusterNetwork& network, const RingSchedule& schedule,
                                  const std::vector<std::vector<int64_t>>& members, const LayerShapes& shapes,
                                  AccumulatorRoute route) {
  const int32_t w = schedule.ranks();
  const int32_t levels = schedule.levels();
  const auto ww = static_cast<size_t>(w);
  const auto ll = static_cast<size_t>(levels);
  const auto cell = [ww](int32_t p, int32_t t) { return static_cast<size_t>(p) * ww + static_cast<size_t>(t); };
  NicContention nics(network);
  for (const auto& ring : members) {
    for (int32_t k = 0; k < levels; ++k) {
      if (schedule.level_size(k) == 1) continue;
      for (int32_t p = 0; p < w; ++p) {
        nics.add_hop(ring[static_cast<size_t>(p)], ring[static_cast<size_t>(schedule.next(p, k))]);
      }
    }
  }
  const int32_t inner = accumulator_level(schedule);
  std::vector<RingLinks> out;
  out.reserve(members.size());
  for (const auto& ring : members) {
    RingLinks links;
    links.kv_send_ns.assign(ww * ww * ll, 0);
    std::vector<double> share(ww * ll, 1.0);
    std::vector<SimNs> hop(ww * ll, 0);
    std::vector<SimNs> dkv_hop(ww * ll, 0);
    for (int32_t p = 0; p < w; ++p) {
      for (int32_t k = 0; k < levels; ++k) {
        if (schedule.level_size(k) == 1) continue;
        const int64_t a = ring[static_cast<size_t>(p)];
        const int64_t b = ring[static_cast<size_t>(schedule.next(p, k))];
        const LinkModel& link = network.link(a, b);
        const double s = nics.share(a, b);
        const size_t at = static_cast<size_t>(p) * ll + static_cast<size_t>(k);
        share[at] = s;
        hop[at] = transfer_time_ns(link, shapes.kv_chunk_bytes, s);
        dkv_hop[at] = transfer_time_ns(link, shapes.dkv_chunk_bytes, s);
      }
    }
    links.hop_ns = hop;
    links.dkv_step_ns = dkv_hop;
    for (int32_t p = 0; p < w; ++p) {
      for (int32_t t = 0; t < w; ++t) {
        for (int32_t k = 0; k < levels; ++k) {
          if (schedule.sends_at(t, k)) {
            links.kv_send_ns[cell(p, t) * ll + static_cast<size_t>(k)] = hop[static_cast<size_t>(p) * ll + static_cast<size_t>(k)];
          }
        }
      }
    }
    if (route == AccumulatorRoute::mirror) {
      links.dkv_hop_ns.assign(ww * ww * ll, 0);
      for (int32_t p = 0; p < w; ++p) {
        for (int32_t t = 0; t < w; ++t) {
          for (int32_t k = 0; k < levels; ++k) {
            links.dkv_hop_ns[cell(p, t) * ll + static_cast<size_t>(k)] = dkv_hop[static_cast<size_t>(p) * ll + static_cast<size_t>(k)];
          }
        }
      }
    } else {
      links.dkv_send_ns.assign(ww * ww, 0);
      links.dkv_level.assign(ww * ww, inner);
      for (int32_t p = 0; p < w; ++p) {
        for (int32_t t = 0; t < w; ++t) {
          const bool last_inner = schedule.digit(t, inner) == schedule.level_size(inner) - 1;
          const int32_t to = last_inner ? schedule.source(p, t) : schedule.next(p, inner);
          if (to == p) continue;
          const int64_t a = ring[static_cast<size_t>(p)];
          const int64_t b = ring[static_cast<size_t>(to)];
          const int32_t fabric = network.link_level(a, b);
          const double s = last_inner ? 1.0 : share[static_cast<size_t>(p) * ll + static_cast<size_t>(inner)];
          links.dkv_send_ns[cell(p, t)] = transfer_time_ns(network.level_link(fabric), shapes.dkv_chunk_bytes, s);
          // A return hop waits in the queue of the ring level whose hops cross the same fabric.
          int32_t queue = inner;
          if (last_inner) {
            for (int32_t k = levels - 1; k >= 0; --k) {
              if (schedule.level_size(k) > 1 &&
                  network.link_level(a, ring[static_cast<size_t>(schedule.next(p, k))]) == fabric) {
                queue = k;
                break;
              }
            }
          }
          links.dkv_level[cell(p, t)] = queue;
        }
      }
    }
    out.push_back(std::move(links));
  }
  return out;
}

/// The ranks that form the Ulysses all-to-all group of ring position `position` of replica `d`.
std::vector<int64_t> ulysses_group(const PlanConfig& plan, int64_t d, int64_t position) {
  std::vector<int64_t> group;
  for (int64_t h = 0; h < plan.head_parallel; ++h) group.push_back(plan.global_rank(d * plan.head_parallel + h, position));
  return group;
}

/// Bytes of the sparse index of one ring cell with `rows` heads x sequences and `q_blocks` query blocks.
int64_t index_bytes_of(const WorkCounts& c, int64_t rows, int64_t q_blocks) {
  // tile_block (int32) + tile_masked (uint8) per tile, column_index (int32) per column, and the
  // two CSR offset arrays (int32) of rows x q_blocks + 1 entries.
  return 5 * c.tiles + 4 * c.columns + 8 * (rows * q_blocks + 1);
}

/// The phases of a layer outside its ring passes: the same in every layer.
struct LayerOverheads {
  SimNs shuffle_in = 0;       ///< layout all-to-all of Q, K, V in (striped layouts), worst ring
  SimNs shuffle_out = 0;      ///< layout all-to-all of the output back, worst ring
  SimNs estimate_bcast = 0;   ///< pattern estimation: broadcast of the last queries
  SimNs estimate_reduce = 0;  ///< pattern estimation: all-reduces of the statistics and masses
  SimNs ulysses_in = 0;       ///< Ulysses all-to-all of Q, K, V in, worst group
  SimNs ulysses_out = 0;      ///< Ulysses all-to-all of the output back, worst group
  SimNs estimate_scores = 0;  ///< pattern estimation: both passes and the recall selection
  SimNs index_build = 0;      ///< the sparse index of every ring step, once per layer
  SimNs qkv_fwd = 0, out_fwd = 0, mlp_fwd = 0;  ///< dense GEMMs, forward
  SimNs qkv_bwd = 0, out_bwd = 0, mlp_bwd = 0;  ///< dense GEMMs, backward
};

/// One simulate() call, phase by phase: run() calls the phases in the order they are declared,
/// each reading what the earlier ones left and adding to the result. The order of the phases is
/// the order of the result's notes and of the checks that throw.
class StepSimulation {
 public:
  StepSimulation(SimulationContext& context, const PlanConfig& plan, const ModelConfig& model,
                 const ClusterConfig& cluster, const Trace* trace, const SimulationOptions& options)
      : context_(context), plan_(plan), model_(model), cluster_(cluster), trace_(trace), options_(options) {}

  /// Every phase in order; the result of simulate().
  SimulationResult run() {
    resolve_inputs();
    count_work();
    build_models();
    classify_rings();
    layer_collectives();
    layer_compute();
    all_gather_times();
    build_ring_inputs();
    link_signature_ = link_signature();
    std::string key = ring_pass_key();
    std::shared_ptr<const RingPassSummary> cached = context_.ring_passes(key);
    if (cached && cached->links != link_signature_) {  // another ring's links under the same hash
      cached = nullptr;
      key.clear();
    }
    auto summary = cached ? nullptr : std::make_shared<RingPassSummary>();
    for (int64_t layer = 0; layer < model_.layers; ++layer) simulate_layer(layer, cached.get(), summary.get());
    if (cached) {
      per_rank_fwd_ = cached->per_rank_fwd_ns;
      exposed_steps_ = cached->exposed_steps;
      index_bytes_ = cached->index_bytes;
    } else if (!key.empty()) {
      summary->per_rank_fwd_ns = per_rank_fwd_;
      summary->exposed_steps = exposed_steps_;
      summary->index_bytes = index_bytes_;
      summary->links = link_signature_;
      context_.remember_ring_passes(key, std::move(summary));
    }
    whole_model_figures();
    assemble_step();
    estimate_memory_use();
    return std::move(result_);
  }

 private:
  /// Checks the inputs against each other and fills the result's description of the plan.
  void resolve_inputs();
  /// Selects the attention patterns (trace or dense) and counts the work of every layer, head
  /// group and ring cell, through the context's caches.
  void count_work();
  /// The kernel and GEMM cost models, the network and the ring schedule.
  void build_models();
  /// Link timing of every ring, and the classes of rings that time alike (one simulation each).
  void classify_rings();
  /// Collectives of one layer outside the ring: layout and Ulysses all-to-alls, pattern
  /// estimation broadcast and all-reduces, each over its slowest group.
  void layer_collectives();
  /// Compute of one layer outside the ring: estimation scores, index build and dense GEMMs.
  void layer_compute();
  /// The all-gather primitive's gather and reduce-scatter times per ring class (0 for p2p).
  void all_gather_times();
  /// The link inputs of each ring class; only the kernel times change from layer to layer.
  void build_ring_inputs();
  /// The link times of every ring class as the ring passes see them (with head group and
  /// all-gather times): equal signatures, equal passes.
  std::vector<int64_t> link_signature() const;
  /// What identifies the ring passes in the context's cache: everything they depend on (work,
  /// cost model, ring schedule, the link signature, primitive, accumulator route) and nothing
  /// that only follows them (recomputation, ZeRO, layout shuffle). Empty (no caching) without a
  /// trace key or when ring records are kept.
  std::string ring_pass_key() const;
  /// Layer `layer`: its ring passes forward and backward (from `cached` when given, else
  /// simulated and, with `summary`, recorded there), its phases, its sparse index bytes.
  void simulate_layer(int64_t layer, const RingPassSummary* cached, RingPassSummary* summary);
  /// Kernel times of layer `layer` into the ring inputs, then every class's forward and backward
  /// pass; fills the layer's attention times and figures, returns its step imbalance.
  double simulate_ring_passes(int64_t layer, LayerResult& lr);
  /// The forward and backward phases of a layer whose ring passes are in `lr`, and their sums.
  void add_layer_phases(LayerResult& lr) const;
  /// Bytes of the sparse index kept from forward for backward in layer `layer`: busiest rank.
  int64_t index_bytes_of_layer(int64_t layer) const;
  /// Worker imbalance, exposed share and step imbalance over all layers.
  void whole_model_figures();
  /// LM head, gradient synchronisation, optimizer, the step time and tokens per second.
  void assemble_step();
  /// Peak memory per GPU with the sparse index counted by the layers.
  void estimate_memory_use();

  SimulationContext& context_;
  const PlanConfig& plan_;
  const ModelConfig& model_;
  const ClusterConfig& cluster_;
  const Trace* trace_;
  const SimulationOptions& options_;

  SimulationResult result_;
  LayerShapes shapes_;
  bool sparse_ = false;
  int64_t n_ = 0;  // tokens of the sequence
  std::shared_ptr<const WorkSet> work_;
  std::string pattern_key_;  // the patterns' cache key (empty: not cached)
  AttentionCostModel cost_;
  GemmCostModel gemm_;
  std::optional<ClusterNetwork> network_;
  std::optional<RingSchedule> schedule_;
  int32_t w_ = 0;  // ring positions
  std::vector<int32_t> source_;  // [p x W + t]: schedule_->source(p, t)
  std::vector<RingLinks> links_;      // per ring
  std::vector<size_t> class_links_;   // representative ring of each class
  LayerOverheads overheads_;
  bool all_gather_ = false;
  std::vector<SimNs> gather_ns_;      // per class
  std::vector<SimNs> scatter_ns_;     // per class
  int64_t heads_per_launch_ = 0;
  LaunchGeometry launch_;  // the shape of every ring step's launch (kernel_time_ns)
  std::vector<RingInput> class_inputs_;
  std::vector<int64_t> link_signature_;  // what the ring passes see of the links (ring_pass_key)
  std::vector<std::vector<SimNs>> per_rank_fwd_;  // [class][position]: forward kernel time, all layers
  std::vector<int64_t> exposed_steps_;            // per class, all layers
  double step_imbalance_sum_ = 0.0;
  int64_t index_bytes_ = 0;
  int64_t q_blocks_ = 0;
};

void StepSimulation::resolve_inputs() {
  const PlanConfig& plan = plan_;
  const ModelConfig& model = model_;
  const ClusterConfig& cluster = cluster_;
  check_plan_against(plan, model, cluster);
  require(options_.threads >= 1, "simulation threads must be >= 1, got ", options_.threads);
  const GpuConfig& gpu = cluster.gpu_config;
  require(!gpu.name.empty(), "cluster '", cluster.name, "' has no loaded GPU config (gpu: ", cluster.gpu, ")");
  shapes_ = layer_shapes(plan, model);
  sparse_ = plan.sparse.enabled;
  n_ = plan.seq_len_tokens;

  SimulationResult& result = result_;
  result.plan_name = plan.name;
  result.model_name = model.name;
  result.cluster_name = cluster.name;
  result.gpu_name = gpu.name;
  result.dense = !sparse_;
  result.context_parallel = plan.context_parallel;
  result.head_parallel = plan.head_parallel;
  result.data_parallel = plan.data_parallel;
  for (const RingLevel& level : plan.ring_levels) result.ring_levels.push_back(level.size);
  result.layout = str(to_string(plan.layout.kind()),
                      plan.layout.kind() == LayoutKind::striped ? str(" G=", plan.layout.granularity_tokens()) : "");
}

void StepSimulation::count_work() {
  const PlanConfig& plan = plan_;
  const ModelConfig& model = model_;
  const SimulationOptions& options = options_;
  const Trace* trace = trace_;
  const int64_t n = n_;
  SimulationResult& result = result_;
  std::shared_ptr<const PatternSet> patterns;
  std::string pattern_key;
  if (sparse_) {
    require(trace != nullptr, "plan '", plan.name, "' is sparse (sparse.enabled: true) and needs a trace");
    RecallSettings settings;
    settings.recall = plan.sparse.recall;
    settings.max_verticals = plan.sparse.max_verticals;
    settings.max_slashes = plan.sparse.max_slashes;
    const int64_t kv_group = model.q_heads / model.kv_heads;
    pattern_key = pattern_cache_key(options.trace_key, options.trace_sample, settings, kv_group);
    patterns = context_.patterns(pattern_key, [&] {
      PatternSet set = select_patterns(*trace, options.trace_sample, settings);
      set.kv_group = kv_group;
      return set;
    });
    require(patterns->layers == model.layers, "the trace has ", patterns->layers, " layers, model '", model.name,
            "' has ", model.layers);
    require(patterns->heads == model.q_heads, "the trace has ", patterns->heads, " heads per layer, model '", model.name,
            "' has ", model.q_heads, " query heads");
    require(patterns->seq_len_tokens == n, "trace sample ", options.trace_sample, " has ", patterns->seq_len_tokens,
            " tokens, the plan's seq_len_tokens is ", n);
    if (!trace->metadata.model.empty() && trace->metadata.model != model.name &&
        trace->metadata.model != model.hf_model_id) {
      result.notes.push_back(str("the trace was made for model '", trace->metadata.model, "'; simulated as '", model.name,
                                 "' (same layers, heads and length)"));
    }
    result.notes.push_back(str("patterns: trace sample ", options.trace_sample, ", recall ", settings.recall,
                               ", caps ", settings.max_verticals, " verticals / ", settings.max_slashes, " slashes"));
  } else {
    pattern_key = str("dense|layers=", model.layers, "|heads=", model.q_heads, "|kv_heads=", model.kv_heads, "|N=", n);
    patterns = context_.patterns(pattern_key, [&] {
      PatternSet set = dense_patterns(model.layers, model.q_heads, n);
      set.kv_group = model.q_heads / model.kv_heads;
      return set;
    });
    result.notes.push_back("dense attention: every causal pair, same kernel cost model as the sparse kernel");
  }
  pattern_key_ = pattern_key;
  work_ = context_.work(pattern_key, *patterns, plan.layout, plan.sparse.block_q, plan.sparse.block_k,
                        plan.head_parallel, plan.micro_batch_sequences, options.threads);
  result.heads_per_group = work_->heads_per_group;
}

void StepSimulation::build_models() {
  const PlanConfig& plan = plan_;
  const SimulationOptions& options = options_;
  const GpuConfig& gpu = cluster_.gpu_config;
  SimulationResult& result = result_;
  cost_ = make_attention_cost_model(gpu, plan.sparse.block_q, plan.sparse.block_k, model_.head_dim, options.roofline);
  gemm_ = make_gemm_cost_model(gpu, options.roofline);
  result.calibrated = cost_.calibrated;
  result.cost_source = cost_.source;
  result.calibration = cost_.calibration;
  result.notes.insert(result.notes.end(), cost_.notes.begin(), cost_.notes.end());
  if (!gemm_.calibrated) {
    result.notes.push_back(str("GEMMs at an assumed ", options.roofline.gemm_efficiency, " of peak (uncalibrated)"));
  }
  network_.emplace(cluster_);
  for (int32_t level = 0; level < cluster_.level_count(); ++level) {
    result.notes.push_back(str("links: ", describe_link_source(cluster_.level(level))));
  }
  std::vector<int64_t> level_sizes;
  for (const RingLevel& level : plan.ring_levels) level_sizes.push_back(level.size);
  if (level_sizes.empty()) level_sizes.push_back(plan.context_parallel);
  schedule_.emplace(level_sizes);
  w_ = schedule_->ranks();
  require(w_ == plan.context_parallel, "ring levels multiply to ", w_, ", context_parallel is ", plan.context_parallel);
  // The chunk each position holds at each step, looked up W^2 times per layer and ring class.
  source_.resize(static_cast<size_t>(w_) * static_cast<size_t>(w_));
  for (int32_t p = 0; p < w_; ++p) {
    for (int32_t t = 0; t < w_; ++t) source_[static_cast<size_t>(p) * static_cast<size_t>(w_) + static_cast<size_t>(t)] = schedule_->source(p, t);
  }
}

void StepSimulation::classify_rings() {
  const PlanConfig& plan = plan_;
  SimulationResult& result = result_;
  std::vector<std::vector<int64_t>> members;
  for (int64_t r = 0; r < plan.ring_count(); ++r) members.push_back(plan.ring_members(r));
  links_ = ring_links(*network_, *schedule_, members, shapes_, options_.accumulator_route);
  const std::vector<RingLinks>& links = links_;
  for (int64_t r = 0; r < plan.ring_count(); ++r) {
    const int64_t group = r % plan.head_parallel;
    bool found = false;
    for (size_t c = 0; c < result.ring_classes.size(); ++c) {
      if (result.ring_classes[c].head_group == group && same_links(links[class_links_[c]], links[static_cast<size_t>(r)])) {
        result.ring_classes[c].rings.push_back(r);
        result.ring_classes[c].ring_members.push_back(members[static_cast<size_t>(r)]);
        found = true;
        break;
      }
    }
    if (!found) {
      result.ring_classes.push_back(
          RingClass{group, {r}, members[static_cast<size_t>(r)], {members[static_cast<size_t>(r)]}});
      class_links_.push_back(static_cast<size_t>(r));
    }
  }
}

void StepSimulation::layer_collectives() {
  const PlanConfig& plan = plan_;
  const ModelConfig& model = model_;
  const SimulationOptions& options = options_;
  const LayerShapes& shapes = shapes_;
  const ClusterNetwork& network = *network_;
  const bool sparse = sparse_;
  const int64_t n = n_;
  SimulationResult& result = result_;
  LayerOverheads& o = overheads_;
  // Layout shuffle and Ulysses all-to-alls, pattern estimation collectives: worst group.
  // Automatic: the plan's layout_shuffle key, else per layer for striped layouts only.
  const bool per_layer = plan.layout_shuffle ? *plan.layout_shuffle == LayoutShuffleMode::per_layer
                                             : plan.layout.kind() == LayoutKind::striped;
  const bool shuffle = options.layout_shuffle == LayoutShuffle::always ||
                       (options.layout_shuffle == LayoutShuffle::automatic && per_layer);
  const int32_t last_owner = plan.layout.owner(n - 1).ring_rank;
  for (const RingClass& cls : result.ring_classes) {
    if (shuffle) {
      o.shuffle_in = std::max(o.shuffle_in, network.all_to_all_ns(cls.members, shapes.qkv_local_bytes));
      o.shuffle_out = std::max(o.shuffle_out, network.all_to_all_ns(cls.members, shapes.out_local_bytes));
    }
    if (sparse) {
      std::vector<int64_t> rooted = cls.members;
      std::rotate(rooted.begin(), rooted.begin() + last_owner, rooted.end());
      const int64_t q_bytes = plan.sparse.last_q * shapes.q_heads_local * model.head_dim * shapes.bytes_per_value;
      o.estimate_bcast = std::max(o.estimate_bcast, network.broadcast_ns(rooted, q_bytes * plan.micro_batch_sequences));
      const int64_t stats = plan.sparse.last_q * shapes.q_heads_local * 2 * 4 * plan.micro_batch_sequences;
      const int64_t masses = n * shapes.q_heads_local * 4 * plan.micro_batch_sequences;
      o.estimate_reduce = std::max(o.estimate_reduce, network.all_reduce_ns(cls.members, stats) +
                                                          network.all_reduce_ns(cls.members, masses));
    }
  }
  if (shuffle) {
    result.notes.push_back(str("layout all-to-alls of Q, K, V in and of the output back (", to_string(plan.layout.kind()),
                               " layout)"));
  } else if (plan.layout.kind() == LayoutKind::striped) {
    result.notes.push_back("striped layout established once by the data loader: no layout all-to-all per layer");
  }
  if (plan.head_parallel > 1) {
    const int64_t b = shapes.bytes_per_value;
    const int64_t qkv_bytes = shapes.dense_tokens * (model.q_heads + 2 * model.kv_heads) * model.head_dim * b;
    const int64_t out_bytes = shapes.dense_tokens * model.q_heads * model.head_dim * b;
    for (int64_t d = 0; d < plan.data_parallel; ++d) {
      for (int64_t p = 0; p < plan.context_parallel; ++p) {
        const std::vector<int64_t> group = ulysses_group(plan, d, p);
        o.ulysses_in = std::max(o.ulysses_in, network.all_to_all_ns(group, qkv_bytes));
        o.ulysses_out = std::max(o.ulysses_out, network.all_to_all_ns(group, out_bytes));
      }
    }
  }
}

void StepSimulation::layer_compute() {
  const PlanConfig& plan = plan_;
  const SimulationOptions& options = options_;
  const LayerShapes& shapes = shapes_;
  const GemmCostModel& gemm = gemm_;
  const bool sparse = sparse_;
  SimulationResult& result = result_;
  LayerOverheads& o = overheads_;
  // Pattern estimation (both passes over the local keys, then the selection over the sequence's
  // masses), and the sparse index of every ring step, built once per layer after it.
  const int64_t prep_heads = shapes.q_heads_local * plan.micro_batch_sequences;
  o.estimate_scores = sparse ? estimate_time_ns(options.roofline, prep_heads, plan.layout.local_len(),
                                                plan.seq_len_tokens, plan.sparse.last_q)
                             : 0;
  o.index_build = sparse ? index_build_time_ns(options.roofline, prep_heads, plan.layout.local_len(), plan.sparse.block_q,
                                               plan.sparse.block_k)
                         : 0;
  if (sparse) {
    const RooflineAssumptions& r = options.roofline;
    result.notes.push_back(str("index preparation per layer (assumed from H200 measurements, not calibrated): "
                               "estimation ", r.estimate_launch_us, " us + ", r.estimate_per_head_ktoken_us,
                               " us per head and 1024 local tokens at last_q 64, selection ", r.select_launch_us,
                               " us + ", r.select_per_head_ktoken_us, " us per head and 1024 sequence tokens, index build ",
                               r.index_build_launch_us, " us + ", r.index_build_per_head_ktoken_us,
                               " us per head and 1024 local tokens at 128 x 128 blocks"));
  }
  o.qkv_fwd = gemm_time_ns(gemm, shapes.qkv_flops);
  o.out_fwd = gemm_time_ns(gemm, shapes.out_proj_flops);
  o.mlp_fwd = gemm_time_ns(gemm, shapes.mlp_flops);
  o.qkv_bwd = gemm_time_ns(gemm, 2.0 * shapes.qkv_flops);
  o.out_bwd = gemm_time_ns(gemm, 2.0 * shapes.out_proj_flops);
  o.mlp_bwd = gemm_time_ns(gemm, 2.0 * shapes.mlp_flops);
}

void StepSimulation::all_gather_times() {
  // The all-gather primitive: K/V of the whole group gathered before attention (again in
  // backward, which then reduce-scatters dK/dV).
  SimulationResult& result = result_;
  all_gather_ = plan_.comm == CommPrimitive::all_gather;
  gather_ns_.assign(result.ring_classes.size(), 0);
  scatter_ns_.assign(result.ring_classes.size(), 0);
  if (all_gather_) {
    for (size_t c = 0; c < result.ring_classes.size(); ++c) {
      const std::vector<int64_t>& members = result.ring_classes[c].members;
      gather_ns_[c] = network_->all_gather_ns(members, shapes_.kv_chunk_bytes * plan_.context_parallel);
      scatter_ns_[c] = network_->all_gather_ns(members, shapes_.dkv_chunk_bytes * plan_.context_parallel);
    }
    result.notes.push_back("comm all_gather: K/V all-gathered before attention (forward and backward), dK/dV reduce-scattered");
  }
}

void StepSimulation::build_ring_inputs() {
  const size_t classes = result_.ring_classes.size();
  heads_per_launch_ = work_->heads_per_group * plan_.micro_batch_sequences;
  launch_ = LaunchGeometry{.heads = heads_per_launch_,
                           .kv_heads = shapes_.kv_heads_local * plan_.micro_batch_sequences,
                           .chunk_tokens = plan_.layout.local_len(),
                           .block_k = plan_.sparse.block_k};
  result_.launch = launch_;
  const auto ww = static_cast<size_t>(w_);
  class_inputs_.assign(classes, RingInput{});
  for (size_t c = 0; c < classes; ++c) {
    const RingLinks& ring = links_[class_links_[c]];
    RingInput& input = class_inputs_[c];
    input.kv_send_ns = ring.kv_send_ns;
    input.dkv_hop_ns = ring.dkv_hop_ns;
    input.dkv_send_ns = ring.dkv_send_ns;
    input.dkv_level = ring.dkv_level;
    input.route = options_.accumulator_route;
    input.keep_transfers = options_.keep_ring_records;
  }
  per_rank_fwd_.assign(classes, std::vector<SimNs>(ww, 0));
  exposed_steps_.assign(classes, 0);
  q_blocks_ = ceil_div(plan_.layout.local_len(), plan_.sparse.block_q);
}

std::vector<int64_t> StepSimulation::link_signature() const {
  std::vector<int64_t> out;
  for (size_t c = 0; c < result_.ring_classes.size(); ++c) {
    const RingLinks& links = links_[class_links_[c]];
    out.push_back(result_.ring_classes[c].head_group);
    out.push_back(gather_ns_[c]);
    out.push_back(scatter_ns_[c]);
    for (const auto* part : {&links.hop_ns, &links.dkv_step_ns, &links.dkv_send_ns}) {
      out.push_back(static_cast<int64_t>(part->size()));
      out.insert(out.end(), part->begin(), part->end());
    }
    out.push_back(static_cast<int64_t>(links.dkv_level.size()));
    out.insert(out.end(), links.dkv_level.begin(), links.dkv_level.end());
  }
  return out;
}

std::string StepSimulation::ring_pass_key() const {
  if (options_.trace_key.empty() || options_.keep_ring_records || pattern_key_.empty()) return {};
  const PlanConfig& plan = plan_;
  const RooflineAssumptions& r = options_.roofline;
  std::string key = str(pattern_key_, "|model=", model_.name, "|cluster=", cluster_.name, "|gpu=", cluster_.gpu_config.name,
                        "|", to_string(plan.layout.kind()), "|N=", n_, "|W=", plan.context_parallel, "|H=", plan.head_parallel,
                        "|D=", plan.data_parallel, "|G=", plan.layout.granularity_tokens(), "|bq=", plan.sparse.block_q,
                        "|bk=", plan.sparse.block_k, "|batch=", plan.micro_batch_sequences, "|comm=", to_string(plan.comm),
                        "|route=", static_cast<int>(options_.accumulator_route), "|roofline=", r.attention_efficiency, ",",
                        r.gather_slowdown, ",", r.backward_flop_ratio, ",", r.launch_us, "|levels=");
  for (const RingLevel& level : plan.ring_levels) key += str(level.size, to_string(level.link), ",");
  // Not the ring order itself: orders whose rings time alike (mirror images, nodes visited in
  // another sequence) share their passes. The hash names the links; the summary keeps them whole
  // and run() checks them, so two links that hash alike never share.
  uint64_t hash = 1469598103934665603ULL;  // FNV-1a over the signature's bytes
  for (const int64_t v : link_signature_) {
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= (static_cast<uint64_t>(v) >> (8 * byte)) & 0xffU;
      hash *= 1099511628211ULL;
    }
  }
  key += str("|links=", hash, "/", link_signature_.size());
  return key;
}

void StepSimulation::simulate_layer(int64_t layer, const RingPassSummary* cached, RingPassSummary* summary) {
  LayerResult lr;
  lr.layer = layer;
  double layer_step_imbalance = 1.0;
  if (cached != nullptr) {
    const RingPassSummary::Layer& c = cached->layers[static_cast<size_t>(layer)];
    lr.attention_fwd_ns = c.attention_fwd_ns;
    lr.attention_bwd_ns = c.attention_bwd_ns;
    lr.busiest_kernel_fwd_ns = c.busiest_kernel_fwd_ns;
    lr.busiest_kernel_bwd_ns = c.busiest_kernel_bwd_ns;
    lr.worker_imbalance = c.worker_imbalance;
    lr.exposed_share = c.exposed_share;
    lr.backward_exposed_share = c.backward_exposed_share;
    layer_step_imbalance = c.step_imbalance;
  } else {
    layer_step_imbalance = simulate_ring_passes(layer, lr);
    if (summary != nullptr) {
      summary->layers.push_back(RingPassSummary::Layer{lr.attention_fwd_ns, lr.attention_bwd_ns,
                                                       lr.busiest_kernel_fwd_ns, lr.busiest_kernel_bwd_ns,
                                                       lr.worker_imbalance, layer_step_imbalance, lr.exposed_share,
                                                       lr.backward_exposed_share});
    }
  }
  lr.step_imbalance = layer_step_imbalance;
  step_imbalance_sum_ += layer_step_imbalance;
  for (int64_t g = 0; g < plan_.head_parallel; ++g) lr.work += work_->at(layer, g).total();
  add_layer_phases(lr);
  result_.step.forward_ns += lr.forward_ns;
  result_.step.backward_ns += lr.backward_ns;
  result_.layers.push_back(std::move(lr));
  if (sparse_ && cached == nullptr) index_bytes_ += index_bytes_of_layer(layer);
}

double StepSimulation::simulate_ring_passes(int64_t layer, LayerResult& lr) {
  const RingSchedule& schedule = *schedule_;
  const SimulationOptions& options = options_;
  const int32_t w = w_;
  const auto ww = static_cast<size_t>(w);
  SimulationResult& result = result_;
  double layer_step_imbalance = 1.0;
  for (size_t c = 0; c < result.ring_classes.size(); ++c) {
    const RingClass& cls = result.ring_classes[c];
    const WorkMatrix& matrix = work_->at(layer, cls.head_group);
    RingInput& input = class_inputs_[c];
    input.compute_ns.resize(ww * ww);
    std::vector<SimNs> backward_compute(ww * ww);
    std::vector<WorkCounts> cell_work;
    if (options.keep_ring_records) cell_work.resize(ww * ww);
    const KernelTimer forward_time(cost_.forward, launch_);
    const KernelTimer backward_time(cost_.backward, launch_);
    for (int32_t p = 0; p < w; ++p) {
      SimNs rank_fwd = 0;
      SimNs rank_bwd = 0;
      for (int32_t t = 0; t < w; ++t) {
        const WorkCounts& cell = matrix.at(p, source_[static_cast<size_t>(p) * ww + static_cast<size_t>(t)]);
        const size_t at = static_cast<size_t>(p) * ww + static_cast<size_t>(t);
        input.compute_ns[at] = forward_time(cell);
        backward_compute[at] = backward_time(cell);
        if (!cell_work.empty()) cell_work[at] = cell;
        rank_fwd += input.compute_ns[at];
        rank_bwd += backward_compute[at];
      }
      per_rank_fwd_[c][static_cast<size_t>(p)] += rank_fwd;
      lr.busiest_kernel_fwd_ns = std::max(lr.busiest_kernel_fwd_ns, rank_fwd);
      lr.busiest_kernel_bwd_ns = std::max(lr.busiest_kernel_bwd_ns, rank_bwd);
    }
    RingPassResult fwd;
    fwd.layer = layer;
    fwd.head_group = cls.head_group;
    fwd.ring_class = static_cast<int32_t>(c);
    fwd.run = all_gather_ ? simulate_all_gather_pass(w, input.compute_ns, gather_ns_[c], 0)
                          : simulate_ring(schedule, input, false);
    fwd.metrics = ring_metrics(fwd.run, input.compute_ns);
    if (options.keep_ring_records) {
      fwd.compute_ns = input.compute_ns;
      fwd.cell_work = cell_work;
    }
    RingPassResult bwd;
    bwd.layer = layer;
    bwd.head_group = cls.head_group;
    bwd.ring_class = static_cast<int32_t>(c);
    bwd.backward = true;
    input.compute_ns.swap(backward_compute);
    bwd.run = all_gather_ ? simulate_all_gather_pass(w, input.compute_ns, gather_ns_[c], scatter_ns_[c])
                          : simulate_ring(schedule, input, true);
    bwd.metrics = ring_metrics(bwd.run, input.compute_ns);
    if (options.keep_ring_records) {
      bwd.compute_ns = input.compute_ns;
      bwd.cell_work = std::move(cell_work);
    }
    lr.attention_fwd_ns = std::max(lr.attention_fwd_ns, fwd.run.end_ns);
    lr.attention_bwd_ns = std::max(lr.attention_bwd_ns, bwd.run.end_ns);
    lr.worker_imbalance = std::max(lr.worker_imbalance, fwd.metrics.worker_imbalance);
    layer_step_imbalance = std::max(layer_step_imbalance, fwd.metrics.mean_step_imbalance);
    lr.exposed_share = std::max(lr.exposed_share, fwd.metrics.exposed_share);
    lr.backward_exposed_share = std::max(lr.backward_exposed_share, bwd.metrics.exposed_share);
    exposed_steps_[c] += fwd.metrics.exposed_steps;
    if (options.keep_ring_records) {
      result.rings.push_back(std::move(fwd));
      result.rings.push_back(std::move(bwd));
    }
  }
  return layer_step_imbalance;
}

void StepSimulation::add_layer_phases(LayerResult& lr) const {
  const LayerOverheads& o = overheads_;
  const auto add = [](std::vector<LayerPhase>& phases, const char* name, SimNs ns, bool comm) {
    if (ns > 0) phases.push_back(LayerPhase{name, ns, comm});
  };
  add(lr.forward, "qkv_proj", o.qkv_fwd, false);
  add(lr.forward, "ulysses_a2a_in", o.ulysses_in, true);
  add(lr.forward, "layout_a2a_in", o.shuffle_in, true);
  add(lr.forward, "estimate_bcast", o.estimate_bcast, true);
  add(lr.forward, "estimate_scores", o.estimate_scores, false);
  add(lr.forward, "estimate_allreduce", o.estimate_reduce, true);
  add(lr.forward, "index_build", o.index_build, false);
  add(lr.forward, "attention_ring", lr.attention_fwd_ns, false);
  add(lr.forward, "layout_a2a_out", o.shuffle_out, true);
  add(lr.forward, "ulysses_a2a_out", o.ulysses_out, true);
  add(lr.forward, "out_proj", o.out_fwd, false);
  add(lr.forward, "mlp", o.mlp_fwd, false);
  for (const LayerPhase& phase : lr.forward) lr.forward_ns += phase.duration_ns;
  if (plan_.recompute == RecomputeMode::full) add(lr.backward, "recompute_forward", lr.forward_ns, false);
  add(lr.backward, "mlp_bwd", o.mlp_bwd, false);
  add(lr.backward, "out_proj_bwd", o.out_bwd, false);
  add(lr.backward, "ulysses_a2a_in", o.ulysses_out, true);
  add(lr.backward, "layout_a2a_in", o.shuffle_out, true);
  if (plan_.recompute == RecomputeMode::selective) add(lr.backward, "attention_recompute", lr.attention_fwd_ns, false);
  add(lr.backward, "attention_ring_bwd", lr.attention_bwd_ns, false);
  add(lr.backward, "layout_a2a_out", o.shuffle_in, true);
  add(lr.backward, "ulysses_a2a_out", o.ulysses_in, true);
  add(lr.backward, "qkv_proj_bwd", o.qkv_bwd, false);
  for (const LayerPhase& phase : lr.backward) lr.backward_ns += phase.duration_ns;
}

int64_t StepSimulation::index_bytes_of_layer(int64_t layer) const {
  int64_t worst = 0;
  for (int64_t g = 0; g < plan_.head_parallel; ++g) {
    const WorkMatrix& matrix = work_->at(layer, g);
    for (int32_t p = 0; p < w_; ++p) {
      int64_t bytes = 0;
      for (int32_t src = 0; src < w_; ++src) bytes += index_bytes_of(matrix.at(p, src), heads_per_launch_, q_blocks_);
      worst = std::max(worst, bytes);
    }
  }
  return worst;
}

void StepSimulation::whole_model_figures() {
  const int32_t w = w_;
  SimulationResult& result = result_;
  for (size_t c = 0; c < result.ring_classes.size(); ++c) {
    SimNs total = 0;
    SimNs most = 0;
    for (const SimNs v : per_rank_fwd_[c]) {
      total += v;
      most = std::max(most, v);
    }
    const double mean = static_cast<double>(total) / static_cast<double>(w);
    result.worker_imbalance = std::max(result.worker_imbalance, mean > 0.0 ? static_cast<double>(most) / mean : 1.0);
    if (w > 1) {
      const double share = static_cast<double>(exposed_steps_[c]) /
                           (static_cast<double>(model_.layers) * static_cast<double>(w) * static_cast<double>(w - 1));
      result.exposed_share = std::max(result.exposed_share, share);
    }
  }
  result.step_imbalance = step_imbalance_sum_ / static_cast<double>(model_.layers);
}

void StepSimulation::assemble_step() {
  const PlanConfig& plan = plan_;
  const ModelConfig& model = model_;
  const GpuConfig& gpu = cluster_.gpu_config;
  const LayerShapes& shapes = shapes_;
  const GemmCostModel& gemm = gemm_;
  const ClusterNetwork& network = *network_;
  SimulationResult& result = result_;
  result.step.lm_head_ns = gemm_time_ns(gemm, shapes.lm_head_flops) + gemm_time_ns(gemm, 2.0 * shapes.lm_head_flops);
  std::vector<int64_t> world(static_cast<size_t>(plan.world_size()));
  for (size_t r = 0; r < world.size(); ++r) world[r] = static_cast<int64_t>(r);
  const int64_t grad_bytes = model.parameter_count() * model.bytes_per_param;
  result.step.grad_sync_ns = network.all_reduce_ns(world, grad_bytes);
  if (plan.zero_stage >= 3 && plan.world_size() > 1) {
    result.step.grad_sync_ns += 2 * network.all_gather_ns(world, grad_bytes);
    result.notes.push_back("ZeRO-3: parameters all-gathered for forward and backward (counted with gradient sync)");
  }
  SimNs exposed = result.step.grad_sync_ns;
  if (options_.overlap_grad_sync && model.layers > 0) {
    const SimNs window = result.step.backward_ns - result.layers.front().backward_ns;
    exposed = std::max(result.step.grad_sync_ns - window, result.step.grad_sync_ns / model.layers);
    exposed = std::max<SimNs>(exposed, 0);
  }
  result.step.grad_sync_exposed_ns = exposed;
  const int64_t shard = plan.zero_stage >= 1 ? plan.world_size() : 1;
  const double optimizer_bytes = 36.0 * static_cast<double>(model.parameter_count()) / static_cast<double>(shard);
  require(gpu.memory_bandwidth_gbytes_per_s > 0.0, "GPU '", gpu.name, "' has no memory_bandwidth_gbytes_per_s");
  result.step.optimizer_ns = round_to_ns(optimizer_bytes / gpu.memory_bandwidth_gbytes_per_s);
  result.step.forward_ns += gemm_time_ns(gemm, shapes.lm_head_flops);
  result.step.backward_ns += gemm_time_ns(gemm, 2.0 * shapes.lm_head_flops);
  result.step.step_ns =
      result.step.forward_ns + result.step.backward_ns + result.step.grad_sync_exposed_ns + result.step.optimizer_ns;
  result.step.tokens_per_step = plan.data_parallel * plan.micro_batch_sequences * n_;
  result.step.tokens_per_s = result.step.step_ns > 0 ? static_cast<double>(result.step.tokens_per_step) /
                                                           (static_cast<double>(result.step.step_ns) * 1e-9)
                                                     : 0.0;
}

void StepSimulation::estimate_memory_use() {
  result_.memory = estimate_memory(plan_, model_, cluster_.gpu_config, shapes_, index_bytes_);
  if (!result_.memory.fits) result_.notes.push_back(str("does not fit: ", result_.memory.reason));
  result_.work_cache_hits = context_.work_cache_hits();
}

}  // namespace

PlanPrediction SimulationResult::prediction(const std::string& version) const {
  PlanPrediction p;
  p.sparsering_version = version;
  for (const LayerResult& layer : layers) {
    p.attention_fwd_ms.push_back(ns_to_ms(layer.attention_fwd_ns));
    p.attention_bwd_ms.push_back(ns_to_ms(layer.attention_bwd_ns));
  }
  p.step_ms = ns_to_ms(step.step_ns);
  p.tokens_per_s = step.tokens_per_s;
  p.worker_imbalance = worker_imbalance;
  p.step_imbalance = step_imbalance;
  p.exposed_comm_share = exposed_share;
  p.peak_memory_gib = static_cast<double>(memory.peak_bytes) / static_cast<double>(int64_t{1} << 30);
  return p;
}

std::string pattern_cache_key(const std::string& trace_key, int64_t sample, const RecallSettings& settings,
                              int64_t kv_group) {
  if (trace_key.empty()) return {};
  return str("trace=", trace_key, "|sample=", sample, "|recall=", settings.recall, "|maxv=", settings.max_verticals,
             "|maxs=", settings.max_slashes, "|kv_group=", kv_group);
}

SimulationResult simulate(SimulationContext& context, const PlanConfig& plan, const ModelConfig& model,
                          const ClusterConfig& cluster, const Trace* trace, const SimulationOptions& options) {
  return StepSimulation(context, plan, model, cluster, trace, options).run();
}

}  // namespace sparsering
