// Speed of the end-to-end simulator (Google Benchmark; built, not run by ctest) on the MTraining
// setup: Qwen2.5-3B at 512K tokens on 4 x 8 A100 (configs/plans/qwen2.5-3b-512k-mtraining-*),
// with a synthetic trace from the model's sparsity prior.
//   BM_SimulateCold:  fresh context: pattern selection, work counting, ring passes, step model.
//   BM_Resimulate:    warm context, another ring order or hierarchy split of the same layout and
//                     degree: work is reused, only the ring passes and step model run.
#include <benchmark/benchmark.h>

#include <filesystem>

#include "sim/config/plan_config.hpp"
#include "sim/step/simulation.hpp"
#include "traces/sparsity_prior.hpp"
#include "traces/synth/synthetic_trace.hpp"

namespace sparsering {
namespace {

struct Setup {
  LoadedPlan hier;
  LoadedPlan flat;
  Trace trace;
};

const Setup& setup() {
  static const Setup s = [] {
    const std::filesystem::path root(SPARSERING_SOURCE_DIR);
    Setup out{load_plan_with_inputs(root / "configs/plans/qwen2.5-3b-512k-mtraining-striped-hier.yaml"),
              load_plan_with_inputs(root / "configs/plans/qwen2.5-3b-512k-mtraining-striped-hier.yaml"), {}};
    out.flat.plan.ring_levels = {{32, LinkKind::infiniband}};
    SynthSettings synth;
    synth.model = out.hier.model.name;
    synth.layers = out.hier.model.layers;
    synth.q_heads = out.hier.model.q_heads;
    synth.kv_heads = out.hier.model.kv_heads;
    synth.seq_len_tokens = out.hier.plan.seq_len_tokens;
    synth.seed = 1;
    synth.prior = load_sparsity_prior(root / "configs/sparsity/qwen2.5-3b.yaml");
    out.trace = synthesize_trace(synth);
    return out;
  }();
  return s;
}

SimulationOptions bench_options() {
  SimulationOptions options;
  options.trace_key = "bench-qwen2.5-3b-512k";
  options.keep_ring_records = false;
  return options;
}

void BM_SimulateCold(benchmark::State& state) {
  const Setup& s = setup();
  for (auto _ : state) {
    SimulationContext context;
    const SimulationResult r = simulate(context, s.hier.plan, s.hier.model, s.hier.cluster, &s.trace, bench_options());
    benchmark::DoNotOptimize(r.step.step_ns);
  }
}

void BM_Resimulate(benchmark::State& state) {
  const Setup& s = setup();
  SimulationContext context;
  simulate(context, s.hier.plan, s.hier.model, s.hier.cluster, &s.trace, bench_options());
  bool flip = false;
  for (auto _ : state) {
    const LoadedPlan& p = flip ? s.hier : s.flat;  // alternate hierarchy splits: both hit the cache
    flip = !flip;
    const SimulationResult r = simulate(context, p.plan, p.model, p.cluster, &s.trace, bench_options());
    benchmark::DoNotOptimize(r.step.step_ns);
  }
  state.counters["cache_hits"] = static_cast<double>(context.work_cache_hits());
}

BENCHMARK(BM_SimulateCold)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Resimulate)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sparsering
