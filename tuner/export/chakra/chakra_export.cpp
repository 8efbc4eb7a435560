#include "tuner/export/chakra/chakra_export.hpp"

#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "common/error.hpp"
#include "core/ring_schedule.hpp"
#include "tuner/export/chakra/chakra_stream.hpp"
#include "tuner/export/common_losses.hpp"
#include "tuner/export/plan_export_checks.hpp"
#include "tuner/export/plan_groups.hpp"
#include "tuner/export/chakra/et_def.pb.h"

namespace sparsering {
namespace {

using ChakraProtoMsg::Node;
using ChakraProtoMsg::NodeType;

// GlobalMetadata.version: the Chakra release whose schema the files follow (mlcommons/chakra
// pyproject.toml and generator at commit 21585d8f2d65603d791d2121e3d4632351120262).
constexpr const char* kChakraSchemaVersion = "1.0.0";
constexpr int64_t kFp32Bytes = 4;
constexpr int64_t kHopKinds = 3;
constexpr int64_t kMaxTag = (int64_t{1} << 31) - 1;

enum class HopKind : int64_t { kv = 0, dkv = 1, dkv_return = 2 };

void add_attr(Node& node, const std::string& name, bool value) {
  auto* attr = node.add_attr();
  attr->set_name(name);
  attr->set_bool_val(value);
}

void add_attr_int32(Node& node, const std::string& name, int64_t value) {
  auto* attr = node.add_attr();
  attr->set_name(name);
  attr->set_int32_val(static_cast<int32_t>(value));
}

void add_attr_int64(Node& node, const std::string& name, int64_t value) {
  auto* attr = node.add_attr();
  attr->set_name(name);
  attr->set_int64_val(value);
}

void add_attr_string(Node& node, const std::string& name, const std::string& value) {
  auto* attr = node.add_attr();
  attr->set_name(name);
  attr->set_string_val(value);
}

// Nodes of one rank's trace; ids are indices.
class RankTrace {
 public:
  uint64_t add(NodeType type, std::string name, const std::vector<uint64_t>& deps) {
    const auto id = static_cast<uint64_t>(nodes_.size());
    Node& node = nodes_.emplace_back();
    node.set_id(id);
    node.set_name(std::move(name));
    node.set_type(type);
    for (const uint64_t dep : deps) {
      node.add_data_deps(dep);
      has_child_[static_cast<size_t>(dep)] = true;
    }
    has_child_.push_back(false);
    add_attr(node, "is_cpu_op", false);
    return id;
  }
  Node& node(uint64_t id) { return nodes_[static_cast<size_t>(id)]; }
  uint64_t size() const { return static_cast<uint64_t>(nodes_.size()); }
  /// Nodes added at or after `first` that no later node depends on.
  std::vector<uint64_t> sinks_since(uint64_t first) const {
    std::vector<uint64_t> sinks;
    for (uint64_t id = first; id < size(); ++id) {
      if (!has_child_[static_cast<size_t>(id)]) sinks.push_back(id);
    }
    return sinks;
  }
  std::string serialize(const ChakraProtoMsg::GlobalMetadata& metadata) const {
    std::ostringstream out;
    write_delimited(out, metadata);
    for (const Node& node : nodes_) write_delimited(out, node);
    return out.str();
  }

 private:
  std::vector<Node> nodes_;
  std::vector<bool> has_child_;
};

// What every rank's trace shares.
struct TraceContext {
  const PlanConfig& plan;
  RingSchedule schedule;
  std::vector<RankSlot> slots;
  int32_t inner = -1;                             // innermost level with more than one position
  std::vector<std::vector<int64_t>> level_pg;     // [level][global rank] -> process-group id (0 = none)
  std::vector<int64_t> ring_pg;                   // [global rank] -> its context-parallel ring's id
  int64_t kv_bytes = 0;
  int64_t dkv_bytes = 0;
};

struct Pass {
  int64_t layer = 0;
  bool backward = false;
  const std::vector<std::vector<int64_t>>* durations_ns = nullptr;
};

int64_t make_tag(const TraceContext& ctx, const Pass& pass, HopKind kind, int64_t level, int64_t sender_step) {
  const auto levels = static_cast<int64_t>(ctx.plan.ring_levels.size());
  return (((pass.layer * 2 + (pass.backward ? 1 : 0)) * kHopKinds + static_cast<int64_t>(kind)) * levels + level) *
             ctx.plan.context_parallel +
         sender_step;
}

std::string pass_prefix(const Pass& pass) { return str("L", pass.layer, pass.backward ? ".bwd." : ".fwd."); }

uint64_t add_comm(RankTrace& trace, const TraceContext& ctx, const Pass& pass, NodeType type, const std::string& what,
                  const std::vector<uint64_t>& deps, int64_t src, int64_t dst, int64_t bytes, HopKind kind,
                  int64_t level, int64_t sender_step, int64_t pg) {
  const uint64_t id = trace.add(type, pass_prefix(pass) + what, deps);
  Node& node = trace.node(id);
  add_attr_int32(node, "comm_src", src);
  add_attr_int32(node, "comm_dst", dst);
  add_attr_int64(node, "comm_size", bytes);
  add_attr_int32(node, "comm_tag", make_tag(ctx, pass, kind, level, sender_step));
  add_attr_string(node, "pg_name", std::to_string(pg));
  return id;
}

// Appends one ring pass (forward or backward of one layer) of `rank` to its trace.
void emit_pass(RankTrace& trace, const TraceContext& ctx, int64_t rank, const Pass& pass,
               const std::vector<uint64_t>& start_deps) {
  const PlanConfig& plan = ctx.plan;
  const RingSchedule& sched = ctx.schedule;
  const RankSlot me = ctx.slots[static_cast<size_t>(rank)];
  const auto p = static_cast<int32_t>(me.position);
  const auto steps = static_cast<int32_t>(plan.context_parallel);
  auto global = [&](int32_t position) { return plan.global_rank(me.ring, position); };
  const auto& row = (*pass.durations_ns)[static_cast<size_t>(rank)];

  std::vector<uint64_t> previous_sends;
  uint64_t previous_comp = 0;
  for (int32_t t = 0; t < steps; ++t) {
    std::optional<uint64_t> recv;
    if (t >= 1) {
      const int32_t level = sched.arrival_level(t);
      std::vector<uint64_t> deps{previous_comp};
      deps.insert(deps.end(), previous_sends.begin(), previous_sends.end());
      recv = add_comm(trace, ctx, pass, ChakraProtoMsg::COMM_RECV_NODE, str("kv_recv.s", t, ".lvl", level), deps,
                      global(sched.prev(p, level)), rank, ctx.kv_bytes, HopKind::kv, level, t - sched.stride(level),
                      ctx.level_pg[static_cast<size_t>(level)][static_cast<size_t>(rank)]);
    }
    std::vector<uint64_t> sends;
    for (int32_t level = sched.levels() - 1; level >= 0; --level) {
      if (!sched.sends_at(t, level)) continue;
      sends.push_back(add_comm(trace, ctx, pass, ChakraProtoMsg::COMM_SEND_NODE, str("kv_send.s", t, ".lvl", level),
                               recv ? std::vector<uint64_t>{*recv} : start_deps, rank, global(sched.next(p, level)),
                               ctx.kv_bytes, HopKind::kv, level, t,
                               ctx.level_pg[static_cast<size_t>(level)][static_cast<size_t>(rank)]));
    }
    const std::vector<uint64_t> comp_deps = recv ? std::vector<uint64_t>{*recv, previous_comp} : start_deps;
    const uint64_t comp = trace.add(ChakraProtoMsg::COMP_NODE, pass_prefix(pass) + str("attn.s", t), comp_deps);
    const int64_t ns = row[static_cast<size_t>(t)];
    trace.node(comp).set_duration_micros(static_cast<uint64_t>((ns + 500) / 1000));
    add_attr_int64(trace.node(comp), "duration_ns", ns);

    if (pass.backward && ctx.inner >= 0) {
      const int32_t inner = ctx.inner;
      const int32_t digit = sched.digit(t, inner);
      const int64_t pg = ctx.level_pg[static_cast<size_t>(inner)][static_cast<size_t>(rank)];
      std::optional<uint64_t> dkv_recv;
      if (digit >= 1) {
        std::vector<uint64_t> deps{comp};
        deps.insert(deps.end(), sends.begin(), sends.end());
        dkv_recv = add_comm(trace, ctx, pass, ChakraProtoMsg::COMM_RECV_NODE, str("dkv_recv.s", t), deps,
                            global(sched.prev(p, inner)), rank, ctx.dkv_bytes, HopKind::dkv, inner,
                            t - sched.stride(inner), pg);
      }
      std::vector<uint64_t> deps{comp};
      if (dkv_recv) deps.push_back(*dkv_recv);
      if (digit < sched.level_size(inner) - 1) {
        sends.push_back(add_comm(trace, ctx, pass, ChakraProtoMsg::COMM_SEND_NODE, str("dkv_send.s", t), deps, rank,
                                 global(sched.next(p, inner)), ctx.dkv_bytes, HopKind::dkv, inner, t, pg));
      } else if (const int32_t owner = sched.source(p, t); owner != p) {
        sends.push_back(add_comm(trace, ctx, pass, ChakraProtoMsg::COMM_SEND_NODE, str("dkv_return_send.s", t), deps,
                                 rank, global(owner), ctx.dkv_bytes, HopKind::dkv_return, 0, t,
                                 ctx.ring_pg[static_cast<size_t>(rank)]));
      }
    }
    previous_sends = std::move(sends);
    previous_comp = comp;
  }

  if (pass.backward && ctx.inner >= 0) {
    // The accumulators of this rank's own chunk come home once per inner cycle, from the position
    // that held it at the cycle's last inner step: q with digits p_l + t_l.
    const int32_t inner = ctx.inner;
    for (int32_t t = 0; t < steps; ++t) {
      if (sched.digit(t, inner) != sched.level_size(inner) - 1) continue;
      int32_t q = 0;
      for (int32_t l = 0; l < sched.levels(); ++l) {
        q += (sched.digit(p, l) + sched.digit(t, l)) % sched.level_size(l) * sched.stride(l);
      }
      if (q == p) continue;
      std::vector<uint64_t> deps{previous_comp};
      deps.insert(deps.end(), previous_sends.begin(), previous_sends.end());
      add_comm(trace, ctx, pass, ChakraProtoMsg::COMM_RECV_NODE, str("dkv_return_recv.s", t), deps, global(q), rank,
               ctx.dkv_bytes, HopKind::dkv_return, 0, t, ctx.ring_pg[static_cast<size_t>(rank)]);
    }
  }
}

void check_durations(const PlanConfig& plan, const std::vector<StepMatrix>& layers, const char* name) {
  for (size_t layer = 0; layer < layers.size(); ++layer) {
    const StepMatrix& matrix = layers[layer];
    require(static_cast<int64_t>(matrix.size()) == plan.world_size(), "chakra export: ", name, " durations of layer ",
            layer, " have ", matrix.size(), " rows but the plan has ", plan.world_size(), " ranks");
    for (size_t r = 0; r < matrix.size(); ++r) {
      require(static_cast<int64_t>(matrix[r].size()) == plan.context_parallel, "chakra export: ", name,
              " durations of layer ", layer, " rank ", r, " have ", matrix[r].size(), " steps but the ring has ",
              plan.context_parallel);
      for (size_t t = 0; t < matrix[r].size(); ++t) {
        require(matrix[r][t] >= 0, "chakra export: ", name, " duration of layer ", layer, " rank ", r, " step ", t,
                " is negative (", matrix[r][t], " ns)");
      }
    }
  }
}

}  // namespace

int64_t kv_hop_bytes(const PlanConfig& plan, const ModelConfig& model) {
  const int64_t kv_heads_per_rank =
      model.kv_heads % plan.head_parallel == 0 ? model.kv_heads / plan.head_parallel : int64_t{1};
  return 2 * (plan.seq_len_tokens / plan.context_parallel) * plan.micro_batch_sequences * kv_heads_per_rank *
         model.head_dim * model.bytes_per_param;
}

int64_t dkv_hop_bytes(const PlanConfig& plan, const ModelConfig& model) {
  return kv_hop_bytes(plan, model) / model.bytes_per_param * kFp32Bytes;
}

ExportBundle export_chakra(const ExportInput& input, const StepDurations& durations, int64_t layers) {
  check_export_input(input);
  const PlanConfig& plan = input.plan;
  const auto given = static_cast<int64_t>(durations.forward_ns.size());
  require(given >= 1, "chakra export: the durations hold no forward pass");
  if (layers == 0) layers = given;
  require(layers >= 1 && layers <= 4096, "chakra export: layers must be in [1, 4096] (or 0 = every layer of the ",
          "durations), got ", layers);
  require(given == 1 || layers <= given, "chakra export: ", layers, " layers asked but the durations hold ", given);
  check_durations(plan, durations.forward_ns, "forward");
  const bool backward = !durations.backward_ns.empty();
  if (backward) {
    require(durations.backward_ns.size() == durations.forward_ns.size(), "chakra export: the durations hold ", given,
            " forward and ", durations.backward_ns.size(), " backward layers");
    check_durations(plan, durations.backward_ns, "backward");
  }
  // One layer of durations is repeated for every layer; otherwise layer l uses its own figures.
  auto figures = [&](const std::vector<StepMatrix>& passes, int64_t layer) {
    return &passes[static_cast<size_t>(given == 1 ? 0 : layer)];
  };
  const auto levels = static_cast<int64_t>(plan.ring_levels.size());
  require(layers * 2 * kHopKinds * levels * plan.context_parallel <= kMaxTag, "chakra export: ", layers, " layers x ",
          plan.context_parallel, " ring steps need message tags beyond 31 bits; export fewer layers");

  ExportBundle bundle;
  bundle.target = "chakra";
  bundle.plan_name = plan_label(plan);
  std::vector<int64_t> sizes;
  for (const RingLevel& level : plan.ring_levels) sizes.push_back(level.size);
  TraceContext ctx{plan, RingSchedule(sizes), rank_slots(plan), -1, {}, {}, kv_hop_bytes(plan, input.model),
                   dkv_hop_bytes(plan, input.model)};
  for (const size_t l : effective_levels(plan)) {
    ctx.inner = static_cast<int32_t>(l);
    break;
  }

  // Process groups: 1 .. rings for the context-parallel rings, then the rings of each level.
  nlohmann::json groups = nlohmann::json::object();
  int64_t next_id = 1;
  ctx.ring_pg.assign(static_cast<size_t>(plan.world_size()), 0);
  for (const auto& group : ring_groups(plan)) {
    groups[std::to_string(next_id)] = group;
    for (const int64_t rank : group) ctx.ring_pg[static_cast<size_t>(rank)] = next_id;
    ++next_id;
  }
  std::string group_names = str("process groups (pg_name, chakra/comm_group.json): 1 .. ", next_id - 1,
                                " the context-parallel rings (dK/dV returns)");
  ctx.level_pg.assign(plan.ring_levels.size(), std::vector<int64_t>(static_cast<size_t>(plan.world_size()), 0));
  for (const size_t l : effective_levels(plan)) {
    const int64_t first = next_id;
    for (const auto& group : level_groups(plan, l)) {
      groups[std::to_string(next_id)] = group;
      for (const int64_t rank : group) ctx.level_pg[l][static_cast<size_t>(rank)] = next_id;
      ++next_id;
    }
    group_names += str("; ", first, " .. ", next_id - 1, " the rings of level ", l, " (",
                       to_string(plan.ring_levels[l].link), ")");
  }

  for (int64_t rank = 0; rank < plan.world_size(); ++rank) {
    RankTrace trace;
    std::vector<uint64_t> start;
    auto run = [&](const Pass& pass) {
      const uint64_t first = trace.size();
      emit_pass(trace, ctx, rank, pass, start);
      start = trace.sinks_since(first);
    };
    for (int64_t layer = 0; layer < layers; ++layer) run({layer, false, figures(durations.forward_ns, layer)});
    if (backward) {
      for (int64_t layer = layers - 1; layer >= 0; --layer) run({layer, true, figures(durations.backward_ns, layer)});
    }
    ChakraProtoMsg::GlobalMetadata metadata;
    metadata.set_version(kChakraSchemaVersion);
    auto* schema = metadata.add_attr();
    schema->set_name("schema");
    schema->set_string_val("sparsering ring attention");
    auto* plan_attr = metadata.add_attr();
    plan_attr->set_name("plan");
    plan_attr->set_string_val(bundle.plan_name);
    auto* rank_attr = metadata.add_attr();
    rank_attr->set_name("rank");
    rank_attr->set_int64_val(rank);
    bundle.add_file(str("chakra/trace.", rank, ".et"), trace.serialize(metadata));
  }
  bundle.add_file("chakra/comm_group.json", groups.dump(1) + "\n");

  bundle.notes.push_back(str("ASTRA-sim: --workload-configuration=<out>/chakra/trace (files trace.<rank>.et) ",
                             "--comm-group-configuration=<out>/chakra/comm_group.json; run in replay mode ",
                             "(roofline off): COMP nodes carry durations, not num_ops"));
  bundle.notes.push_back(group_names);
  bundle.notes.push_back(str("one trace per global rank: ", layers, " attention layer(s), forward",
                             backward ? " then backward" : " only (the durations have no backward pass)", "; K/V hop ",
                             ctx.kv_bytes, " bytes, dK/dV hop ", ctx.dkv_bytes, " bytes (fp32 accumulators)"));
  if (plan.sparse.enabled) {
    bundle.lost.push_back("sparsity: Chakra nodes cannot carry attention masks; each sparse ring step is one COMP "
                          "node per (rank, step) with its own duration");
  }
  bundle.lost.push_back("durations: Chakra's duration_micros holds whole microseconds, so step durations are rounded "
                        "to the nearest microsecond (the exact value is in each COMP node's attr duration_ns)");
  bundle.lost.push_back("double buffering: a Chakra node cannot wait on another rank, so a K/V send does not wait for "
                        "the receiver's free buffer; each rank posts the receive of step t after its compute of step "
                        "t-1");
  bundle.lost.push_back("rest of the layer: only the ring attention is traced; the layout all-to-alls, index "
                        "estimation, head-parallel all-to-alls, dense layer parts and gradient synchronisation are not");
  return bundle;
}

}  // namespace sparsering
