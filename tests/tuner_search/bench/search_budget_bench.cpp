// The per-unit costs behind the search estimate (tuner/search/search_budget.hpp), measured on
// Qwen2.5-3B at 32K tokens over clusters of N nodes x 8 H200 in racks of 4 nodes (Google
// Benchmark; built, not run by ctest):
//   BM_Enumerate/N:  enumerate_search_space; ns_per_unit = time / (order ranks + tier-scan ranks)
//                    as step 1 of the estimate counts them (kTierScanSecondsPerRank);
//   BM_StepBound/N:  the StepLowerBound constructor; ns_per_unit = time / the collective ranks of
//                    the enumerated space (kCollectiveSecondsPerRankPosition);
//   BM_Bounds/N:     the memory and coarse step bound of every candidate; ns_per_unit = time per
//                    candidate (kBoundSecondsPerCandidate).
// Rates are per CPU second of the benchmark's thread (the shared machine's wall time varies with
// its load). The estimate uses about a quarter of the measured figures; they are recorded with
// machine, commit and command in docs/PERF.md.
#include <benchmark/benchmark.h>

#include <filesystem>

#include "sim/config/cluster_config.hpp"
#include "sim/config/gpu_config.hpp"
#include "sim/config/model_config.hpp"
#include "sim/work/kept_pattern.hpp"
#include "sim/work/pattern_set.hpp"
#include "traces/sparsity_prior.hpp"
#include "traces/synth/synthetic_trace.hpp"
#include "tuner/search/search_budget.hpp"
#include "tuner/search/step_lower_bound.hpp"

namespace sparsering {
namespace {

constexpr int64_t kSeqLen = 32768;

const std::filesystem::path& root() {
  static const std::filesystem::path path(SPARSERING_SOURCE_DIR);
  return path;
}

const ModelConfig& model() {
  static const ModelConfig m = load_model(root() / "configs/models/qwen2.5-3b.yaml");
  return m;
}

ClusterConfig cluster(int64_t nodes) {
  ClusterConfig c = parse_cluster(
      str("name: bench\nnodes: ", nodes, "\ngpus_per_node: 8\ngpu: h200\n",
          "intra_node: {kind: nvlink, bandwidth_gbytes_per_s: 450, latency_us: 3.4}\n",
          "inter_node: {kind: infiniband, nics_per_node: 8, bandwidth_gbytes_per_s: 50, latency_us: 5}\n",
          "outer_levels:\n  - {name: rack, kind: ethernet, nics_per_node: 8, bandwidth_gbytes_per_s: 25, ",
          "latency_us: 10, nodes_per_group: 4}\n"),
      "<bench>");
  c.gpu_config = load_gpu(root() / "configs/gpus/h200.yaml");
  return c;
}

const PatternSet& patterns() {
  static const PatternSet set = [] {
    SynthSettings synth;
    synth.model = model().name;
    synth.layers = model().layers;
    synth.q_heads = model().q_heads;
    synth.kv_heads = model().kv_heads;
    synth.seq_len_tokens = kSeqLen;
    synth.seed = 1;
    synth.prior = load_sparsity_prior(root() / "configs/sparsity/qwen2.5-3b.yaml");
    PatternSet s = select_patterns(synthesize_trace(synth), 0, RecallSettings{});
    for (KeptPattern& p : s.patterns) p = normalize_pattern(p, kSeqLen);
    return s;
  }();
  return set;
}

void BM_Enumerate(benchmark::State& state) {
  const ClusterConfig c = cluster(state.range(0));
  const SearchEstimate before = estimate_search_before_enumeration(model(), c, kSeqLen, 0.0);
  for (auto _ : state) {
    const SearchSpace space = enumerate_search_space(model(), c, kSeqLen, SearchSpaceOptions{});
    benchmark::DoNotOptimize(space.candidates.size());
  }
  state.counters["ns_per_unit"] = benchmark::Counter((before.order_ranks + before.tier_scan_ranks) * 1e-9,
                                                     benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
}

void BM_StepBound(benchmark::State& state) {
  const ClusterConfig c = cluster(state.range(0));
  const SearchSpace space = enumerate_search_space(model(), c, kSeqLen, SearchSpaceOptions{});
  const SearchEstimate e = estimate_search(model(), space, PlanTemplate{}, SearchOptions{}, 0.0, 0.0);
  (void)patterns();  // synthesized before timing starts
  for (auto _ : state) {
    const StepLowerBound bound(model(), c, space, patterns(), PlanTemplate{}, SimulationOptions{});
    benchmark::DoNotOptimize(&bound);
  }
  state.counters["ns_per_unit"] = benchmark::Counter(e.collective_ranks * 1e-9, benchmark::Counter::kIsIterationInvariantRate |
                                                                                    benchmark::Counter::kInvert);
}

void BM_Bounds(benchmark::State& state) {
  const ClusterConfig c = cluster(state.range(0));
  const SearchSpace space = enumerate_search_space(model(), c, kSeqLen, SearchSpaceOptions{});
  const StepLowerBound bound(model(), c, space, patterns(), PlanTemplate{}, SimulationOptions{});
  for (auto _ : state) {
    double sum = 0.0;
    for (const Candidate& candidate : space.candidates) {
      sum += static_cast<double>(bound.memory_bytes(candidate)) + static_cast<double>(bound.step_ns(candidate));
    }
    benchmark::DoNotOptimize(sum);
  }
  state.counters["ns_per_unit"] =
      benchmark::Counter(static_cast<double>(space.candidates.size()) * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

BENCHMARK(BM_Enumerate)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_StepBound)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_Bounds)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace sparsering

BENCHMARK_MAIN();
