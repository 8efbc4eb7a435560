// Helpers for the exporter tests: small model, cluster and plan configs built from YAML text (so
// every test plan is what a user could write), an owner of the three that hands out ExportInput,
// and an InputError matcher.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "sim/config/cluster_config.hpp"
#include "sim/config/model_config.hpp"
#include "sim/config/plan_config.hpp"
#include "tuner/export/export_target.hpp"

namespace sparsering::test {

/// A model with 8 query heads, 4 KV heads, head_dim 64, bf16.
inline std::string tiny_model_yaml() {
  return "name: tiny\nlayers: 2\nhidden_size: 512\nffn_hidden_size: 1024\nq_heads: 8\nkv_heads: 4\n"
         "head_dim: 64\nvocab_size: 1000\n";
}

/// `nodes` x `gpus_per_node` GPUs: NVLink inside a node, InfiniBand between nodes.
inline std::string cluster_yaml(int64_t nodes, int64_t gpus_per_node) {
  std::string text = "name: test-cluster\nnodes: " + std::to_string(nodes) +
                     "\ngpus_per_node: " + std::to_string(gpus_per_node) +
                     "\ngpu: h100-sxm\nintra_node:\n  kind: nvlink\n  bandwidth_gbytes_per_s: 450\n  latency_us: 3\n";
  if (nodes > 1) {
    text += "inter_node:\n  kind: infiniband\n  nics_per_node: " + std::to_string(gpus_per_node) +
            "\n  bandwidth_gbytes_per_s: 50\n  latency_us: 10\n";
  }
  return text;
}

/// What a test plan varies.
struct PlanSpec {
  int64_t seq_len_tokens = 256;
  int64_t context_parallel = 4;
  int64_t head_parallel = 1;
  int64_t data_parallel = 1;
  std::vector<std::pair<int64_t, std::string>> levels{{4, "nvlink"}};  ///< inner -> outer
  std::vector<int64_t> order;                                           ///< empty = identity
  std::string layout = "striped";
  int64_t granularity_tokens = 16;
  bool sparse = true;
  int64_t block_q = 64;
  int64_t block_k = 64;
  std::string comm = "p2p";
  std::string recompute = "none";
  int64_t zero_stage = 0;
};

inline std::string plan_yaml(const PlanSpec& s) {
  std::string text = "name: test-plan\nmodel: tiny\ncluster: test-cluster\nseq_len_tokens: " +
                     std::to_string(s.seq_len_tokens) + "\ncontext_parallel: " + std::to_string(s.context_parallel) +
                     "\nhead_parallel: " + std::to_string(s.head_parallel) +
                     "\ndata_parallel: " + std::to_string(s.data_parallel) + "\nring:\n  levels:\n";
  for (const auto& [size, link] : s.levels) {
    text += "    - {size: " + std::to_string(size) + ", link: " + link + "}\n";
  }
  if (!s.order.empty()) {
    text += "  order: [";
    for (size_t i = 0; i < s.order.size(); ++i) text += (i ? ", " : "") + std::to_string(s.order[i]);
    text += "]\n";
  }
  text += "layout:\n  kind: " + s.layout + "\n";
  if (s.layout == "striped") text += "  granularity_tokens: " + std::to_string(s.granularity_tokens) + "\n";
  text += "sparse:\n  enabled: " + std::string(s.sparse ? "true" : "false") + "\n  block_q: " +
          std::to_string(s.block_q) + "\n  block_k: " + std::to_string(s.block_k) + "\n  last_q: 16\n";
  text += "comm: " + s.comm + "\nrecompute: " + s.recompute + "\nzero_stage: " + std::to_string(s.zero_stage) + "\n";
  return text;
}

/// A plan with its model and cluster, parsed from text.
struct TestPlan {
  PlanConfig plan;
  ModelConfig model;
  ClusterConfig cluster;

  TestPlan(const PlanSpec& spec, int64_t nodes, int64_t gpus_per_node)
      : plan(parse_plan(plan_yaml(spec), "test-plan.yaml")),
        model(parse_model(tiny_model_yaml(), "tiny.yaml")),
        cluster(parse_cluster(cluster_yaml(nodes, gpus_per_node), "test-cluster.yaml")) {}
  ExportInput input() const { return ExportInput{plan, model, cluster}; }
};

/// Runs `action` and expects an InputError whose message contains every piece of `pieces`.
inline void expect_input_error(const std::function<void()>& action, std::initializer_list<std::string> pieces) {
  try {
    action();
    ADD_FAILURE() << "expected InputError containing \"" << (pieces.size() > 0 ? *pieces.begin() : "") << "\"";
  } catch (const InputError& error) {
    const std::string message = error.what();
    for (const std::string& piece : pieces) {
      EXPECT_NE(message.find(piece), std::string::npos) << "message: " << message << "\nmissing: " << piece;
    }
  }
}

/// True if any of `lines` contains `piece`.
inline bool any_contains(const std::vector<std::string>& lines, const std::string& piece) {
  for (const std::string& line : lines) {
    if (line.find(piece) != std::string::npos) return true;
  }
  return false;
}

}  // namespace sparsering::test
