// `sparsering simulate` end to end: runs the built binary on the bundled 32K sample trace and a
// small plan (tests/golden/data/), and checks the outputs (result.json and timeline.json written
// into --out, never overwritten without --force, --format json on stdout, several trace samples
// side by side), the exit codes (0 / 2) and that every bad input names its problem. Also
// --version and --help of the binary.
// (`sparsering trace` is covered by tests/traces/cli_trace_test.cpp.)
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

namespace {

namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string output;
};

/// Runs the CLI with `args` (shell words); `merge_stderr` folds stderr into the output.
Result run(const std::string& args, bool merge_stderr = true) {
  const std::string command = std::string(SPARSERING_CLI) + " " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  Result result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string source(const std::string& rel) { return std::string(SPARSERING_SOURCE_DIR) + "/" + rel; }

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class SimulateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparsering_cli_simulate_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static std::string plan() { return source("tests/golden/data/qwen2.5-3b-32k-h200x2-striped.yaml"); }
  static std::string sample() { return source("traces/samples/qwen2.5-3b-32k.safetensors"); }

  /// Writes a plan like the golden 32K plan with `replace` applied to its text (absolute paths).
  std::string variant(const std::string& name, const std::string& from, const std::string& to) const {
    std::string text = read_text(plan());
    const auto fix = [&text](const std::string& a, const std::string& b) {
      const size_t at = text.find(a);
      if (at != std::string::npos) text.replace(at, a.size(), b);
    };
    fix("../../../configs/models/qwen2.5-3b.yaml", source("configs/models/qwen2.5-3b.yaml"));
    fix("../../../configs/clusters/h200-2x-nvlink.yaml", source("configs/clusters/h200-2x-nvlink.yaml"));
    fix("../../../traces/samples/qwen2.5-3b-32k.safetensors", sample());
    if (!from.empty()) {
      EXPECT_TRUE(contains(text, from)) << from;
      fix(from, to);
    }
    const std::string out = path(name);
    std::ofstream(out) << text;
    return out;
  }

  fs::path dir_;
};

TEST_F(SimulateCli, WritesResultAndTimelineIntoOut) {
  const std::string out = path("run");
  const Result r = run("simulate --plan " + plan() + " --out " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "training step")) << r.output;
  EXPECT_TRUE(contains(r.output, "wrote")) << r.output;
  // Exactly the two files, complete JSON documents (no temporary files left behind).
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(out)) names.insert(entry.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"result.json", "timeline.json"}));
  const auto result = nlohmann::json::parse(read_text(fs::path(out) / "result.json"));
  EXPECT_EQ(result["format"], "sparsering-simulation");
  EXPECT_EQ(result["layers"].size(), 36U);
  ASSERT_TRUE(result.contains("rings"));
  EXPECT_EQ(result["rings"].size(), 2U * 36U);  // one ring class, forward and backward per layer
  EXPECT_EQ(result["rings"][0]["ranks"].size(), 2U);
  const auto timeline = nlohmann::json::parse(read_text(fs::path(out) / "timeline.json"));
  ASSERT_TRUE(timeline.contains("traceEvents"));
  EXPECT_GT(timeline["traceEvents"].size(), 100U);
}

TEST_F(SimulateCli, RefusesToOverwriteWithoutForce) {
  const std::string out = path("run");
  ASSERT_EQ(run("simulate --plan " + plan() + " --out " + out).code, 0);
  const std::string before = read_text(fs::path(out) / "result.json");
  std::ofstream(fs::path(out) / "timeline.json") << "keep me";
  Result r = run("simulate --plan " + plan() + " --out " + out);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "already exists; pass --force")) << r.output;
  EXPECT_EQ(read_text(fs::path(out) / "timeline.json"), "keep me");
  EXPECT_EQ(read_text(fs::path(out) / "result.json"), before);
  r = run("simulate --plan " + plan() + " --out " + out + " --force");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(read_text(fs::path(out) / "timeline.json"), "keep me");
  // The same inputs give the same bytes.
  EXPECT_EQ(read_text(fs::path(out) / "result.json"), before);
}

TEST_F(SimulateCli, JsonOnStdoutIsValid) {
  const Result r = run("simulate --plan " + plan() + " --format json", false);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto doc = nlohmann::json::parse(r.output);
  EXPECT_EQ(doc["format"], "sparsering-simulation");
  EXPECT_EQ(doc["plan"], "qwen2.5-3b-32k-h200x2-striped");
  EXPECT_GT(doc["step"]["step_ns"].get<int64_t>(), 0);
  EXPECT_GT(doc["step"]["tokens_per_s"].get<double>(), 0.0);
  EXPECT_FALSE(doc.contains("rings")) << "the stdout summary leaves out the per-rank records";
  EXPECT_TRUE(doc.contains("sparsering_version"));
  // The direct accumulator route is accepted (a flat ring: the same result).
  const Result direct = run("simulate --plan " + plan() + " --format json --accumulators direct", false);
  ASSERT_EQ(direct.code, 0);
  EXPECT_EQ(nlohmann::json::parse(direct.output)["step"], doc["step"]);
  // Threads never change the result.
  const Result one = run("simulate --plan " + plan() + " --format json --threads 1", false);
  const Result two = run("simulate --plan " + plan() + " --format json --threads 2", false);
  ASSERT_EQ(one.code, 0);
  EXPECT_EQ(one.output, two.output);
}

TEST_F(SimulateCli, SeveralSamplesSideBySide) {
  // A three-sample trace of the plan's model and length: each sample's figures and the statistics
  // over them, on stdout as JSON and as a table, and in result.json.
  const std::string trace = path("three.safetensors");
  ASSERT_EQ(run("trace synth --model " + source("configs/models/qwen2.5-3b.yaml") +
                " --seq-len 32K --seed 5 --samples 3 --vertical-slots 256 --slash-slots 256 --out " + trace)
                .code,
            0);
  const Result json = run("simulate --plan " + plan() + " --trace " + trace + " --samples all --format json", false);
  ASSERT_EQ(json.code, 0) << json.output;
  const auto doc = nlohmann::json::parse(json.output);
  ASSERT_EQ(doc["samples"].size(), 3U);
  EXPECT_EQ(doc["detail_sample"], 0);
  EXPECT_EQ(doc["samples"][2]["sample"], 2);
  const double first = doc["samples"][0]["step_ms"].get<double>();
  EXPECT_NEAR(first, doc["step"]["step_ns"].get<double>() * 1e-6, 1e-6) << "the detail is the first sample's";
  const auto& step = doc["aggregate"]["step_ms"];
  EXPECT_LE(step["min"].get<double>(), step["mean"].get<double>());
  EXPECT_LE(step["mean"].get<double>(), step["max"].get<double>());
  // One sample alone gives that sample's step.
  const Result one = run("simulate --plan " + plan() + " --trace " + trace + " --sample 2 --format json", false);
  ASSERT_EQ(one.code, 0);
  EXPECT_EQ(nlohmann::json::parse(one.output)["step"]["step_ns"].get<int64_t>(),
            static_cast<int64_t>(std::llround(doc["samples"][2]["step_ms"].get<double>() * 1e6)));
  const Result table = run("simulate --plan " + plan() + " --trace " + trace + " --samples 2,0");
  ASSERT_EQ(table.code, 0) << table.output;
  EXPECT_TRUE(contains(table.output, "per trace sample (2)")) << table.output;
  const std::string out = path("out");
  ASSERT_EQ(run("simulate --plan " + plan() + " --trace " + trace + " --samples 2 --out " + out).code, 0);
  const auto written = nlohmann::json::parse(read_text(fs::path(out) / "result.json"));
  EXPECT_EQ(written["samples"].size(), 2U);
  EXPECT_TRUE(written.contains("rings"));
  // Refused: both flags, a sample that does not exist.
  const Result both = run("simulate --plan " + plan() + " --trace " + trace + " --samples 2 --sample 1");
  EXPECT_EQ(both.code, 2);
  EXPECT_TRUE(contains(both.output, "not both")) << both.output;
  const Result missing = run("simulate --plan " + plan() + " --trace " + trace + " --samples 0,5");
  EXPECT_EQ(missing.code, 2);
  EXPECT_TRUE(contains(missing.output, "sample 5 does not exist")) << missing.output;
}

TEST_F(SimulateCli, BadInputsExitTwoNamingTheProblem) {
  struct Case {
    std::string what;
    std::string args;
    std::string message;
  };
  // A trace of another model (2 layers x 4 heads) at the plan's length.
  const std::string tiny_trace = path("tiny.safetensors");
  ASSERT_EQ(run("trace synth --model " + source("tests/traces/data/models/tiny.yaml") +
                " --seq-len 32K --seed 3 --vertical-slots 64 --slash-slots 64 --out " + tiny_trace)
                .code,
            0);
  std::ofstream(path("malformed.yaml")) << "name: [unclosed\nmodel: qwen2.5-3b\n";
  std::ofstream(path("a_file")) << "x";
  const std::vector<Case> cases = {
      {"missing plan", "simulate --plan " + path("nope.yaml"), "nope.yaml"},
      {"malformed YAML", "simulate --plan " + path("malformed.yaml"), "malformed.yaml"},
      {"plan/trace length mismatch",
       "simulate --plan " + variant("long.yaml", "seq_len_tokens: 32768", "seq_len_tokens: 65536"),
       "has 32768 tokens, the plan's seq_len_tokens is 65536"},
      {"trace of another model", "simulate --plan " + plan() + " --trace " + tiny_trace,
       "the trace has 2 layers, model 'qwen2.5-3b' has 36"},
      {"ring order outside the world", "simulate --plan " + variant("order.yaml", "order: [0, 1]", "order: [0, 5]"),
       "ring.order[1]"},
      {"ranks the cluster does not have",
       "simulate --plan " +
           variant("big.yaml", "context_parallel: 2\nhead_parallel: 1\ndata_parallel: 1\nring:\n  levels:\n    - {size: 2, link: nvlink}\n  order: [0, 1]",
                   "context_parallel: 4\nhead_parallel: 1\ndata_parallel: 1\nring:\n  levels:\n    - {size: 4, link: nvlink}\n  order: [0, 1, 2, 3]"),
       "must equal the GPUs of cluster"},
      {"sparse plan without a trace",
       "simulate --plan " +
           variant("notrace.yaml", "trace: " + sample() + "\n", ""),
       "is sparse: give a trace with --trace"},
      {"missing trace file", "simulate --plan " + plan() + " --trace " + path("none.safetensors"), "none.safetensors"},
      {"trace sample that does not exist", "simulate --plan " + plan() + " --sample 3", "sample 3"},
      {"negative threads", "simulate --plan " + plan() + " --threads -1", "--threads"},
      {"unknown accumulator route", "simulate --plan " + plan() + " --accumulators sideways", "sideways"},
      {"--out is a file", "simulate --plan " + plan() + " --out " + path("a_file"), "is not a folder"},
      {"unknown flag", "simulate --plan " + plan() + " --no-such-flag", "no-such-flag"},
      {"no --plan", "simulate", "--plan"},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.code, 2) << c.what << ": " << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << c.what << ": expected '" << c.message << "' in: " << r.output;
  }
  // A failed run writes nothing.
  const std::string out = path("failed");
  EXPECT_EQ(run("simulate --plan " + plan() + " --trace " + tiny_trace + " --out " + out).code, 2);
  EXPECT_TRUE(!fs::exists(out) || fs::is_empty(out));
}

TEST(SparseringCli, VersionAndHelpExitZero) {
  Result r = run("--version");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "sparsering")) << r.output;
  r = run("--help");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "simulate")) << r.output;
  r = run("simulate --help");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "--plan")) << r.output;
  EXPECT_TRUE(contains(r.output, "--threads")) << r.output;
  r = run("");
  EXPECT_EQ(r.code, 2) << "a subcommand is required: " << r.output;
}

}  // namespace
