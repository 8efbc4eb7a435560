// Builds the validated layer's problem from a plan and a trace (see validation_problem.hpp).
// The head grouping and the recall settings follow the simulator's (sim/work/work_set.cpp,
// sim/step/simulation.cpp): head group g holds query heads g x H/U .. (g+1) x H/U - 1, every
// sequence of a micro batch has the same pattern, K/V heads are max(1, Hkv / U).
#include "measure/validation/validation_problem.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.hpp"
#include "traces/recall.hpp"

namespace sparsering {
namespace {

int32_t to_i32(int64_t value, const char* what) {
  require(value >= 0 && value <= std::numeric_limits<int32_t>::max(), what, " = ", value, " does not fit 32 bits");
  return static_cast<int32_t>(value);
}

}  // namespace

ValidationProblem make_validation_problem(const LoadedPlan& loaded, const Trace* trace, int64_t layer, int64_t sample) {
  const PlanConfig& plan = loaded.plan;
  const ModelConfig& model = loaded.model;
  require(layer >= 0 && layer < model.layers, "--layer ", layer, " does not exist: model '", model.name, "' has ",
          model.layers, " layers (0 .. ", model.layers - 1, ")");
  require(sample >= 0, "--sample must be >= 0, got ", sample);
  require(plan.head_parallel >= 1 && model.q_heads % plan.head_parallel == 0, "head_parallel ", plan.head_parallel,
          " does not divide the ", model.q_heads, " query heads");

  ValidationProblem problem;
  problem.plan_name = plan.name;
  problem.layer = layer;
  problem.sample = sample;
  problem.dense = !plan.sparse.enabled;
  problem.layout = plan.layout;
  for (const RingLevel& level : plan.ring_levels) problem.level_sizes.push_back(level.size);
  if (problem.level_sizes.empty()) problem.level_sizes.push_back(plan.context_parallel);
  problem.block_q = to_i32(plan.sparse.block_q, "sparse.block_q");
  problem.block_k = to_i32(plan.sparse.block_k, "sparse.block_k");

  const int64_t heads_per_group = model.q_heads / plan.head_parallel;
  const int64_t kv_local = std::max<int64_t>(1, model.kv_heads / plan.head_parallel);
  require(heads_per_group % kv_local == 0, "the ", heads_per_group, " query heads per head group are not a multiple of ",
          "their ", kv_local, " K/V heads");
  problem.shape.batch = to_i32(plan.micro_batch_sequences, "micro_batch_sequences");
  problem.shape.q_heads = to_i32(heads_per_group, "query heads per group");
  problem.shape.kv_heads = to_i32(kv_local, "K/V heads per group");
  problem.shape.head_dim = to_i32(model.head_dim, "head_dim");
  problem.shape.q_len = plan.layout.local_len();
  problem.shape.kv_len = plan.layout.local_len();
  problem.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(model.head_dim)));

  if (problem.dense) {
    problem.kept = KeptSet::dense(problem.row_count(), plan.seq_len_tokens);
    return problem;
  }
  require(trace != nullptr, "plan '", plan.name, "' is sparse (sparse.enabled: true) and needs a trace (--trace)");
  require(trace->layers == model.layers && trace->heads == model.q_heads, "the trace has ", trace->layers,
          " layers x ", trace->heads, " heads, model '", model.name, "' has ", model.layers, " x ", model.q_heads);
  require(sample < trace->samples, "--sample ", sample, " does not exist: the trace has ", trace->samples,
          " samples");
  const int64_t n = trace->sample_seq_len[static_cast<size_t>(sample)];
  require(n == plan.seq_len_tokens, "trace sample ", sample, " has ", n, " tokens, the plan's seq_len_tokens is ",
          plan.seq_len_tokens);
  RecallSettings settings;
  settings.recall = plan.sparse.recall;
  settings.max_verticals = plan.sparse.max_verticals;
  settings.max_slashes = plan.sparse.max_slashes;
  std::vector<KeptRow> heads;
  for (int64_t h = problem.head_group * heads_per_group; h < (problem.head_group + 1) * heads_per_group; ++h) {
    HeadSelection kept = select_head(*trace, sample, layer, h, settings);
    heads.push_back(KeptRow{std::move(kept.vertical_keys), std::move(kept.slash_offsets)});
  }
  std::vector<KeptRow> rows;
  for (int32_t b = 0; b < problem.shape.batch; ++b) rows.insert(rows.end(), heads.begin(), heads.end());
  problem.kept = KeptSet::normalized(plan.seq_len_tokens, std::move(rows));
  return problem;
}

std::string describe(const ValidationProblem& problem) {
  std::string levels;
  for (size_t i = 0; i < problem.level_sizes.size(); ++i) levels += str(i == 0 ? "" : "x", problem.level_sizes[i]);
  return str("W=", problem.ranks(), " ", to_string(problem.layout.kind()),
             problem.layout.kind() == LayoutKind::striped ? str(" G=", problem.layout.granularity_tokens()) : "",
             ", levels ", levels, ", ", problem.dense ? "dense" : "sparse", ", N=", problem.layout.seq_len_tokens(),
             ", ", problem.shape.batch * problem.shape.q_heads, " heads x ", problem.shape.q_len, " tokens per rank");
}

}  // namespace sparsering

namespace sparsering {

PlanConfig with_ring_size(const PlanConfig& plan, int64_t ranks) {
  require(ranks >= 1, "--ranks must be >= 1, got ", ranks);
  const int64_t world = plan.world_size();
  require(world % (ranks * plan.head_parallel) == 0, "--ranks ", ranks, " x head_parallel ", plan.head_parallel,
          " does not divide the plan's world of ", world, " GPUs");
  PlanConfig out = plan;
  out.context_parallel = ranks;
  out.data_parallel = world / (ranks * plan.head_parallel);
  const LinkKind outer = plan.ring_levels.empty() ? LinkKind::nvlink : plan.ring_levels.back().link;
  out.ring_levels.clear();
  if (plan.ring_levels.size() >= 2 && ranks % plan.ring_levels.front().size == 0 &&
      ranks > plan.ring_levels.front().size) {
    out.ring_levels.push_back(plan.ring_levels.front());
    out.ring_levels.push_back(RingLevel{ranks / plan.ring_levels.front().size, outer});
  } else {
    out.ring_levels.push_back(RingLevel{ranks, outer});
  }
  out.ring_order = identity_ring_order(world);
  out.layout = make_token_layout(plan.layout.kind(), plan.seq_len_tokens, static_cast<int32_t>(ranks),
                                 plan.layout.granularity_tokens());
  out.prediction.reset();
  out.name = str(plan.name, " (replayed at W=", ranks, ")");
  return out;
}

}  // namespace sparsering
