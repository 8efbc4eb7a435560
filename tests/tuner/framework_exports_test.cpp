// Golden-style checks of the Megatron, TransformerEngine, torchtitan and MTraining exports on
// small plans: exact argument lists and files, rank lists derived by hand, and the lossy cases
// (what is lost is reported, the closest equivalent is written).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "export_test_util.hpp"
#include "tuner/export/megatron_export.hpp"
#include "tuner/export/mtraining_export.hpp"
#include "tuner/export/npy_file.hpp"
#include "tuner/export/te_export.hpp"
#include "tuner/export/torchtitan_export.hpp"

namespace sparsering {
namespace {

// The arguments inside SPARSERING_MEGATRON_ARGS=( ... ), one per line.
std::vector<std::string> megatron_args(const ExportBundle& bundle) {
  const ExportFile* file = bundle.find("megatron_args.sh");
  EXPECT_NE(file, nullptr);
  if (file == nullptr) return {};
  std::istringstream in(file->bytes);
  std::vector<std::string> args;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line == "SPARSERING_MEGATRON_ARGS=(") {
      inside = true;
    } else if (line == ")") {
      inside = false;
    } else if (inside) {
      args.push_back(line.substr(2));
    }
  }
  return args;
}

test::PlanSpec dense_zigzag(int64_t context_parallel) {
  test::PlanSpec spec;
  spec.context_parallel = context_parallel;
  spec.levels = {{context_parallel, "nvlink"}};
  spec.layout = "zigzag";
  spec.sparse = false;
  return spec;
}

TEST(MegatronExport, ExactPlanGivesGoldenFile) {
  const test::TestPlan t(dense_zigzag(4), 1, 4);
  const ExportBundle bundle = export_megatron(t.input());
  EXPECT_TRUE(bundle.exact()) << bundle.lost.front();
  EXPECT_EQ(bundle.find("megatron_args.sh")->bytes,
            "# Megatron-LM arguments for plan test-plan, written by `sparsering export --to megatron`.\n"
            "# Launch 4 processes: tensor 1 x context 4 x data 1 x pipeline 1. Megatron orders ranks tp-cp-ep-dp-pp "
            "(tensor index fastest), so\n"
            "# rank = context-parallel rank + 4 x data-parallel rank.\n"
            "# Usage: source megatron_args.sh; torchrun ... pretrain_gpt.py \"${SPARSERING_MEGATRON_ARGS[@]}\" ...\n"
            "# What Megatron cannot express of the plan, and the data layout: NOTES.md.\n"
            "SPARSERING_MEGATRON_ARGS=(\n"
            "  --tensor-model-parallel-size 1\n"
            "  --pipeline-model-parallel-size 1\n"
            "  --context-parallel-size 4\n"
            "  --cp-comm-type p2p\n"
            "  --seq-length 256\n"
            "  --micro-batch-size 1\n"
            ")\n");
  EXPECT_EQ(bundle.find("rank_map.json"), nullptr);
  // Megatron's zigzag loader: CP rank 1 of 4 gets chunks 1 and 6 of 8 (32 tokens each).
  const Int64Matrix perm = read_npy_int64(bundle.find("token_permutation.npy")->bytes);
  ASSERT_EQ(perm.rows, 4);
  ASSERT_EQ(perm.cols, 64);
  EXPECT_EQ(perm.values[64], 32);
  EXPECT_EQ(perm.values[64 + 32], 192);
}

TEST(MegatronExport, HeadParallelHierarchicalStripedPlan) {
  // 2 heads x ring of 4 (2 nvlink x 2 infiniband) on 2 nodes x 4; ring h position p on rank
  // 2p + h, which is Megatron's own numbering.
  test::PlanSpec spec;
  spec.head_parallel = 2;
  spec.levels = {{2, "nvlink"}, {2, "infiniband"}};
  spec.order = {0, 2, 4, 6, 1, 3, 5, 7};
  spec.recompute = "selective";
  spec.zero_stage = 1;
  const test::TestPlan t(spec, 2, 4);
  const ExportBundle bundle = export_megatron(t.input());
  EXPECT_EQ(megatron_args(bundle),
            (std::vector<std::string>{"--tensor-model-parallel-size 1", "--pipeline-model-parallel-size 1",
                                      "--context-parallel-size 8", "--cp-comm-type a2a+p2p",
                                      "--hierarchical-context-parallel-sizes 2 4", "--seq-length 256",
                                      "--micro-batch-size 1", "--recompute-granularity selective",
                                      "--use-distributed-optimizer"}));
  ASSERT_EQ(bundle.lost.size(), 3u);
  EXPECT_TRUE(test::any_contains(bundle.lost, "dynamic sparse attention"));
  EXPECT_TRUE(test::any_contains(bundle.lost, "striped (granularity 16 tokens) layout cannot be selected"));
  EXPECT_TRUE(test::any_contains(bundle.lost, "becomes one flat ring of 4"));
  EXPECT_EQ(bundle.find("rank_map.json"), nullptr);
}

TEST(MegatronExport, ReportsAnotherRingOrderAndWritesTheRankMap) {
  test::PlanSpec spec = dense_zigzag(4);
  spec.order = {0, 2, 1, 3};
  spec.zero_stage = 3;
  const test::TestPlan t(spec, 1, 4);
  const ExportBundle bundle = export_megatron(t.input());
  EXPECT_TRUE(test::any_contains(bundle.lost, "ring order: Megatron assigns ring positions"));
  EXPECT_TRUE(test::any_contains(bundle.lost, "ZeRO stage 3"));
  ASSERT_NE(bundle.find("rank_map.json"), nullptr);
  const auto map = nlohmann::json::parse(bundle.find("rank_map.json")->bytes);
  EXPECT_EQ(map["plan_gpu_of_rank"], (std::vector<int64_t>{0, 2, 1, 3}));
}

TEST(MegatronExport, RefusesASequenceItsLoaderCannotSplit) {
  test::PlanSpec spec;
  spec.seq_len_tokens = 17;
  spec.context_parallel = 1;
  spec.levels = {{1, "nvlink"}};
  spec.granularity_tokens = 17;
  const test::TestPlan t(spec, 1, 1);
  test::expect_input_error([&] { export_megatron(t.input()); }, {"2 x context-parallel size = 2", "17"});
}

TEST(TeExport, HierarchicalGroupsWithTheA2aIndexFastest) {
  test::PlanSpec spec = dense_zigzag(2);
  spec.head_parallel = 2;
  spec.order = {0, 2, 1, 3};  // ring h position p on rank 2p + h
  const test::TestPlan t(spec, 1, 4);
  const ExportBundle bundle = export_te(t.input());
  EXPECT_TRUE(bundle.exact()) << bundle.lost.front();
  const auto doc = nlohmann::json::parse(bundle.find("te_cp_groups.json")->bytes);
  EXPECT_EQ(doc["cp_comm_type"], "a2a+p2p");
  ASSERT_EQ(doc["groups"].size(), 1u);
  EXPECT_EQ(doc["groups"][0]["cp_global_ranks"], (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(doc["groups"][0]["a2a_groups"], (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(doc["groups"][0]["p2p_groups"], (std::vector<std::vector<int64_t>>{{0, 2}, {1, 3}}));
  ASSERT_NE(bundle.find("te_cp_setup.py"), nullptr);
  EXPECT_NE(bundle.find("te_cp_setup.py")->bytes.find("set_context_parallel_group"), std::string::npos);
}

TEST(TeExport, KeepsAscendingRingsThatMegatronWouldRenumber) {
  // Two replicas whose rings are swapped: TE takes any ascending ring; Megatron numbers replica d
  // on ranks 4d .. 4d+3.
  test::PlanSpec spec = dense_zigzag(4);
  spec.data_parallel = 2;
  spec.order = {4, 5, 6, 7, 0, 1, 2, 3};
  const test::TestPlan t(spec, 1, 8);
  const ExportBundle te = export_te(t.input());
  EXPECT_TRUE(te.exact());
  const auto doc = nlohmann::json::parse(te.find("te_cp_groups.json")->bytes);
  EXPECT_EQ(doc["groups"][0]["cp_global_ranks"], (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(doc["groups"][1]["cp_global_ranks"], (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_FALSE(export_megatron(t.input()).exact());
}

TEST(TeExport, SortsARingThatDoesNotAscend) {
  test::PlanSpec spec = dense_zigzag(4);
  spec.order = {0, 2, 1, 3};
  const test::TestPlan t(spec, 1, 4);
  const ExportBundle bundle = export_te(t.input());
  const auto doc = nlohmann::json::parse(bundle.find("te_cp_groups.json")->bytes);
  EXPECT_EQ(doc["groups"][0]["cp_global_ranks"], (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_TRUE(test::any_contains(bundle.lost, "ascending global rank"));
  EXPECT_NE(bundle.find("rank_map.json"), nullptr);
}

TEST(TorchtitanExport, ZigzagPlanGivesGoldenToml) {
  const test::TestPlan t(dense_zigzag(4), 1, 4);
  const ExportBundle bundle = export_torchtitan(t.input(), TorchtitanFormat::toml_v0_2);
  // Only the sharding differs: torchtitan's FSDP shards parameters over the 4 CP ranks.
  ASSERT_EQ(bundle.lost.size(), 1u);
  EXPECT_TRUE(test::any_contains(bundle.lost, "parameter sharding: torchtitan applies FSDP2"));
  EXPECT_TRUE(test::any_contains(bundle.lost, "dp_shard x cp = 1 x 4 = 4 ranks"));
  EXPECT_EQ(bundle.find("torchtitan.toml")->bytes,
            "# torchtitan job config fragment for plan test-plan, written by `sparsering export --to torchtitan "
            "--torchtitan-format toml-v0.2`.\n"
            "# For torchtitan up to v0.2.2 (TOML job config; later torchtitan takes a Python Trainer.Config).\n"
            "# Merge into your job config. Mesh (outer -> inner): pp 1, dp_replicate 1, dp_shard 1, cp 4, tp 1 = 4 "
            "ranks.\n"
            "# What torchtitan cannot express of the plan: NOTES.md.\n"
            "[parallelism]\n"
            "data_parallel_replicate_degree = 1\n"
            "data_parallel_shard_degree = 1\n"
            "tensor_parallel_degree = 1\n"
            "pipeline_parallel_degree = 1\n"
            "context_parallel_degree = 4\n"
            "context_parallel_rotate_method = \"alltoall\"\n"
            "context_parallel_load_balancer = \"headtail\"\n"
            "\n[training]\n"
            "seq_len = 256\n"
            "local_batch_size = 1\n"
            "\n[activation_checkpoint]\n"
            "mode = \"none\"\n");
}

TEST(TorchtitanExport, ZeroStage3WithoutContextParallelismIsExact) {
  test::PlanSpec spec = dense_zigzag(1);
  spec.data_parallel = 2;
  spec.zero_stage = 3;
  const test::TestPlan t(spec, 1, 2);
  const ExportBundle bundle = export_torchtitan(t.input(), TorchtitanFormat::toml_v0_2);
  EXPECT_TRUE(bundle.exact()) << bundle.lost.front();
  EXPECT_NE(bundle.find("torchtitan.toml")->bytes.find("data_parallel_shard_degree = 2\n"), std::string::npos);
}

TEST(TorchtitanExport, LossyLayoutsDegreesAndSharding) {
  test::PlanSpec striped;
  striped.data_parallel = 2;
  striped.zero_stage = 1;
  striped.comm = "all_gather";
  const test::TestPlan s(striped, 1, 8);
  const ExportBundle bundle = export_torchtitan(s.input(), TorchtitanFormat::toml_v0_2);
  const std::string& toml = bundle.find("torchtitan.toml")->bytes;
  EXPECT_NE(toml.find("context_parallel_load_balancer = \"ptrr\"\n"), std::string::npos);
  EXPECT_NE(toml.find("context_parallel_rotate_method = \"allgather\"\n"), std::string::npos);
  EXPECT_NE(toml.find("data_parallel_shard_degree = 2\n"), std::string::npos);
  EXPECT_TRUE(test::any_contains(bundle.lost, "ptrr load balancer"));
  EXPECT_TRUE(test::any_contains(bundle.lost, "16-token stripes round robin"));
  EXPECT_TRUE(test::any_contains(bundle.lost, "ZeRO stage 1"));

  test::PlanSpec contiguous = dense_zigzag(4);
  contiguous.layout = "contiguous";
  contiguous.head_parallel = 2;
  const test::TestPlan c(contiguous, 1, 8);
  const ExportBundle flat = export_torchtitan(c.input(), TorchtitanFormat::toml_v0_2);
  const std::string& flat_toml = flat.find("torchtitan.toml")->bytes;
  EXPECT_EQ(flat_toml.find("\ncontext_parallel_load_balancer ="), std::string::npos);
  EXPECT_NE(flat_toml.find("TOML has no None"), std::string::npos);
  EXPECT_NE(flat_toml.find("context_parallel_degree = 8\n"), std::string::npos);
  EXPECT_TRUE(test::any_contains(flat.lost, "head parallelism"));
  EXPECT_FALSE(test::any_contains(flat.lost, "ring order"));
  EXPECT_EQ(read_npy_int64(flat.find("token_permutation.npy")->bytes).rows, 8);
}

TEST(MTrainingExport, HierarchicalStripedPlanGivesDrStripeAndAFlexConfig) {
  test::PlanSpec spec;
  spec.levels = {{2, "nvlink"}, {2, "infiniband"}};
  spec.granularity_tokens = spec.block_q;  // MTraining's one granularity: stripe = query block
  const test::TestPlan t(spec, 2, 2);
  ExportOptions options;
  const ExportBundle bundle = export_mtraining(t.input(), options);
  EXPECT_EQ(bundle.find("mtraining_attn.yaml")->bytes,
            "# MTraining attention config for plan test-plan, written by `sparsering export --to mtraining`.\n"
            "# Ring: 4 consecutive ranks per scale unit; what MTraining cannot express: NOTES.md.\n"
            "pattern_config_name: sparsering_tiny_flex_0.95_v4096_s4096\n"
            "implementation: dr_stripe\n"
            "granularity: 64\n");
  // The recall and caps travel in the flex config; only last_q (16, MTraining fixes 64) is lost.
  const ExportFile* config = bundle.find("minference_configs/sparsering_tiny_flex_0.95_v4096_s4096.json");
  ASSERT_NE(config, nullptr);
  const auto doc = nlohmann::json::parse(config->bytes);
  ASSERT_EQ(doc.size(), 2u);  // layers
  EXPECT_EQ(doc[1].size(), 8u);  // query heads
  EXPECT_EQ(doc[1]["7"], nlohmann::json::parse(R"(["flex_vertical_and_slash", [0.95, 4096], [0.95, 4096], 0.0])"));
  ASSERT_EQ(bundle.lost.size(), 1u) << bundle.lost.back();
  EXPECT_TRUE(test::any_contains(bundle.lost, "last 64 queries"));
  EXPECT_FALSE(test::any_contains(bundle.lost, "recall"));
  EXPECT_TRUE(test::any_contains(bundle.notes, "minference/configs/"));
  EXPECT_TRUE(test::any_contains(bundle.notes, "LOCAL_WORLD_SIZE = 2 (the plan's inner ring) = the GPUs per node"));

  // A config named by the user replaces the flex config; the recall is then not the export's.
  options.pattern_config_name = "Tiny_pattern";
  const ExportBundle named = export_mtraining(t.input(), options);
  EXPECT_NE(named.find("mtraining_attn.yaml")->bytes.find("pattern_config_name: Tiny_pattern\n"), std::string::npos);
  EXPECT_EQ(named.files.size(), bundle.files.size() - 1);
  EXPECT_TRUE(test::any_contains(named.lost, "named with --pattern-config"));
  options.pattern_config_name = "bad name; rm";
  test::expect_input_error([&] { export_mtraining(t.input(), options); }, {"may only hold"});
}

TEST(MTrainingExport, DensePlanWithoutAKnownConfigIsRefused) {
  const test::TestPlan t(dense_zigzag(4), 1, 4);
  test::expect_input_error([&] { export_mtraining(t.input(), ExportOptions{}); },
                           {"dense", "no MInference pattern config", "tiny"});
}

TEST(MTrainingExport, ZigzagAndLossyBlocks) {
  test::PlanSpec spec = dense_zigzag(4);
  spec.levels = {{2, "nvlink"}, {2, "infiniband"}};
  spec.block_k = 128;
  const test::TestPlan t(spec, 2, 2);
  ExportOptions options;
  options.pattern_config_name = "P";
  const ExportBundle bundle = export_mtraining(t.input(), options);
  EXPECT_NE(bundle.find("mtraining_attn.yaml")->bytes.find("implementation: zigzag\ngranularity: 64\n"),
            std::string::npos);
  EXPECT_TRUE(test::any_contains(bundle.lost, "key tile is 64"));
  EXPECT_TRUE(test::any_contains(bundle.lost, "MTraining zigzag has no nested rings"));
  EXPECT_TRUE(test::any_contains(bundle.lost, "plan is dense"));
  EXPECT_EQ(known_pattern_config("qwen2.5-3b"), "Qwen2.5_3B_kv_out_v32_fit_o_best_pattern");
  EXPECT_EQ(known_pattern_config("no-such-model"), "");
}

TEST(HeadParallelExports, MegatronAndTeRefuseMoreHeadRanksThanKvHeads) {
  test::PlanSpec spec;
  spec.head_parallel = 2;
  spec.seq_len_tokens = 512;
  test::TestPlan t(spec, 2, 4);
  t.model.kv_heads = 1;  // 8 query heads sharing one K/V head: head_parallel 2 replicates it
  test::expect_input_error([&] { export_megatron(t.input()); },
                           {"megatron export", "head_parallel 2", "1 K/V heads", "replicating", "{1}"});
  test::expect_input_error([&] { export_te(t.input()); }, {"te export", "TransformerEngine", "kv_heads % head_parallel"});
  // Exporters without an a2a keep such plans (one flat ring over all heads).
  EXPECT_NO_THROW(export_torchtitan(t.input()));
  t.model.kv_heads = 2;
  EXPECT_NO_THROW(export_megatron(t.input()));
  EXPECT_NO_THROW(export_te(t.input()));
}

TEST(TorchtitanExport, PythonConfigForCurrentTorchtitan) {
  test::PlanSpec spec = dense_zigzag(4);
  spec.recompute = "full";
  spec.zero_stage = 1;
  spec.data_parallel = 2;
  const test::TestPlan t(spec, 2, 4);
  const ExportBundle bundle = export_torchtitan(t.input());
  ASSERT_EQ(bundle.find("torchtitan.toml"), nullptr);
  const ExportFile* file = bundle.find("torchtitan_config.py");
  ASSERT_NE(file, nullptr);
  const std::string& py = file->bytes;
  for (const std::string line :
       {"TORCHTITAN_COMMIT = \"b5bcd76c66d0acb1a08b176d9639425bc55e0b2a\"\n", "WORLD_SIZE = 8\n",
        "    from torchtitan.distributed.activation_checkpoint import FullAC\n",
        "    parallelism.data_parallel_replicate_degree = 1\n", "    parallelism.data_parallel_shard_degree = 2\n",
        "    parallelism.context_parallel_degree = 4\n",
        "    parallelism.context_parallel_load_balancer = \"headtail\"\n",
        "    parallelism.spmd_backend = \"spmd_types\"\n", "    training.max_context_length = 256\n",
        "    training.num_tokens_per_microbatch_per_dp_rank = 256\n",
        "    config.activation_checkpoint = FullAC.Config()\n"}) {
    EXPECT_NE(py.find(line), std::string::npos) << line << "\n" << py;
  }
  for (const std::string old_key : {"rotate_method", "seq_len =", "local_batch_size", "mode ="}) {
    EXPECT_EQ(py.find(old_key), std::string::npos) << old_key;
  }
  // The p2p ring is no longer a torchtitan option.
  EXPECT_TRUE(test::any_contains(bundle.lost, "no rotate-method option"));

  test::PlanSpec contiguous = dense_zigzag(4);
  contiguous.layout = "contiguous";
  contiguous.comm = "all_gather";
  const test::TestPlan c(contiguous, 1, 4);
  const ExportBundle flat = export_torchtitan(c.input());
  const std::string& flat_py = flat.find("torchtitan_config.py")->bytes;
  EXPECT_NE(flat_py.find("    parallelism.context_parallel_load_balancer = None\n"), std::string::npos);
  EXPECT_NE(flat_py.find("    config.activation_checkpoint = None\n"), std::string::npos);
  EXPECT_EQ(flat_py.find("activation_checkpoint import"), std::string::npos);
  EXPECT_FALSE(test::any_contains(flat.lost, "rotate-method"));
  EXPECT_EQ(parse_torchtitan_format("toml-v0.2"), TorchtitanFormat::toml_v0_2);
  EXPECT_EQ(parse_torchtitan_format("python"), TorchtitanFormat::python);
  test::expect_input_error([] { parse_torchtitan_format("yaml"); }, {"unknown torchtitan format 'yaml'", "v0.2.2"});
}

}  // namespace
}  // namespace sparsering
