// Plan configs: every shipped plan loads with its model and cluster and passes the cross-checks
// (the example plans are consistent with the shipped clusters); ring-position arithmetic matches a
// mixed-radix oracle; write_plan_yaml round-trips random plans; each validation rule fails with a
// message naming the key path and value.
#include "sim/config/plan_config.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "tests/config/config_test_util.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

using test::expect_input_error;

const std::filesystem::path kConfigs = std::filesystem::path(SPARSERING_SOURCE_DIR) / "configs";

const std::string kPlan = R"(model: qwen2.5-3b
cluster: mtraining-4x8-a100
seq_len_tokens: 524288
context_parallel: 8
head_parallel: 2
data_parallel: 2
ring:
  levels:
    - size: 4
      link: nvlink
    - size: 2
      link: nvlink
layout:
  kind: striped
  granularity_tokens: 64
sparse:
  block_q: 64
  recall: 0.9
  last_q: 64
)";

TEST(PlanConfig, ParsesWithDefaults) {
  const PlanConfig plan = parse_plan(kPlan, "p.yaml");
  EXPECT_EQ(plan.world_size(), 32);
  EXPECT_EQ(plan.ring_count(), 4);
  EXPECT_EQ(plan.ring_order, identity_ring_order(32));
  EXPECT_EQ(plan.layout.kind(), LayoutKind::striped);
  EXPECT_EQ(plan.layout.ranks(), 8);
  EXPECT_EQ(plan.layout.granularity_tokens(), 64);
  EXPECT_TRUE(plan.sparse.enabled);
  EXPECT_DOUBLE_EQ(plan.sparse.recall, 0.9);
  EXPECT_EQ(plan.sparse.max_verticals, 4096);
  EXPECT_EQ(plan.comm, CommPrimitive::p2p);
  EXPECT_EQ(plan.recompute, RecomputeMode::none);
  EXPECT_EQ(plan.zero_stage, 0);
  EXPECT_EQ(plan.micro_batch_sequences, 1);
  EXPECT_FALSE(plan.prediction.has_value());
  EXPECT_EQ(plan.ring_members(3), (std::vector<int64_t>{24, 25, 26, 27, 28, 29, 30, 31}));
}

TEST(PlanConfig, ShippedPlansAreConsistentWithTheirModelsAndClusters) {
  int plans = 0;
  std::vector<std::string> clusters_used;
  // Example plans, and the validation cases in plans/validation/.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(kConfigs / "plans")) {
    if (entry.path().extension() != ".yaml") continue;
    ++plans;
    SCOPED_TRACE(entry.path().string());
    const LoadedPlan loaded = load_plan_with_inputs(entry.path());
    EXPECT_EQ(loaded.plan.world_size(), loaded.cluster.world_size());
    // A plan names its model (configs/models/<name>.yaml) or gives the file's relative path.
    EXPECT_TRUE(loaded.plan.model == loaded.model.name ||
                std::filesystem::path(loaded.plan.model).stem() == loaded.model.name)
        << loaded.plan.model;
    clusters_used.push_back(loaded.cluster.name);
    // Re-emitting the plan and parsing it again gives the same plan.
    const std::string text = write_plan_yaml(loaded.plan);
    EXPECT_EQ(write_plan_yaml(parse_plan(text, "again.yaml")), text);
  }
  EXPECT_GE(plans, 4);
  for (const auto& entry : std::filesystem::directory_iterator(kConfigs / "clusters")) {
    const std::string name = entry.path().stem().string();
    EXPECT_NE(std::find(clusters_used.begin(), clusters_used.end(), name), clusters_used.end())
        << "no example plan for cluster " << name;
  }
  const LoadedPlan paper = load_plan_with_inputs(kConfigs / "plans" / "qwen2.5-3b-512k-mtraining-striped-hier.yaml");
  ASSERT_EQ(paper.plan.ring_levels.size(), 2U);
  EXPECT_EQ(paper.plan.ring_levels[0].size, 8);
  EXPECT_EQ(paper.plan.ring_levels[1].link, LinkKind::infiniband);
  EXPECT_EQ(paper.plan.layout.kind(), LayoutKind::striped);
  EXPECT_EQ(paper.plan.model_path, (kConfigs / "models" / "qwen2.5-3b.yaml").lexically_normal());
}

TEST(PlanConfig, RingPositionsFollowMixedRadixOrder) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  for (int trial = 0; trial < 100; ++trial) {
    std::string levels;
    std::vector<int64_t> sizes;
    int64_t cp = 1;
    const int count = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < count; ++i) {
      sizes.push_back(1 + static_cast<int64_t>(rng() % 4));
      cp *= sizes.back();
      levels += "    - {size: " + std::to_string(sizes.back()) + ", link: nvlink}\n";
    }
    const PlanConfig plan = parse_plan("model: m\ncluster: c\nseq_len_tokens: " + std::to_string(cp * 128) +
                                           "\ncontext_parallel: " + std::to_string(cp) + "\nring:\n  levels:\n" + levels +
                                           "layout: {kind: contiguous}\n",
                                       "radix.yaml");
    for (int64_t p = 0; p < cp; ++p) {
      // Oracle: digits of p in the mixed radix (inner digit first).
      std::vector<int64_t> digits;
      int64_t rest = p;
      for (const int64_t size : sizes) {
        digits.push_back(rest % size);
        rest /= size;
      }
      for (size_t l = 0; l < sizes.size(); ++l) {
        ASSERT_EQ(plan.level_index(p, l), digits[l]);
        std::vector<int64_t> next = digits;
        next[l] = (next[l] + 1) % sizes[l];
        int64_t expected = 0;
        for (size_t k = sizes.size(); k-- > 0;) expected = expected * sizes[k] + next[k];
        ASSERT_EQ(plan.next_position(p, l), expected) << "position " << p << " level " << l;
      }
    }
  }
}

PlanConfig random_plan(std::mt19937_64& rng) {
  PlanConfig plan;
  plan.name = (rng() % 2) ? "random plan #" + std::to_string(rng() % 100) : "";
  plan.model = (rng() % 2) ? "qwen2.5-3b" : "../models/custom model.yaml";
  plan.cluster = "cluster-" + std::to_string(rng() % 10);
  plan.trace = (rng() % 2) ? "traces/sample.safetensors" : "";
  plan.context_parallel = int64_t{1} << (rng() % 5);
  plan.head_parallel = 1 + static_cast<int64_t>(rng() % 3);
  plan.data_parallel = 1 + static_cast<int64_t>(rng() % 3);
  plan.seq_len_tokens = plan.context_parallel * 128 * (1 + static_cast<int64_t>(rng() % 64));
  plan.micro_batch_sequences = 1 + static_cast<int64_t>(rng() % 4);
  if (plan.context_parallel >= 4 && rng() % 2) {
    plan.ring_levels = {{2, LinkKind::nvlink}, {plan.context_parallel / 2, LinkKind::roce}};
  } else {
    plan.ring_levels = {{plan.context_parallel, LinkKind::pcie}};
  }
  plan.ring_order = identity_ring_order(plan.world_size());
  std::shuffle(plan.ring_order.begin(), plan.ring_order.end(), rng);
  const LayoutKind kinds[] = {LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped};
  plan.layout = make_token_layout(kinds[rng() % 3], plan.seq_len_tokens, static_cast<int32_t>(plan.context_parallel), 64);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  plan.sparse.enabled = rng() % 2;
  plan.sparse.block_q = int64_t{64} << (rng() % 4);  // the block sizes the kernels support
  plan.sparse.block_k = int64_t{64} << (rng() % 4);
  plan.sparse.recall = 1.0 - unit(rng) * 0.5;
  plan.sparse.max_verticals = 1 + static_cast<int64_t>(rng() % 10000);
  plan.sparse.max_slashes = 1 + static_cast<int64_t>(rng() % 10000);
  plan.sparse.last_q = 1 + static_cast<int64_t>(rng() % 128);
  plan.comm = (rng() % 2) ? CommPrimitive::p2p : CommPrimitive::all_gather;
  plan.recompute = static_cast<RecomputeMode>(rng() % 3);
  plan.zero_stage = static_cast<int64_t>(rng() % 4);
  if (rng() % 2) {
    PlanPrediction p;
    p.sparsering_version = "0.1.0";
    p.input_hashes = {{"model", "sha256:abc"}, {"trace", "sha256:0123"}};
    const size_t layers = rng() % 5;
    for (size_t i = 0; i < layers; ++i) {
      p.attention_fwd_ms.push_back(unit(rng) * 10);
      p.attention_bwd_ms.push_back(unit(rng) * 25);
    }
    p.step_ms = unit(rng) * 1000;
    p.tokens_per_s = unit(rng) * 1e6;
    p.worker_imbalance = 1.0 + unit(rng);
    p.step_imbalance = 1.0 + unit(rng);
    p.exposed_comm_share = unit(rng);
    p.peak_memory_gib = unit(rng) * 80;
    plan.prediction = p;
  }
  return plan;
}

TEST(PlanConfig, WriteRoundTripsRandomPlans) {
  std::mt19937_64 rng = sparsering::testing_support::test_rng();
  for (int i = 0; i < 100; ++i) {
    const PlanConfig plan = random_plan(rng);
    const std::string text = write_plan_yaml(plan);
    const PlanConfig back = parse_plan(text, "round-trip.yaml");
    SCOPED_TRACE(text);
    EXPECT_EQ(back.name, plan.name);
    EXPECT_EQ(back.model, plan.model);
    EXPECT_EQ(back.cluster, plan.cluster);
    EXPECT_EQ(back.trace, plan.trace);
    EXPECT_EQ(back.seq_len_tokens, plan.seq_len_tokens);
    EXPECT_EQ(back.micro_batch_sequences, plan.micro_batch_sequences);
    EXPECT_EQ(back.context_parallel, plan.context_parallel);
    EXPECT_EQ(back.head_parallel, plan.head_parallel);
    EXPECT_EQ(back.data_parallel, plan.data_parallel);
    ASSERT_EQ(back.ring_levels.size(), plan.ring_levels.size());
    for (size_t l = 0; l < plan.ring_levels.size(); ++l) {
      EXPECT_EQ(back.ring_levels[l].size, plan.ring_levels[l].size);
      EXPECT_EQ(back.ring_levels[l].link, plan.ring_levels[l].link);
    }
    EXPECT_EQ(back.ring_order, plan.ring_order);
    EXPECT_EQ(back.layout.kind(), plan.layout.kind());
    EXPECT_EQ(back.layout.seq_len_tokens(), plan.layout.seq_len_tokens());
    EXPECT_EQ(back.layout.ranks(), plan.layout.ranks());
    EXPECT_EQ(back.layout.granularity_tokens(), plan.layout.granularity_tokens());
    EXPECT_EQ(back.sparse.enabled, plan.sparse.enabled);
    EXPECT_EQ(back.sparse.block_q, plan.sparse.block_q);
    EXPECT_EQ(back.sparse.block_k, plan.sparse.block_k);
    EXPECT_EQ(back.sparse.recall, plan.sparse.recall);
    EXPECT_EQ(back.sparse.max_verticals, plan.sparse.max_verticals);
    EXPECT_EQ(back.sparse.max_slashes, plan.sparse.max_slashes);
    EXPECT_EQ(back.sparse.last_q, plan.sparse.last_q);
    EXPECT_EQ(back.comm, plan.comm);
    EXPECT_EQ(back.recompute, plan.recompute);
    EXPECT_EQ(back.zero_stage, plan.zero_stage);
    ASSERT_EQ(back.prediction.has_value(), plan.prediction.has_value());
    if (plan.prediction) {
      const PlanPrediction& a = *back.prediction;
      const PlanPrediction& b = *plan.prediction;
      EXPECT_EQ(a.sparsering_version, b.sparsering_version);
      EXPECT_EQ(a.input_hashes, b.input_hashes);
      EXPECT_EQ(a.attention_fwd_ms, b.attention_fwd_ms);
      EXPECT_EQ(a.attention_bwd_ms, b.attention_bwd_ms);
      EXPECT_EQ(a.step_ms, b.step_ms);
      EXPECT_EQ(a.tokens_per_s, b.tokens_per_s);
      EXPECT_EQ(a.worker_imbalance, b.worker_imbalance);
      EXPECT_EQ(a.step_imbalance, b.step_imbalance);
      EXPECT_EQ(a.exposed_comm_share, b.exposed_comm_share);
      EXPECT_EQ(a.peak_memory_gib, b.peak_memory_gib);
    }
    EXPECT_EQ(write_plan_yaml(back), text);
  }
}

TEST(PlanConfig, RejectsBadValuesNamingKeyPathAndValue) {
  const auto parse = [](const std::string& text) { parse_plan(text, "p.yaml"); };
  // A name with a terminal escape is refused at parse time (it would be printed and exported).
  expect_input_error([&] { parse("name: \"x\\e[31mred\"\n" + kPlan); }, {"p.yaml", "plan.name", "control character"});
  expect_input_error([&] { parse(test::with_value(kPlan, "seq_len_tokens", "-5")); },
                     {"p.yaml: plan.seq_len_tokens must be an integer in [1, 1099511627776], got -5"});
  expect_input_error([&] { parse(test::with_value(kPlan, "size", "3")); },
                     {"plan.ring.levels sizes multiply to 3 x 2 = 6, but plan.context_parallel is 8"});
  expect_input_error([&] { parse(test::with_value(kPlan, "context_parallel", "1048576") + "\n"); },
                     {"plan: context_parallel x head_parallel x data_parallel = 1048576 x 2 x 2", "more than"});
  expect_input_error([&] { parse(test::with_value(kPlan, "link", "nvswitch")); },
                     {"plan.ring.levels[0].link must be one of nvlink, pcie, infiniband, roce, ethernet; got \"nvswitch\""});
  // Ring order: a permutation of the world.
  std::string order = "  order: [";
  for (int i = 0; i < 32; ++i) order += std::to_string(i) + (i < 31 ? ", " : "]\n");
  const std::string with_order = [&] {
    std::string text = kPlan;
    text.insert(text.find("layout:"), order);
    return text;
  }();
  EXPECT_EQ(parse_plan(with_order, "p.yaml").ring_order, identity_ring_order(32));
  expect_input_error([&] { parse(test::with_value(with_order, "order", "[0, 1, 2]")); },
                     {"plan.ring.order has 3 ranks; it must list each of the context_parallel x head_parallel x "
                      "data_parallel = 8 x 2 x 2 = 32 ranks once"});
  std::string repeated = with_order;
  repeated.replace(repeated.find(" 5,"), 3, " 3,");
  expect_input_error([&] { parse(repeated); }, {"plan.ring.order[5] repeats rank 3 (also at [3])"});
  std::string outside = with_order;
  outside.replace(outside.find(" 5,"), 3, " 32,");
  expect_input_error([&] { parse(outside); }, {"plan.ring.order[5] must be an integer in [0, 31], got 32"});
  expect_input_error([&] { parse(test::with_value(with_order, "order", "all")); },
                     {"plan.ring.order must be a sequence of global ranks, got \"all\""});
  // Layout divisibility through make_token_layout.
  expect_input_error([&] { parse(test::with_value(kPlan, "seq_len_tokens", "1000")); },
                     {"plan.layout: striped layout needs the sequence length (1000) divisible by granularity x ring size"});
  std::string zigzag = test::without_key(kPlan, "granularity_tokens");
  zigzag = test::with_value(zigzag, "kind", "zigzag");
  expect_input_error([&] { parse(test::with_value(zigzag, "seq_len_tokens", "24")); },
                     {"plan.layout: zigzag layout needs the sequence length (24) divisible by 2 x ring size (16)"});
  expect_input_error([&] { parse(test::with_value(kPlan, "kind", "zigzag")); },
                     {"plan.layout.granularity_tokens applies to the striped layout only, not zigzag"});
  expect_input_error([&] { parse(test::without_key(kPlan, "granularity_tokens")); },
                     {"plan.layout.granularity_tokens is required"});
  expect_input_error([&] { parse(test::with_value(kPlan, "kind", "ring")); },
                     {"plan.layout.kind must be one of contiguous, zigzag, striped; got \"ring\""});
  // Sparse settings.
  expect_input_error([&] { parse(test::with_value(kPlan, "block_q", "96")); },
                     {"plan.sparse.block_q must be a power of two in [16, 512], got 96"});
  // Block sizes the CUDA kernels would refuse at launch are refused here, naming the supported ones.
  expect_input_error([&] { parse(test::with_value(kPlan, "block_q", "32")); },
                     {"p.yaml: plan.sparse.block_q must be a positive multiple of 64, got 32",
                      "supported block sizes: 64, 128, 256, 512"});
  expect_input_error([&] { parse(test::with_value(kPlan, "block_q", "16")); }, {"plan.sparse.block_q", "got 16"});
  expect_input_error([&] { parse(kPlan + "  block_k: 32\n"); },
                     {"plan.sparse.block_k must be a positive multiple of 64, got 32", "64, 128, 256, 512"});
  for (const char* block : {"64", "128", "256", "512"}) {
    EXPECT_EQ(parse_plan(test::with_value(kPlan, "block_q", block), "p.yaml").sparse.block_q, std::stoll(block));
  }
  expect_input_error([&] { parse(test::with_value(kPlan, "recall", "0")); }, {"plan.sparse.recall must be in (0, 1], got 0"});
  expect_input_error([&] { parse(test::with_value(kPlan, "recall", "1.01")); }, {"plan.sparse.recall", "got 1.01"});
  expect_input_error([&] { parse(test::with_value(test::with_value(kPlan, "seq_len_tokens", "1024"), "last_q", "2048")); },
                     {"plan.sparse.last_q"});
  expect_input_error([&] { parse(kPlan + "comm: allgather\n"); }, {"plan.comm must be one of p2p, all_gather; got \"allgather\""});
  expect_input_error([&] { parse(kPlan + "zero_stage: 4\n"); }, {"plan.zero_stage must be an integer in [0, 3], got 4"});
  expect_input_error([&] { parse(kPlan + "recompute: yes\n"); }, {"plan.recompute must be one of none, selective, full"});
  expect_input_error([&] { parse(kPlan + "contex_parallel: 4\n"); },
                     {"unknown key plan.contex_parallel (did you mean context_parallel?)"});
  expect_input_error([&] { parse(test::without_key(kPlan, "model")); }, {"plan.model is required"});
  expect_input_error([&] { parse(test::with_value(kPlan, "model", "bad name")); }, {"plan.model must be a name"});
  // Prediction.
  const std::string predicted = kPlan +
                                "prediction:\n  sparsering_version: \"0.1.0\"\n  step_ms: 10\n  tokens_per_s: 5\n"
                                "  attention_fwd_ms: [1, 2]\n  attention_bwd_ms: [3, 4]\n";
  EXPECT_EQ(parse_plan(predicted, "p.yaml").prediction->attention_bwd_ms, (std::vector<double>{3, 4}));
  expect_input_error([&] { parse(test::with_value(predicted, "attention_bwd_ms", "[3]")); },
                     {"plan.prediction.attention_bwd_ms has 1 layers but plan.prediction.attention_fwd_ms has 2"});
  expect_input_error([&] { parse(test::with_value(predicted, "attention_fwd_ms", "[1, -2]")); },
                     {"plan.prediction.attention_fwd_ms[1] must be >= 0, got -2"});
  expect_input_error([&] { parse(predicted + "  worker_imbalance: 0.5\n"); },
                     {"plan.prediction.worker_imbalance must be in [1, 1e+09], got 0.5"});
  expect_input_error([&] { parse(predicted + "  exposed_comm_share: 2\n"); }, {"plan.prediction.exposed_comm_share"});
  expect_input_error([&] { parse(test::without_key(predicted, "step_ms")); }, {"plan.prediction.step_ms is required"});
  expect_input_error([&] { parse(predicted + "  input_hashes: {model: [1]}\n"); },
                     {"plan.prediction.input_hashes.model must be a string, got a sequence"});
}

TEST(PlanConfig, CrossChecksAgainstModelAndCluster) {
  const ModelConfig model = load_model(kConfigs / "models" / "qwen2.5-3b.yaml");
  const ClusterConfig cluster = load_cluster(kConfigs / "clusters" / "mtraining-4x8-a100.yaml");
  const auto check = [&](const std::string& text) { check_plan_against(parse_plan(text, "p.yaml"), model, cluster); };
  check(kPlan);  // four 4 x 2 hierarchical rings, each inside one node of 8

  expect_input_error([&] { check(test::with_value(kPlan, "data_parallel", "1")); },
                     {"plan: context_parallel x head_parallel x data_parallel = 8 x 2 x 1 = 16 must equal the GPUs of "
                      "cluster mtraining-4x8-a100 (4 nodes x 8 = 32)"});
  ModelConfig odd_heads = model;
  odd_heads.q_heads = 12;
  odd_heads.kv_heads = 3;
  expect_input_error([&] { check_plan_against(parse_plan(kPlan, "p.yaml"), odd_heads, cluster); },
                     {"plan.head_parallel (2) must divide the KV heads of model qwen2.5-3b (3)"});
  odd_heads.q_heads = 9;
  expect_input_error([&] { check_plan_against(parse_plan(kPlan, "p.yaml"), odd_heads, cluster); },
                     {"plan.head_parallel (2) must divide the query heads of model qwen2.5-3b (9)"});
  // Declared links must be the slowest the hops cross.
  expect_input_error([&] { check(test::with_value(kPlan, "link", "infiniband")); },
                     {"plan.ring.levels[0].link is infiniband but the slowest link its hops cross is nvlink",
                      "level intra_node, e.g. rank 0 -> 1"});
  std::string flat = test::with_value(kPlan, "levels", "[{size: 8, link: nvlink}]");
  flat.erase(flat.find("    - size: 4"), flat.find("layout:") - flat.find("    - size: 4"));
  check(flat);  // 8 consecutive ranks stay inside one node
  std::string across = flat;
  std::string order = "  order: [";
  for (int r = 0; r < 4; ++r) {
    for (int p = 0; p < 8; ++p) order += std::to_string(p * 4 + r) + ((r == 3 && p == 7) ? "]\n" : ", ");
  }
  across.insert(across.find("layout:"), order);
  expect_input_error([&] { check(across); },
                     {"plan.ring.levels[0].link is nvlink but the slowest link its hops cross is infiniband",
                      "level inter_node, e.g. rank 4 -> 8"});
  expect_input_error([&] { check(test::with_value(kPlan, "cluster", "other-cluster")); },
                     {"plan.cluster names other-cluster but the cluster config is called mtraining-4x8-a100"});
  const std::string predicted = kPlan +
                                "prediction:\n  sparsering_version: \"0.1.0\"\n  step_ms: 10\n  tokens_per_s: 5\n"
                                "  attention_fwd_ms: [1, 2]\n  attention_bwd_ms: [3, 4]\n";
  expect_input_error([&] { check(predicted); },
                     {"plan.prediction.attention_fwd_ms has 2 entries but model qwen2.5-3b has 36 layers"});
}

TEST(PlanConfig, LoadResolvesReferencesAndNamesTheFileInCrossCheckErrors) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("sparsering-plan-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string text = test::with_value(test::with_value(kPlan, "model", (kConfigs / "models" / "qwen2.5-3b.yaml").string()),
                                            "cluster", (kConfigs / "clusters" / "h200-8x-nvlink.yaml").string()) +
                           "trace: t/sample.safetensors\n";
  std::ofstream(dir / "plan.yaml") << text;
  const PlanConfig plan = load_plan(dir / "plan.yaml");
  EXPECT_EQ(plan.cluster_path, (kConfigs / "clusters" / "h200-8x-nvlink.yaml").lexically_normal());
  EXPECT_EQ(plan.trace_path, dir / "t" / "sample.safetensors");
  expect_input_error([&] { load_plan_with_inputs(dir / "plan.yaml"); },
                     {(dir / "plan.yaml").string() + ": plan: context_parallel x head_parallel x data_parallel", "h200-8x-nvlink"});
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sparsering
