// `sparsering tune` end to end (cli/tune_command.cpp, run through the built `sparsering` binary):
// a small model, GPU and cluster written to a temporary folder, synthetic traces (one and three
// samples), and the command's outputs, refusals and exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "common/atomic_file.hpp"
#include "sim/config/plan_config.hpp"
#include "tests/tuner_search/tuner_test_inputs.hpp"
#include "traces/safetensors_trace.hpp"

namespace sparsering {
namespace {

namespace fs = std::filesystem;

struct CommandRun {
  int code = 0;
  std::string out;
};

/// Runs `sparsering` with `args` (stderr folded into the output).
CommandRun tune(const std::string& args) {
  const std::string command = std::string(TUNE_CLI_DRIVER) + " " + args + " 2>&1";
  CommandRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return CommandRun{-1, "popen failed"};
  std::array<char, 4096> buffer{};
  size_t got = 0;
  while ((got = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) run.out.append(buffer.data(), got);
  const int status = pclose(pipe);
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

class CliTune : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparsering_cli_tune_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    for (const char* sub : {"models", "gpus", "clusters"}) fs::create_directories(dir_ / sub);
    write_file_atomically(dir_ / "models/tiny.yaml",
                          "name: tiny\nlayers: 2\nhidden_size: 256\nffn_hidden_size: 512\nq_heads: 4\nkv_heads: 2\n"
                          "head_dim: 64\nvocab_size: 1000\n",
                          true);
    write_file_atomically(dir_ / "gpus/test-gpu.yaml",
                          "name: test-gpu\nmemory_gib: 80\npeak_tflops_bf16: 400\nmemory_bandwidth_gbytes_per_s: 2000\n"
                          "sm_count: 100\nl2_mib: 40\n",
                          true);
    write_file_atomically(dir_ / "clusters/test.yaml",
                          "name: test-cluster\nnodes: 2\ngpus_per_node: 2\ngpu: test-gpu\nintra_node:\n  kind: nvlink\n"
                          "  bandwidth_gbytes_per_s: 100\n  latency_us: 2\ninter_node:\n  kind: infiniband\n"
                          "  nics_per_node: 1\n  bandwidth_gbytes_per_s: 4\n  latency_us: 5\n",
                          true);
    write_trace(dir_ / "trace.safetensors", testing::tiny_trace(testing::tiny_model(), 8192, 3, 4), true);
    write_trace(dir_ / "samples.safetensors", testing::tiny_trace(testing::tiny_model(), 8192, 4, 4, 3), true);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string inputs(const std::string& seq_len = "8K") const {
    return str("tune --model ", (dir_ / "models/tiny.yaml").string(), " --cluster ", (dir_ / "clusters/test.yaml").string(),
               " --trace ", (dir_ / "trace.safetensors").string(), " --seq-len ", seq_len, " --threads 2 --zero 0,1");
  }

  fs::path dir_;
};

TEST_F(CliTune, WritesTheBestPlanAndTheTopPlansWithPredictionsAndHashes) {
  const fs::path out = dir_ / "out/plan.yaml";
  const CommandRun run = tune(inputs() + " --top 2 --out " + out.string());
  ASSERT_EQ(run.code, 0) << run.out;
  EXPECT_NE(run.out.find("rank"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("why: "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("exact: "), std::string::npos) << run.out;
  for (const char* name : {"plan.yaml", "plan-1.yaml", "plan-2.yaml"}) {
    ASSERT_TRUE(fs::exists(dir_ / "out" / name)) << name;
    const LoadedPlan loaded = load_plan_with_inputs(dir_ / "out" / name);
    ASSERT_TRUE(loaded.plan.prediction.has_value());
    EXPECT_EQ(loaded.plan.prediction->attention_fwd_ms.size(), 2U);
    EXPECT_EQ(loaded.plan.prediction->input_hashes.size(), 4U);
    EXPECT_EQ(loaded.plan.prediction->input_hashes.at("trace").rfind("sha256:", 0), 0U);
    EXPECT_TRUE(fs::exists(loaded.plan.trace_path)) << loaded.plan.trace_path;
  }
  EXPECT_EQ(read_file(dir_ / "out/plan.yaml"), read_file(dir_ / "out/plan-1.yaml"));
  EXPECT_NE(read_file(dir_ / "out/plan-1.yaml"), read_file(dir_ / "out/plan-2.yaml"));

  // An existing output is kept unless --force.
  const std::string before = read_file(out);
  const CommandRun again = tune(inputs() + " --top 2 --out " + out.string());
  EXPECT_EQ(again.code, 2) << again.out;
  EXPECT_NE(again.out.find("already exists"), std::string::npos) << again.out;
  EXPECT_EQ(read_file(out), before);
  EXPECT_EQ(tune(inputs() + " --top 2 --force --out " + out.string()).code, 0);
}

TEST_F(CliTune, JsonOutput) {
  const CommandRun run = tune(inputs() + " --top 3 --format json --objective tokens-per-s --model-error " +
                              std::string(SPARSERING_SOURCE_DIR) + "/configs/model_error.yaml");
  ASSERT_EQ(run.code, 0) << run.out;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j.at("ranked").size(), 3U);
  EXPECT_EQ(j.at("objective"), "tokens-per-s");
  // Ranked by tie group (plans within the model's error are tied; lower memory first inside one).
  EXPECT_LE(j.at("ranked")[0].at("tie_group").get<int64_t>(), j.at("ranked")[1].at("tie_group").get<int64_t>());
  EXPECT_GT(j.at("stats").at("simulated").get<int64_t>(), 0);
  EXPECT_GE(j.at("stats").at("layers_counted").get<int64_t>(), j.at("stats").at("work_sets").get<int64_t>());
  // The whole ranking: every simulated plan, ascending by cost, and what each bound pruned.
  const nlohmann::json& all = j.at("simulated");
  EXPECT_EQ(static_cast<int64_t>(all.size()), j.at("stats").at("simulated").get<int64_t>());
  for (size_t k = 1; k < all.size(); ++k) EXPECT_LE(all[k - 1].at("cost").get<double>(), all[k].at("cost").get<double>());
  const nlohmann::json& pruned = j.at("pruned_by_bound");
  EXPECT_EQ(pruned.at("coarse").get<int64_t>() + pruned.at("tiles").get<int64_t>() + pruned.at("cells").get<int64_t>() +
                pruned.at("strong_and_ring").get<int64_t>() + pruned.at("counted_layers").get<int64_t>(),
            j.at("stats").at("bound_pruned").get<int64_t>());
  EXPECT_EQ(pruned.at("memory").get<int64_t>(), j.at("stats").at("memory_pruned").get<int64_t>());
  EXPECT_GT(j.at("tie_band").at("relative").get<double>(), 0.0);
  EXPECT_FALSE(j.at("tie_band").at("source").get<std::string>().empty());
}

TEST_F(CliTune, BadInputExitsWithTwo) {
  const auto expect_error = [&](const std::string& args, const std::string& says) {
    const CommandRun run = tune(args);
    EXPECT_EQ(run.code, 2) << args << "\n" << run.out;
    EXPECT_NE(run.out.find(says), std::string::npos) << args << "\n" << run.out;
  };
  expect_error(str("tune --model no-such-model --cluster ", (dir_ / "clusters/test.yaml").string(), " --trace ",
                   (dir_ / "trace.safetensors").string(), " --seq-len 8K"),
               "unknown model");
  expect_error(str("tune --model ", (dir_ / "models/tiny.yaml").string(), " --cluster nowhere --trace ",
                   (dir_ / "trace.safetensors").string(), " --seq-len 8K"),
               "unknown cluster");
  expect_error(inputs("4K"), "8192 tokens");                  // the trace is for another length
  expect_error(inputs("8100"), "not a multiple of 64");
  expect_error(inputs() + " --memory-cap-gib 0.000001", "no plan fits");
  expect_error(inputs() + " --objective fastest", "objective");
  expect_error(inputs() + " --granularities 3", "powers of two");
  const CommandRun missing = tune(str("tune --model ", (dir_ / "models/tiny.yaml").string()));
  EXPECT_EQ(missing.code, 2) << missing.out;
}

TEST_F(CliTune, SeveralSamplesRankedByAStatistic) {
  const std::string args = str("tune --model ", (dir_ / "models/tiny.yaml").string(), " --cluster ",
                               (dir_ / "clusters/test.yaml").string(), " --trace ",
                               (dir_ / "samples.safetensors").string(), " --seq-len 8K --threads 2 --zero 0 --top 3");
  const CommandRun json = tune(args + " --samples all --rank-by p90 --format json");
  ASSERT_EQ(json.code, 0) << json.out;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j.at("samples"), nlohmann::json({0, 1, 2}));
  EXPECT_EQ(j.at("rank_by"), "p90");
  for (const nlohmann::json& plan : j.at("ranked")) {
    ASSERT_EQ(plan.at("sample_step_ms").size(), 3U);
    const nlohmann::json& spread = plan.at("step_ms_spread");
    EXPECT_LE(spread.at("min").get<double>(), plan.at("step_ms").get<double>());
    EXPECT_GE(spread.at("max").get<double>(), plan.at("step_ms").get<double>());
  }
  // Every sample has a fastest ranked plan.
  std::set<int64_t> covered;
  for (const nlohmann::json& plan : j.at("ranked")) {
    for (const int64_t s : plan.at("fastest_on_samples")) covered.insert(s);
  }
  EXPECT_EQ(covered, (std::set<int64_t>{0, 1, 2}));
  for (const nlohmann::json& plan : j.at("simulated")) EXPECT_EQ(plan.at("sample_step_ms").size(), 3U);
  const CommandRun table = tune(args + " --samples 0,2");
  ASSERT_EQ(table.code, 0) << table.out;
  EXPECT_NE(table.out.find("mean step ms"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("fastest on"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("samples: 0,2; ranked by the mean step"), std::string::npos) << table.out;
  const auto expect_error = [&](const std::string& more, const std::string& says) {
    const CommandRun run = tune(args + more);
    EXPECT_EQ(run.code, 2) << more << "\n" << run.out;
    EXPECT_NE(run.out.find(says), std::string::npos) << more << "\n" << run.out;
  };
  expect_error(" --samples 4", "the trace has 3 samples");
  expect_error(" --samples 0,7", "sample 7 does not exist");
  expect_error(" --samples 1 --sample 0", "not both");
  expect_error(" --samples all --rank-by p75", "--rank-by");
}

TEST_F(CliTune, AcceptsAHuggingFaceModelFolder) {
  // The tiny model's shape as a Hugging Face config.json in a folder of its own.
  fs::create_directories(dir_ / "hf-tiny");
  write_file_atomically(dir_ / "hf-tiny/config.json",
                        R"({"model_type": "qwen2", "num_hidden_layers": 2, "hidden_size": 256, "intermediate_size": 512,
                            "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000})",
                        true);
  const CommandRun run = tune(str("tune --model ", (dir_ / "hf-tiny").string(), " --cluster ",
                                  (dir_ / "clusters/test.yaml").string(), " --trace ", (dir_ / "trace.safetensors").string(),
                                  " --seq-len 8K --threads 2 --zero 0"));
  EXPECT_EQ(run.code, 0) << run.out;
  EXPECT_NE(run.out.find("why:"), std::string::npos) << run.out;
  // A folder without config.json is still an unknown model.
  fs::create_directories(dir_ / "empty-folder");
  const CommandRun empty = tune(str("tune --model ", (dir_ / "empty-folder").string(), " --cluster ",
                                    (dir_ / "clusters/test.yaml").string(), " --trace ",
                                    (dir_ / "trace.safetensors").string(), " --seq-len 8K"));
  EXPECT_EQ(empty.code, 2) << empty.out;
}

}  // namespace
}  // namespace sparsering
