// How the simulator's cost grows with the problem (Google Benchmark; built, not run by ctest).
// Every iteration is a cold simulation in a fresh context (pattern selection, work counting,
// ring passes, step and memory model) on one thread; trace synthesis is set up outside the loop.
//   BM_ScaleTokens/<tokens>: Qwen2.5-3B, 32 GPUs of the MTraining cluster (4 x 8 A100), the
//       shipped striped hierarchical plan (8 x 4) at 128K .. 4M tokens.
//   BM_ScaleGpus/<gpus>: Qwen2.5-3B at 1M tokens on <gpus> A100 (nodes of 8, the MTraining
//       fabric) with a hierarchical striped ring of min(gpus, 128) (8 per node x the rest) and
//       data-parallel replicas for the other GPUs, as a 1M-token run would be laid out.
//   BM_ScaleRing/<ranks>: the same cluster shapes with one ring over every GPU (context
//       parallelism only), the worst case: the work matrices grow as ranks^2.
// The traces come from the model's sparsity prior (seed 1, 8192 candidate slots, as
// `sparsering trace synth` writes them). Results: docs/simulator.md, "Performance".
#include <benchmark/benchmark.h>

#include <filesystem>
#include <map>
#include <memory>

#include "common/error.hpp"
#include "sim/config/plan_config.hpp"
#include "sim/step/simulation.hpp"
#include "traces/sparsity_prior.hpp"
#include "traces/synth/synthetic_trace.hpp"

namespace sparsering {
namespace {

const std::filesystem::path& root() {
  static const std::filesystem::path path(SPARSERING_SOURCE_DIR);
  return path;
}

const LoadedPlan& mtraining_plan() {
  static const LoadedPlan loaded =
      load_plan_with_inputs(root() / "configs/plans/qwen2.5-3b-512k-mtraining-striped-hier.yaml");
  return loaded;
}

/// One trace per length, kept for the whole run (each is ~75 MB: the slots do not grow with N).
const Trace& trace_of(int64_t seq_len_tokens) {
  static std::map<int64_t, std::unique_ptr<Trace>> cache;
  std::unique_ptr<Trace>& slot = cache[seq_len_tokens];
  if (!slot) {
    const ModelConfig& model = mtraining_plan().model;
    SynthSettings synth;
    synth.model = model.name;
    synth.layers = model.layers;
    synth.q_heads = model.q_heads;
    synth.kv_heads = model.kv_heads;
    synth.seq_len_tokens = seq_len_tokens;
    synth.seed = 1;
    synth.prior = load_sparsity_prior(sparsity_prior_path(model));
    slot = std::make_unique<Trace>(synthesize_trace(synth));
  }
  return *slot;
}

/// `nodes` x 8 A100 with the MTraining cluster's fabric.
ClusterConfig a100_cluster(int64_t nodes) {
  ClusterConfig cluster = parse_cluster(
      str("name: a100-", nodes, "x8\nnodes: ", nodes, "\ngpus_per_node: 8\ngpu: a100-40gb\n",
          "intra_node: {kind: nvlink, bandwidth_gbytes_per_s: 300, latency_us: 3.4}\n",
          nodes > 1 ? "inter_node: {kind: infiniband, nics_per_node: 8, bandwidth_gbytes_per_s: 25, latency_us: 9.6}\n" : ""),
      "<bench cluster>");
  cluster.gpu_config = mtraining_plan().cluster.gpu_config;
  return cluster;
}

/// The MTraining plan reshaped: `ring` positions (8 per node, then the nodes) x `replicas`.
PlanConfig reshaped_plan(const ClusterConfig& cluster, int64_t seq_len_tokens, int64_t ring, int64_t replicas) {
  PlanConfig plan = mtraining_plan().plan;
  plan.name = str("qwen2.5-3b-", seq_len_tokens, "-cp", ring, "-dp", replicas);
  plan.cluster = cluster.name;
  plan.seq_len_tokens = seq_len_tokens;
  plan.context_parallel = ring;
  plan.head_parallel = 1;
  plan.data_parallel = replicas;
  plan.ring_levels = ring > 8 ? std::vector<RingLevel>{{8, LinkKind::nvlink}, {ring / 8, LinkKind::infiniband}}
                              : std::vector<RingLevel>{{ring, LinkKind::nvlink}};
  plan.ring_order = identity_ring_order(plan.world_size());
  plan.layout = make_token_layout(LayoutKind::striped, seq_len_tokens, static_cast<int32_t>(ring), 64);
  plan.prediction.reset();
  return plan;
}

SimulationOptions options() {
  SimulationOptions o;
  o.keep_ring_records = false;
  o.threads = 1;
  return o;
}

void run_cold(benchmark::State& state, const PlanConfig& plan, const ClusterConfig& cluster) {
  const Trace& trace = trace_of(plan.seq_len_tokens);
  const ModelConfig& model = mtraining_plan().model;
  SimNs step = 0;
  for (auto _ : state) {
    SimulationContext context;
    const SimulationResult r = simulate(context, plan, model, cluster, &trace, options());
    step = r.step.step_ns;
    benchmark::DoNotOptimize(step);
  }
  state.counters["gpus"] = static_cast<double>(plan.world_size());
  state.counters["ring"] = static_cast<double>(plan.context_parallel);
  state.counters["step_ms"] = ns_to_ms(step);
}

void BM_ScaleTokens(benchmark::State& state) {
  const LoadedPlan& base = mtraining_plan();
  PlanConfig plan = base.plan;
  plan.seq_len_tokens = state.range(0);
  plan.layout = make_token_layout(LayoutKind::striped, plan.seq_len_tokens, static_cast<int32_t>(plan.context_parallel),
                                  plan.layout.granularity_tokens());
  plan.prediction.reset();
  run_cold(state, plan, base.cluster);
}

void BM_ScaleGpus(benchmark::State& state) {
  const int64_t gpus = state.range(0);
  const ClusterConfig cluster = a100_cluster(gpus / 8);
  const int64_t ring = std::min<int64_t>(gpus, 128);
  run_cold(state, reshaped_plan(cluster, int64_t{1} << 20, ring, gpus / ring), cluster);
}

void BM_ScaleRing(benchmark::State& state) {
  const int64_t gpus = state.range(0);
  const ClusterConfig cluster = a100_cluster(gpus / 8);
  run_cold(state, reshaped_plan(cluster, int64_t{1} << 20, gpus, 1), cluster);
}

BENCHMARK(BM_ScaleTokens)
    ->ArgName("tokens")
    ->Arg(int64_t{1} << 17)
    ->Arg(int64_t{1} << 18)
    ->Arg(int64_t{1} << 19)
    ->Arg(int64_t{1} << 20)
    ->Arg(int64_t{1} << 21)
    ->Arg(int64_t{1} << 22)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ScaleGpus)->ArgName("gpus")->Arg(8)->Arg(32)->Arg(128)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ScaleRing)->ArgName("ranks")->Arg(8)->Arg(32)->Arg(128)->Arg(256)->Arg(512)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sparsering
