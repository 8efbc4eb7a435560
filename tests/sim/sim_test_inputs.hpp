// Small, fully specified inputs for the simulator tests: a 2-layer model, a calibrated GPU, a
// cluster of N nodes x G GPUs, plans, and a synthetic trace with deterministic candidates.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "core/kernel_build.hpp"
#include "sim/config/cluster_config.hpp"
#include "sim/config/model_config.hpp"
#include "sim/config/plan_config.hpp"
#include "traces/trace.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering::testing {

inline ModelConfig small_model() {
  return parse_model(R"(name: tiny
layers: 2
hidden_size: 256
ffn_hidden_size: 512
q_heads: 4
kv_heads: 2
head_dim: 64
vocab_size: 1000
)",
                     "<tiny>");
}

inline GpuConfig small_gpu() {
  GpuConfig gpu;
  gpu.name = "test-gpu";
  gpu.memory_gib = 80;
  gpu.peak_tflops_bf16 = 1000;
  gpu.memory_bandwidth_gbytes_per_s = 3000;
  GpuCalibration cal;
  cal.kernel_build = std::string(this_kernel_build());
  CalibratedShape shape;
  shape.shape = {64, 64, 64};
  shape.forward = {2.0, 0.0, 0.01, 0.02};
  shape.backward = {3.0, 0.0, 0.025, 0.05};
  cal.shapes = {shape};
  cal.gemm_efficiency = 0.5;
  gpu.calibration = cal;
  return gpu;
}

inline ClusterConfig small_cluster(int64_t nodes, int64_t gpus_per_node) {
  std::string text = str("name: test-cluster\nnodes: ", nodes, "\ngpus_per_node: ", gpus_per_node,
                         "\ngpu: test-gpu\nintra_node:\n  kind: nvlink\n  bandwidth_gbytes_per_s: 100\n  latency_us: 2\n");
  if (nodes > 1) {
    text += "inter_node:\n  kind: infiniband\n  nics_per_node: 1\n  bandwidth_gbytes_per_s: 10\n  latency_us: 5\n";
  }
  ClusterConfig cluster = parse_cluster(text, "<test-cluster>");
  cluster.gpu_config = small_gpu();
  return cluster;
}

/// A plan on the whole cluster, identity ring order.
inline PlanConfig small_plan(int64_t seq_len, int64_t cp, const std::string& layout, int64_t granularity, bool sparse,
                             const std::vector<std::pair<int64_t, std::string>>& levels, int64_t hp = 1, int64_t dp = 1) {
  std::string text = str("name: test-plan\nmodel: tiny\ncluster: test-cluster\nseq_len_tokens: ", seq_len,
                         "\ncontext_parallel: ", cp, "\nhead_parallel: ", hp, "\ndata_parallel: ", dp,
                         "\nring:\n  levels:\n");
  for (const auto& [size, link] : levels) text += str("    - {size: ", size, ", link: ", link, "}\n");
  text += str("layout:\n  kind: ", layout, "\n");
  if (layout == "striped") text += str("  granularity_tokens: ", granularity, "\n");
  text += str("sparse:\n  enabled: ", sparse ? "true" : "false", "\n  block_q: 64\n  block_k: 64\n  recall: 0.9\n");
  return parse_plan(text, "<test-plan>");
}

/// One sample; per head 16 vertical candidates (4 sinks, then random) and 32 slash candidates
/// (a local window of 16, then random), masses geometric and mass-descending, each kind summing
/// to 0.5.
inline Trace small_trace(int64_t layers, int64_t heads, int64_t seq_len, uint64_t seed) {
  Trace t;
  t.metadata.model = "tiny";
  t.samples = 1;
  t.layers = layers;
  t.heads = heads;
  t.vertical_candidates = 16;
  t.slash_candidates = 32;
  t.sample_seq_len = {seq_len};
  std::mt19937_64 rng(sparsering::testing_support::fixed_seed(seed));  // prints it; SPARSERING_TEST_SEED draws others
  std::uniform_int_distribution<int32_t> any(0, static_cast<int32_t>(seq_len - 1));
  const auto masses = [](int64_t count) {
    std::vector<float> m(static_cast<size_t>(count));
    double total = 0.0;
    for (int64_t k = 0; k < count; ++k) total += std::pow(0.8, static_cast<double>(k));
    for (int64_t k = 0; k < count; ++k) m[static_cast<size_t>(k)] = static_cast<float>(0.5 * std::pow(0.8, static_cast<double>(k)) / total);
    return m;
  };
  const std::vector<float> vm = masses(16);
  const std::vector<float> sm = masses(32);
  for (int64_t h = 0; h < layers * heads; ++h) {
    std::vector<int32_t> verticals = {0, 1, 2, 3};
    while (verticals.size() < 16) {
      const int32_t v = any(rng);
      if (std::find(verticals.begin(), verticals.end(), v) == verticals.end()) verticals.push_back(v);
    }
    std::vector<int32_t> slashes;
    for (int32_t d = 0; d < 16; ++d) slashes.push_back(d);
    while (slashes.size() < 32) {
      const int32_t d = any(rng);
      if (std::find(slashes.begin(), slashes.end(), d) == slashes.end()) slashes.push_back(d);
    }
    t.vertical_index.insert(t.vertical_index.end(), verticals.begin(), verticals.end());
    t.vertical_mass.insert(t.vertical_mass.end(), vm.begin(), vm.end());
    t.slash_offset.insert(t.slash_offset.end(), slashes.begin(), slashes.end());
    t.slash_mass.insert(t.slash_mass.end(), sm.begin(), sm.end());
  }
  validate_trace(t);
  return t;
}

}  // namespace sparsering::testing
