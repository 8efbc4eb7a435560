// Small, fully specified inputs for the plan-search tests: a tiny model, a calibrated or
// uncalibrated GPU, clusters of N nodes x G GPUs (optionally grouped into racks), and synthetic
// traces from traces/synth with a random sparsity prior.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "core/kernel_build.hpp"
#include "sim/config/cluster_config.hpp"
#include "sim/config/model_config.hpp"
#include "traces/synth/synthetic_trace.hpp"
#include "traces/trace.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering::testing {

/// A 2-layer model with 4 query heads and 2 KV heads (GQA 2) of 64 channels.
inline ModelConfig tiny_model(int64_t layers = 2, int64_t q_heads = 4, int64_t kv_heads = 2) {
  return parse_model(str("name: tiny\nlayers: ", layers, "\nhidden_size: ", 64 * q_heads,
                         "\nffn_hidden_size: 512\nq_heads: ", q_heads,
                         "\nkv_heads: ", kv_heads, "\nhead_dim: 64\nvocab_size: 1000\n"),
                     "<tiny>");
}

/// A GPU with `memory_gib` of memory; calibrated (block 64, head dim 64) unless `roofline`. With
/// `backward_units` the calibration charges what the shipped ones do: a forward per list, tile and
/// 64-column item and a backward in its kernel's units (key lists, column lists, 64-column items, columns and the key
/// blocks of the held chunk), in proportions like the shipped H100's.
inline GpuConfig test_gpu(double memory_gib, bool roofline = false, bool backward_units = false) {
  GpuConfig gpu;
  gpu.name = roofline ? "test-gpu-roofline" : "test-gpu";
  gpu.memory_gib = memory_gib;
  gpu.peak_tflops_bf16 = 400;
  gpu.memory_bandwidth_gbytes_per_s = 2000;
  if (!roofline) {
    GpuCalibration cal;
    cal.kernel_build = std::string(this_kernel_build());
    CalibratedShape shape;
    shape.shape = {64, 64, 64};
    shape.forward = {3.0, 0.0, 0.02, 0.03};
    shape.backward = {4.0, 0.0, 0.05, 0.07};
    if (backward_units) {
      shape.forward.per_list_us = 0.05;
      shape.forward.per_column_item_us = shape.forward.per_vertical_chunk_us;
      shape.forward.per_vertical_chunk_us = 0.0;
      shape.backward = KernelCostCoefficients{};
      shape.backward.launch_us = 4.0;
      shape.backward.per_tile_us = 0.05;
      shape.backward.per_key_list_us = 0.5;
      shape.backward.per_column_list_us = 0.07;
      shape.backward.per_column_item_us = 0.05;
      shape.backward.per_column_us = 0.0016;
      shape.backward.per_key_block_us = 0.1;
    }
    cal.shapes = {shape};
    cal.gemm_efficiency = 0.5;
    gpu.calibration = cal;
  }
  return gpu;
}

/// `nodes` x `gpus_per_node` GPUs: NVLink inside a node, one NIC per node between nodes, and with
/// `rack_nodes` > 0 racks of that many nodes over a slower outer level.
inline ClusterConfig test_cluster(int64_t nodes, int64_t gpus_per_node, double memory_gib, int64_t rack_nodes = 0,
                                  bool roofline = false, bool backward_units = false) {
  std::string text = str("name: test-cluster\nnodes: ", nodes, "\ngpus_per_node: ", gpus_per_node,
                         "\ngpu: test-gpu\nintra_node:\n  kind: nvlink\n  bandwidth_gbytes_per_s: 100\n  latency_us: 2\n");
  if (nodes > 1) {
    text += "inter_node:\n  kind: infiniband\n  nics_per_node: 1\n  bandwidth_gbytes_per_s: 4\n  latency_us: 5\n";
  }
  if (rack_nodes > 0) {
    text += str("outer_levels:\n  - name: rack\n    kind: ethernet\n    nodes_per_group: ", rack_nodes,
                "\n    nics_per_node: 1\n    bandwidth_gbytes_per_s: 1\n    latency_us: 20\n");
  }
  ClusterConfig cluster = parse_cluster(text, "<test-cluster>");
  cluster.gpu_config = test_gpu(memory_gib, roofline, backward_units);
  return cluster;
}

/// A synthetic trace for `model` at `seq_len` tokens: random per-head budgets (seeded), so that
/// heads differ in verticals and slashes; `vertical_scale` multiplies the vertical budgets; with
/// `samples` > 1 the samples differ as training steps do (traces/synth).
inline Trace tiny_trace(const ModelConfig& model, int64_t seq_len, uint64_t fixed, int64_t vertical_scale = 1,
                        int64_t samples = 1) {
  const uint64_t seed = sparsering::testing_support::fixed_seed(fixed);  // prints it; SPARSERING_TEST_SEED draws others
  std::mt19937_64 rng(seed);
  SparsityPrior prior;
  prior.name = "test";
  prior.model = model.name;
  prior.source = "random test budgets";
  prior.score_kind = "recall";
  prior.layers = model.layers;
  prior.q_heads = model.q_heads;
  std::uniform_int_distribution<int64_t> verticals(2, 24);
  std::uniform_int_distribution<int64_t> slashes(4, 64);
  for (int64_t k = 0; k < model.layers * model.q_heads; ++k) {
    prior.budgets.push_back(HeadBudget{verticals(rng) * vertical_scale, slashes(rng), 0.95});
  }
  SynthSettings s;
  s.model = model.name;
  s.layers = model.layers;
  s.q_heads = model.q_heads;
  s.kv_heads = model.kv_heads;
  s.seq_len_tokens = seq_len;
  s.seed = seed;
  s.vertical_slots = std::min<int64_t>(512, seq_len);
  s.slash_slots = std::min<int64_t>(512, seq_len);
  s.budget_reference_tokens = seq_len;
  s.samples = samples;
  s.threads = 1;
  s.prior = prior;
  return synthesize_trace(s);
}

/// Two samples of `model` (4 query heads) at `seq_len` tokens whose kept patterns (recall 1) are
/// exact by construction: a heavy head keeps one slash in every 64-token block diagonal (every
/// causal tile of 64-blocks), a light head only its diagonal. Sample 0: every head heavy; sample 1:
/// heads 0 and 1 heavy, 2 and 3 light. On 2 GPUs, splitting the heads (head parallel 2) balances
/// sample 0 but gives one GPU all the work of sample 1, while a context-parallel ring of 2
/// (contiguous: the later rank does 3/4 of a heavy head's tiles) is the better split for sample 1.
inline Trace crossing_trace(const ModelConfig& model, int64_t seq_len) {
  Trace t;
  t.metadata.model = model.name;
  t.samples = 2;
  t.layers = model.layers;
  t.heads = model.q_heads;
  t.vertical_candidates = 1;
  t.slash_candidates = seq_len / 64;
  t.sample_seq_len = {seq_len, seq_len};
  const auto ks = static_cast<size_t>(t.slash_candidates);
  for (int64_t sample = 0; sample < 2; ++sample) {
    for (int64_t l = 0; l < model.layers; ++l) {
      for (int64_t h = 0; h < model.q_heads; ++h) {
        const bool heavy = sample == 0 || h < 2;
        t.vertical_index.push_back(-1);
        t.vertical_mass.push_back(0.0f);
        for (size_t k = 0; k < ks; ++k) {
          const bool kept = heavy || k == 0;
          t.slash_offset.push_back(kept ? static_cast<int32_t>(64 * k) : -1);
          t.slash_mass.push_back(kept ? 0.5f / static_cast<float>(ks) : 0.0f);
        }
      }
    }
  }
  validate_trace(t);
  return t;
}

}  // namespace sparsering::testing
