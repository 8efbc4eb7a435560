// Speed of the plan search (Google Benchmark; built, not run by ctest), on synthetic traces from
// the model's sparsity prior (synthesized before timing starts):
//   BM_Tune32:   Qwen2.5-3B, 512K tokens, the MTraining cluster (4 x 8 A100,
//                configs/clusters/mtraining-4x8-a100.yaml): the README example, exact search.
//   BM_Tune1024: Qwen2.5-3B, 4M tokens, 1024 H100 in racks (tests/tuner_search/data/clusters/
//                h100-128x8-ndr.yaml), with the work-set budget and gap given by the arguments.
//   BM_Tune4096: Qwen2.5-3B, 8M tokens, 4096 H100 in racks (h100-512x8-ndr.yaml), the same.
// Arguments: threads (and, for 1024 and 4096 GPUs, gap in 1/1000 and the work-set budget).
// Figures and the command that produced them: docs/PERF.md (tuner section) and docs/tuner.md.
#include <benchmark/benchmark.h>

#include <filesystem>

#include "sim/config/cluster_config.hpp"
#include "sim/config/model_config.hpp"
#include "traces/sparsity_prior.hpp"
#include "traces/synth/synthetic_trace.hpp"
#include "tuner/search/plan_search.hpp"

namespace sparsering {
namespace {

struct Inputs {
  ModelConfig model;
  ClusterConfig cluster;
  Trace trace;
  int64_t seq_len = 0;
};

Inputs make_inputs(const std::filesystem::path& cluster, int64_t seq_len) {
  const std::filesystem::path root(SPARSERING_SOURCE_DIR);
  Inputs in{load_model(root / "configs/models/qwen2.5-3b.yaml"), load_cluster(root / cluster), {}, seq_len};
  SynthSettings synth;
  synth.model = in.model.name;
  synth.layers = in.model.layers;
  synth.q_heads = in.model.q_heads;
  synth.kv_heads = in.model.kv_heads;
  synth.seq_len_tokens = seq_len;
  synth.seed = 1;
  synth.prior = load_sparsity_prior(root / "configs/sparsity/qwen2.5-3b.yaml");
  in.trace = synthesize_trace(synth);
  return in;
}

void run_search(benchmark::State& state, const Inputs& in, SearchOptions options) {
  PlanTemplate tmpl;
  tmpl.model = in.model.name;
  tmpl.cluster = in.cluster.name;
  for (auto _ : state) {
    const SearchResult r = search_plans(in.model, in.cluster, in.trace, in.seq_len, SearchSpaceOptions{}, tmpl, options);
    benchmark::DoNotOptimize(r.ranked.front().cost);
    state.counters["candidates"] = static_cast<double>(r.stats.candidates);
    state.counters["simulated"] = static_cast<double>(r.stats.simulated);
    state.counters["work_sets"] = static_cast<double>(r.stats.work_sets);
    state.counters["layers_counted"] = static_cast<double>(r.stats.layers_counted);
    state.counters["best_step_ms"] = r.ranked.front().figures.step_ms;
  }
}

void BM_Tune32(benchmark::State& state) {
  static const Inputs in = make_inputs("configs/clusters/mtraining-4x8-a100.yaml", int64_t{512} << 10);
  SearchOptions options;
  options.threads = static_cast<int>(state.range(0));
  run_search(state, in, options);
}

/// A large cluster: threads, gap (1/1000) and work-set budget from the arguments.
void run_budgeted(benchmark::State& state, const Inputs& in) {
  SearchOptions options;
  options.threads = static_cast<int>(state.range(0));
  options.gap = static_cast<double>(state.range(1)) / 1000.0;
  options.max_work_sets = state.range(2);
  run_search(state, in, options);
}

void BM_Tune1024(benchmark::State& state) {
  static const Inputs in = make_inputs("tests/tuner_search/data/clusters/h100-128x8-ndr.yaml", int64_t{4} << 20);
  run_budgeted(state, in);
}

void BM_Tune4096(benchmark::State& state) {
  static const Inputs in = make_inputs("tests/tuner_search/data/clusters/h100-512x8-ndr.yaml", int64_t{8} << 20);
  run_budgeted(state, in);
}

BENCHMARK(BM_Tune32)->Arg(2)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();
BENCHMARK(BM_Tune1024)->Args({2, 0, 0})->Args({2, 20, 4})->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();
BENCHMARK(BM_Tune4096)->Args({2, 0, 0})->Args({2, 20, 4})->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

}  // namespace
}  // namespace sparsering

BENCHMARK_MAIN();
