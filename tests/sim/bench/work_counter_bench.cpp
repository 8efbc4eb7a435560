// Speed of the analytic work counter (Google Benchmark; built, not run by ctest): all layers of a
// Qwen2.5-3B-like pattern set at 512K tokens on 32 ranks, per layout.
#include <benchmark/benchmark.h>

#include "sim/work/work_counter.hpp"
#include "tests/sim/bench/qwen_patterns.hpp"

namespace sparsering {
namespace {

void BM_WorkAllLayers(benchmark::State& state) {
  const auto kind = static_cast<LayoutKind>(state.range(0));
  const int64_t n = int64_t{1} << 19;
  const int32_t w = 32;
  const int64_t block_q = state.range(1);
  const int64_t block_k = 64;
  const int64_t g = kind == LayoutKind::striped ? state.range(2) : 0;
  const auto patterns = bench::qwen25_3b_like_patterns(n, 36, 16, 7);
  const BlockGeometry geo = make_block_geometry(make_token_layout(kind, n, w, g), block_q, block_k);
  WorkCounter counter(geo);
  WorkMatrix sum(w);
  for (auto _ : state) {
    sum.clear();
    for (const KeptPattern& p : patterns) counter.accumulate_head(p, sum);
    benchmark::DoNotOptimize(sum);
  }
  state.counters["heads"] = static_cast<double>(patterns.size());
  state.counters["tiles"] = static_cast<double>(sum.total().tiles);
}

BENCHMARK(BM_WorkAllLayers)
    ->ArgNames({"layout", "block_q", "stripe"})
    ->Args({static_cast<int64_t>(LayoutKind::striped), 64, 64})
    ->Args({static_cast<int64_t>(LayoutKind::striped), 128, 128})
    ->Args({static_cast<int64_t>(LayoutKind::striped), 64, 16})
    ->Args({static_cast<int64_t>(LayoutKind::striped), 64, 1})
    ->Args({static_cast<int64_t>(LayoutKind::zigzag), 64, 0})
    ->Args({static_cast<int64_t>(LayoutKind::contiguous), 64, 0})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sparsering

BENCHMARK_MAIN();
