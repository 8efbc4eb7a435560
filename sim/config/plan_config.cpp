// Plan parsing, self-consistency and cross-checks, and the YAML emitter. Degrees are capped so the
// world (and the ring_order list) stays at most 2^20 ranks whatever the input.
#include "sim/config/plan_config.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "common/text_safety.hpp"
#include "common/yaml_reader.hpp"
#include "core/kernel_support.hpp"
#include "sim/config/config_ref.hpp"

namespace sparsering {
namespace {

using yaml::NumberBounds;

constexpr int64_t kMaxWorld = int64_t{1} << 20;
constexpr int64_t kMaxSeqLen = int64_t{1} << 40;
constexpr size_t kMaxRingLevels = 8;
constexpr size_t kMaxLayers = 4096;
constexpr size_t kMaxHashes = 64;
constexpr int64_t kMaxIndexEntries = (int64_t{1} << 31) - 1;

bool is_power_of_two(int64_t value) { return value > 0 && (value & (value - 1)) == 0; }

constexpr int64_t kMinBlockTokens = 16;
constexpr int64_t kMaxBlockTokens = 512;

/// The block sizes a plan may name: powers of two in [16, 512] that the CUDA kernels run.
std::string supported_block_sizes() {
  std::string list;
  for (int64_t block = kMinBlockTokens; block <= kMaxBlockTokens; block *= 2) {
    if (is_supported_block_size(block)) list += str(list.empty() ? "" : ", ", block);
  }
  return list;
}

int64_t read_block(yaml::MapReader& map, std::string_view key, int64_t fallback) {
  const int64_t value = map.optional_int(key, fallback, kMinBlockTokens, kMaxBlockTokens);
  require(is_power_of_two(value), map.key_path(key), " must be a power of two in [16, 512], got ", value);
  // A plan is meant to run: refuse here what the kernels would refuse at launch.
  if (const auto why = block_size_unsupported(value, map.key_path(key))) {
    throw InputError(str(*why, ": the CUDA attention kernels run ", kKernelTileTokens,
                         "-token tiles; supported block sizes: ", supported_block_sizes()));
  }
  return value;
}

SparseSettings read_sparse(yaml::MapReader map, int64_t seq_len_tokens) {
  SparseSettings s;
  s.enabled = map.optional_bool("enabled", true);
  s.block_q = read_block(map, "block_q", s.block_q);
  s.block_k = read_block(map, "block_k", s.block_k);
  s.recall = map.optional_number("recall", s.recall, NumberBounds::left_open(0.0, 1.0));
  s.max_verticals = map.optional_int("max_verticals", s.max_verticals, 1, kMaxIndexEntries);
  s.max_slashes = map.optional_int("max_slashes", s.max_slashes, 1, kMaxIndexEntries);
  s.last_q = map.optional_int("last_q", s.last_q, 1, 4096);
  require(s.last_q <= seq_len_tokens, map.key_path("last_q"), " (", s.last_q, ") must not exceed plan.seq_len_tokens (",
          seq_len_tokens, ")");
  map.finish();
  return s;
}

std::vector<double> read_per_layer(yaml::MapReader& map, std::string_view key) {
  std::vector<double> values;
  const auto node = map.optional(key);
  if (!node) return values;
  const std::vector<YAML::Node> items = yaml::to_sequence(*node, map.key_path(key), kMaxLayers);
  for (size_t i = 0; i < items.size(); ++i) {
    values.push_back(yaml::to_number(items[i], str(map.key_path(key), "[", i, "]"), NumberBounds::non_negative()));
  }
  return values;
}

PlanPrediction read_prediction(yaml::MapReader map) {
  PlanPrediction p;
  p.sparsering_version = map.required_string("sparsering_version");
  if (auto hashes = map.optional_map("input_hashes")) {
    require(hashes->entries().size() <= kMaxHashes, hashes->path(), " has more than ", kMaxHashes, " entries");
    for (const auto& [key, value] : hashes->entries()) {
      hashes->allow(key);
      p.input_hashes[key] = yaml::to_string(value, hashes->key_path(key));
    }
    hashes->finish();
  }
  p.attention_fwd_ms = read_per_layer(map, "attention_fwd_ms");
  p.attention_bwd_ms = read_per_layer(map, "attention_bwd_ms");
  require(p.attention_fwd_ms.size() == p.attention_bwd_ms.size(), map.key_path("attention_bwd_ms"), " has ",
          p.attention_bwd_ms.size(), " layers but ", map.key_path("attention_fwd_ms"), " has ", p.attention_fwd_ms.size());
  p.step_ms = map.required_number("step_ms", NumberBounds::non_negative());
  p.tokens_per_s = map.required_number("tokens_per_s", NumberBounds::non_negative());
  p.worker_imbalance = map.optional_number("worker_imbalance", 1.0, NumberBounds::closed(1.0, 1e9));
  p.step_imbalance = map.optional_number("step_imbalance", 1.0, NumberBounds::closed(1.0, 1e9));
  p.exposed_comm_share = map.optional_number("exposed_comm_share", 0.0, NumberBounds::closed(0.0, 1.0));
  p.peak_memory_gib = map.optional_number("peak_memory_gib", 0.0, NumberBounds::non_negative());
  map.finish();
  return p;
}

std::vector<RingLevel> read_levels(yaml::MapReader& ring, int64_t context_parallel) {
  std::vector<RingLevel> levels;
  const std::string path = ring.key_path("levels");
  const std::vector<YAML::Node> items = ring.required_sequence("levels", kMaxRingLevels);
  require(!items.empty(), path, " must list at least one level");
  int64_t product = 1;
  std::string sizes;
  for (size_t i = 0; i < items.size(); ++i) {
    yaml::MapReader level_map(items[i], str(path, "[", i, "]"));
    RingLevel level;
    level.size = level_map.required_int("size", 1, kMaxWorld);
    level.link = parse_link_kind(level_map.required_choice("link", {"nvlink", "pcie", "infiniband", "roce", "ethernet"}),
                                 level_map.key_path("link"));
    level_map.finish();
    product = std::min(product * level.size, kMaxWorld + 1);  // both factors <= 2^20: no overflow
    sizes += (sizes.empty() ? "" : " x ") + std::to_string(level.size);
    levels.push_back(level);
  }
  require(product == context_parallel, path, " sizes multiply to ", sizes, " = ",
          product > kMaxWorld ? std::string("more than 2^20") : std::to_string(product),
          ", but plan.context_parallel is ", context_parallel);
  return levels;
}

std::vector<int64_t> read_ring_order(const YAML::Node& node, const std::string& path, const PlanConfig& plan) {
  const int64_t world = plan.world_size();
  require(node.IsSequence(), path, " must be a sequence of global ranks, got ", yaml::describe(node));
  require(static_cast<int64_t>(node.size()) == world, path, " has ", node.size(),
          " ranks; it must list each of the context_parallel x head_parallel x data_parallel = ", plan.context_parallel,
          " x ", plan.head_parallel, " x ", plan.data_parallel, " = ", world, " ranks once");
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(world));
  std::vector<int64_t> first_seen(static_cast<size_t>(world), -1);
  for (const YAML::Node& item : node) {
    const int64_t index = static_cast<int64_t>(order.size());
    const std::string item_path = str(path, "[", index, "]");
    const int64_t rank = yaml::to_int(item, item_path, 0, world - 1);
    int64_t& seen = first_seen[static_cast<size_t>(rank)];
    require(seen < 0, item_path, " repeats rank ", rank, " (also at [", seen, "])");
    seen = index;
    order.push_back(rank);
  }
  return order;
}

PlanConfig build_plan(const YAML::Node& root) {
  yaml::MapReader map(root, "plan");
  PlanConfig plan;
  plan.name = map.optional_string("name", "");
  // The name is printed, written to JSON and into exports: no control characters, valid UTF-8.
  require_safe_name(plan.name, map.key_path("name"));
  plan.model = map.required_string("model");
  if (!is_path_ref(plan.model)) plan.model = yaml::to_name(map.required("model"), map.key_path("model"));
  plan.cluster = map.required_string("cluster");
  if (!is_path_ref(plan.cluster)) plan.cluster = yaml::to_name(map.required("cluster"), map.key_path("cluster"));
  plan.trace = map.optional_string("trace", "");
  plan.seq_len_tokens = map.required_int("seq_len_tokens", 1, kMaxSeqLen);
  plan.micro_batch_sequences = map.optional_int("micro_batch_sequences", 1, 1, kMaxWorld);
  plan.context_parallel = map.required_int("context_parallel", 1, kMaxWorld);
  plan.head_parallel = map.optional_int("head_parallel", 1, 1, kMaxWorld);
  plan.data_parallel = map.optional_int("data_parallel", 1, 1, kMaxWorld);
  // Each degree <= 2^20, so the products below cannot overflow int64.
  require(plan.world_size() <= kMaxWorld, "plan: context_parallel x head_parallel x data_parallel = ",
          plan.context_parallel, " x ", plan.head_parallel, " x ", plan.data_parallel, " = ", plan.world_size(),
          " is more than the ", kMaxWorld, " ranks a plan may have");

  yaml::MapReader ring = map.required_map("ring");
  plan.ring_levels = read_levels(ring, plan.context_parallel);
  if (auto order = ring.optional("order")) {
    plan.ring_order = read_ring_order(*order, ring.key_path("order"), plan);
  } else {
    plan.ring_order = identity_ring_order(plan.world_size());
  }
  ring.finish();

  yaml::MapReader layout = map.required_map("layout");
  const std::string kind_name = layout.required_choice("kind", {"contiguous", "zigzag", "striped"});
  const LayoutKind kind = parse_layout_kind(kind_name);
  int64_t granularity = 0;
  if (kind == LayoutKind::striped) {
    granularity = layout.required_int("granularity_tokens", 1, plan.seq_len_tokens);
  } else {
    require(!layout.has("granularity_tokens"), layout.key_path("granularity_tokens"),
            " applies to the striped layout only, not ", kind_name);
  }
  layout.finish();
  try {
    plan.layout = make_token_layout(kind, plan.seq_len_tokens, static_cast<int32_t>(plan.context_parallel), granularity);
  } catch (const InputError& error) {
    throw InputError(str("plan.layout: ", error.what(), " (plan.seq_len_tokens ", plan.seq_len_tokens,
                         ", plan.context_parallel ", plan.context_parallel, ")"));
  }

  if (auto sparse = map.optional_map("sparse")) {
    plan.sparse = read_sparse(*sparse, plan.seq_len_tokens);
  } else {
    require(plan.sparse.last_q <= plan.seq_len_tokens, "plan.sparse.last_q (default ", plan.sparse.last_q,
            ") must not exceed plan.seq_len_tokens (", plan.seq_len_tokens, ")");
  }
  plan.comm = map.optional_choice("comm", "p2p", {"p2p", "all_gather"}) == "p2p" ? CommPrimitive::p2p
                                                                                 : CommPrimitive::all_gather;
  const std::string recompute = map.optional_choice("recompute", "none", {"none", "selective", "full"});
  plan.recompute = recompute == "none" ? RecomputeMode::none
                   : recompute == "selective" ? RecomputeMode::selective
                                              : RecomputeMode::full;
  plan.zero_stage = map.optional_int("zero_stage", 0, 0, 3);
  const std::string shuffle = map.optional_choice("layout_shuffle", "", {"per_layer", "loader"});
  if (!shuffle.empty()) plan.layout_shuffle = shuffle == "loader" ? LayoutShuffleMode::loader : LayoutShuffleMode::per_layer;
  if (auto prediction = map.optional_map("prediction")) plan.prediction = read_prediction(*prediction);
  map.finish();
  return plan;
}

void emit_number(YAML::Emitter& out, std::string_view key, double value) {
  out << YAML::Key << std::string(key) << YAML::Value << yaml::format_number(value);
}

void emit_per_layer(YAML::Emitter& out, std::string_view key, const std::vector<double>& values) {
  if (values.empty()) return;
  out << YAML::Key << std::string(key) << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const double value : values) out << yaml::format_number(value);
  out << YAML::EndSeq;
}

}  // namespace

int64_t PlanConfig::global_rank(int64_t ring, int64_t position) const {
  return ring_order[static_cast<size_t>(ring * context_parallel + position)];
}

std::vector<int64_t> PlanConfig::ring_members(int64_t ring) const {
  const auto first = ring_order.begin() + static_cast<std::ptrdiff_t>(ring * context_parallel);
  return {first, first + static_cast<std::ptrdiff_t>(context_parallel)};
}

int64_t PlanConfig::level_index(int64_t position, size_t level) const {
  for (size_t l = 0; l < level; ++l) position /= ring_levels[l].size;
  return position % ring_levels[level].size;
}

int64_t PlanConfig::next_position(int64_t position, size_t level) const {
  int64_t stride = 1;
  for (size_t l = 0; l < level; ++l) stride *= ring_levels[l].size;
  const int64_t size = ring_levels[level].size;
  const int64_t index = level_index(position, level);
  return position + (((index + 1) % size) - index) * stride;
}

PlanConfig parse_plan(const std::string& yaml_text, std::string_view source_name) {
  const YAML::Node root = yaml::parse_document(yaml_text, source_name);
  return yaml::with_source(source_name, [&] { return build_plan(root); });
}

PlanConfig load_plan(const std::filesystem::path& path) {
  PlanConfig plan = parse_plan(yaml::read_config_file(path), path.string());
  plan.source_path = path;
  plan.model_path = resolve_config_ref(plan.model, path, "models");
  plan.cluster_path = resolve_config_ref(plan.cluster, path, "clusters");
  if (!plan.trace.empty()) {
    const std::filesystem::path trace{plan.trace};
    plan.trace_path = (trace.is_absolute() ? trace : path.parent_path() / trace).lexically_normal();
  }
  return plan;
}

void check_plan_against(const PlanConfig& plan, const ModelConfig& model, const ClusterConfig& cluster) {
  require(is_path_ref(plan.model) || plan.model == model.name, "plan.model names ", plan.model,
          " but the model config is called ", model.name);
  require(is_path_ref(plan.cluster) || plan.cluster == cluster.name, "plan.cluster names ", plan.cluster,
          " but the cluster config is called ", cluster.name);
  require(plan.world_size() == cluster.world_size(), "plan: context_parallel x head_parallel x data_parallel = ",
          plan.context_parallel, " x ", plan.head_parallel, " x ", plan.data_parallel, " = ", plan.world_size(),
          " must equal the GPUs of cluster ", cluster.name, " (", cluster.nodes, " nodes x ", cluster.gpus_per_node,
          " = ", cluster.world_size(), ")");
  require(model.q_heads % plan.head_parallel == 0, "plan.head_parallel (", plan.head_parallel,
          ") must divide the query heads of model ", model.name, " (", model.q_heads, ")");
  require(model.kv_heads % plan.head_parallel == 0 || plan.head_parallel % model.kv_heads == 0, "plan.head_parallel (",
          plan.head_parallel, ") must divide the KV heads of model ", model.name, " (", model.kv_heads,
          ") or be a multiple of them (KV heads replicated)");
  if (plan.prediction && !plan.prediction->attention_fwd_ms.empty()) {
    require(static_cast<int64_t>(plan.prediction->attention_fwd_ms.size()) == model.layers,
            "plan.prediction.attention_fwd_ms has ", plan.prediction->attention_fwd_ms.size(), " entries but model ",
            model.name, " has ", model.layers, " layers");
  }
  // Each level's declared link must be the slowest fabric level its hops cross, in any ring.
  for (size_t l = 0; l < plan.ring_levels.size(); ++l) {
    if (plan.ring_levels[l].size == 1) continue;  // no hops
    int32_t slowest = -1;
    int64_t example_from = 0;
    int64_t example_to = 0;
    for (int64_t ring = 0; ring < plan.ring_count(); ++ring) {
      for (int64_t p = 0; p < plan.context_parallel; ++p) {
        const int64_t from = plan.global_rank(ring, p);
        const int64_t to = plan.global_rank(ring, plan.next_position(p, l));
        const int32_t level = cluster.link_level(from, to);
        if (level > slowest) {
          slowest = level;
          example_from = from;
          example_to = to;
        }
      }
    }
    const FabricLevel& fabric = cluster.level(slowest);
    require(fabric.kind == plan.ring_levels[l].link, "plan.ring.levels[", l, "].link is ",
            to_string(plan.ring_levels[l].link), " but the slowest link its hops cross is ", to_string(fabric.kind),
            " (cluster ", cluster.name, " level ", fabric.name, ", e.g. rank ", example_from, " -> ", example_to, ")");
  }
}

LoadedPlan load_plan_with_inputs(const std::filesystem::path& path) {
  LoadedPlan loaded{load_plan(path), {}, {}};
  loaded.model = load_model(loaded.plan.model_path);
  loaded.cluster = load_cluster(loaded.plan.cluster_path);
  yaml::with_source(path.string(), [&] {
    check_plan_against(loaded.plan, loaded.model, loaded.cluster);
    return 0;
  });
  return loaded;
}

std::vector<int64_t> identity_ring_order(int64_t world_size) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(world_size, 0)));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  return order;
}

std::string write_plan_yaml(const PlanConfig& plan) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  if (!plan.name.empty()) out << YAML::Key << "name" << YAML::Value << plan.name;
  out << YAML::Key << "model" << YAML::Value << plan.model;
  out << YAML::Key << "cluster" << YAML::Value << plan.cluster;
  if (!plan.trace.empty()) out << YAML::Key << "trace" << YAML::Value << plan.trace;
  out << YAML::Key << "seq_len_tokens" << YAML::Value << plan.seq_len_tokens;
  out << YAML::Key << "micro_batch_sequences" << YAML::Value << plan.micro_batch_sequences;
  out << YAML::Key << "context_parallel" << YAML::Value << plan.context_parallel;
  out << YAML::Key << "head_parallel" << YAML::Value << plan.head_parallel;
  out << YAML::Key << "data_parallel" << YAML::Value << plan.data_parallel;

  out << YAML::Key << "ring" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "levels" << YAML::Value << YAML::BeginSeq;
  for (const RingLevel& level : plan.ring_levels) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "size" << YAML::Value << level.size << YAML::Key << "link"
        << YAML::Value << std::string(to_string(level.link)) << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "order" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const int64_t rank : plan.ring_order) out << rank;
  out << YAML::EndSeq << YAML::EndMap;

  out << YAML::Key << "layout" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "kind" << YAML::Value << std::string(to_string(plan.layout.kind()));
  if (plan.layout.kind() == LayoutKind::striped) {
    out << YAML::Key << "granularity_tokens" << YAML::Value << plan.layout.granularity_tokens();
  }
  out << YAML::EndMap;

  const SparseSettings& s = plan.sparse;
  out << YAML::Key << "sparse" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "enabled" << YAML::Value << s.enabled;
  out << YAML::Key << "block_q" << YAML::Value << s.block_q;
  out << YAML::Key << "block_k" << YAML::Value << s.block_k;
  emit_number(out, "recall", s.recall);
  out << YAML::Key << "max_verticals" << YAML::Value << s.max_verticals;
  out << YAML::Key << "max_slashes" << YAML::Value << s.max_slashes;
  out << YAML::Key << "last_q" << YAML::Value << s.last_q;
  out << YAML::EndMap;

  out << YAML::Key << "comm" << YAML::Value << std::string(to_string(plan.comm));
  out << YAML::Key << "recompute" << YAML::Value << std::string(to_string(plan.recompute));
  out << YAML::Key << "zero_stage" << YAML::Value << plan.zero_stage;
  if (plan.layout_shuffle) out << YAML::Key << "layout_shuffle" << YAML::Value << std::string(to_string(*plan.layout_shuffle));

  if (plan.prediction) {
    const PlanPrediction& p = *plan.prediction;
    out << YAML::Key << "prediction" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "sparsering_version" << YAML::Value << YAML::DoubleQuoted << p.sparsering_version;
    if (!p.input_hashes.empty()) {
      out << YAML::Key << "input_hashes" << YAML::Value << YAML::BeginMap;
      for (const auto& [key, value] : p.input_hashes) {
        out << YAML::Key << key << YAML::Value << YAML::DoubleQuoted << value;
      }
      out << YAML::EndMap;
    }
    emit_number(out, "step_ms", p.step_ms);
    emit_number(out, "tokens_per_s", p.tokens_per_s);
    emit_number(out, "worker_imbalance", p.worker_imbalance);
    emit_number(out, "step_imbalance", p.step_imbalance);
    emit_number(out, "exposed_comm_share", p.exposed_comm_share);
    emit_number(out, "peak_memory_gib", p.peak_memory_gib);
    emit_per_layer(out, "attention_fwd_ms", p.attention_fwd_ms);
    emit_per_layer(out, "attention_bwd_ms", p.attention_bwd_ms);
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string_view to_string(CommPrimitive primitive) { return primitive == CommPrimitive::p2p ? "p2p" : "all_gather"; }

std::string_view to_string(LayoutShuffleMode mode) {
  return mode == LayoutShuffleMode::loader ? "loader" : "per_layer";
}

std::string_view to_string(RecomputeMode mode) {
  switch (mode) {
    case RecomputeMode::none: return "none";
    case RecomputeMode::selective: return "selective";
    case RecomputeMode::full: return "full";
  }
  return "unknown";
}

}  // namespace sparsering
