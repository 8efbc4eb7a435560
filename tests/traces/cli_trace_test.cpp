// `sparsering trace synth` and `trace info` end to end: runs the built binary and checks exit
// codes (0 / 2), messages and outputs.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string output;  // stdout and stderr
};

Result run(const std::string& args) {
  const std::string command = std::string(SPARSERING_CLI) + " " + args + " 2>&1";
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

class TraceCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparsering_cli_trace_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string model() { return std::string(SPARSERING_SOURCE_DIR) + "/tests/traces/data/models/tiny.yaml"; }
  std::string synth_args(const std::string& out, int samples = 2) const {
    return "trace synth --model " + model() + " --seq-len 2K --samples " + std::to_string(samples) +
           " --seed 11 --vertical-slots 64 --slash-slots 96 --out " + out;
  }
  fs::path dir_;
};

TEST_F(TraceCli, SynthThenInfo) {
  const std::string out = path("t.safetensors");
  Result r = run(synth_args(out));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("2 samples x 2 layers x 4 heads at 2048 tokens"), std::string::npos) << r.output;
  ASSERT_TRUE(fs::exists(out));

  r = run("trace info " + out + " --recall 0.9");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("tile sparsity"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model tiny"), std::string::npos) << r.output;

  r = run("trace info " + out + " --format json --per-head --max-slashes 7");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto doc = nlohmann::json::parse(r.output);
  EXPECT_EQ(doc["trace"]["layers"], 2);
  EXPECT_EQ(doc["heads"].size(), 8u);
  EXPECT_EQ(doc["settings"]["max_slashes"], 7);
  EXPECT_LE(doc["budgets"]["kept_slashes"]["max"].get<double>(), 7.0);
  EXPECT_EQ(doc["trace"]["provenance"]["prior_file"], "tiny.yaml");

  // The same seed writes the same bytes.
  ASSERT_EQ(run(synth_args(path("again.safetensors"))).code, 0);
  std::ifstream a(out, std::ios::binary), b(path("again.safetensors"), std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(a), {}), std::string(std::istreambuf_iterator<char>(b), {}));

  r = run(synth_args(path("json.safetensors")) + " --format json");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto written = nlohmann::json::parse(r.output);
  EXPECT_EQ(written["heads"], 4);
  EXPECT_EQ(written["bytes"], fs::file_size(path("json.safetensors")));

  // --out for info; refuses to overwrite without --force.
  ASSERT_EQ(run("trace info " + out + " --format json --out " + path("info.json")).code, 0);
  EXPECT_EQ(run("trace info " + out + " --out " + path("info.json")).code, 2);
  EXPECT_EQ(run("trace info " + out + " --force --out " + path("info.json")).code, 0);
}

TEST_F(TraceCli, NeverOverwritesWithoutForce) {
  const std::string out = path("t.safetensors");
  ASSERT_EQ(run(synth_args(out)).code, 0);
  const auto size = fs::file_size(out);
  Result r = run(synth_args(out));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("already exists; pass --force"), std::string::npos) << r.output;
  EXPECT_EQ(fs::file_size(out), size);
  EXPECT_EQ(run(synth_args(out, 1) + " --force").code, 0);
  EXPECT_LT(fs::file_size(out), size);
}

TEST_F(TraceCli, BadInputExitsTwoWithAMessage) {
  const std::string out = path("t.safetensors");
  ASSERT_EQ(run(synth_args(out)).code, 0);
  std::ofstream(path("garbage.safetensors"), std::ios::binary) << "not a trace at all, just text";
  std::ofstream(path("bad-model.yaml")) << "name: x\nlayers: -1\n";
  const std::pair<std::string, std::string> cases[] = {
      {"trace info " + path("missing.safetensors"), "cannot open"},
      {"trace info " + path("garbage.safetensors"), "garbage.safetensors: header length"},
      {"trace info " + out + " --recall 1.5", "recall must be in (0, 1]"},
      {"trace info " + out + " --recall 0", "recall must be in (0, 1]"},
      {"trace info " + out + " --max-slashes -3", "max_slashes"},
      {"trace info " + out + " --block 0", "block size"},
      {"trace synth --model " + model() + " --seq-len 12Q --out " + path("x.safetensors"), "--seq-len"},
      {"trace synth --model " + model() + " --seq-len 8 --out " + path("x.safetensors"), "seq_len must be in [16"},
      {"trace synth --model " + model() + " --seq-len 2K --samples 0 --out " + path("x.safetensors"), "samples"},
      {"trace synth --model " + path("no-model.yaml") + " --seq-len 2K --out " + path("x.safetensors"),
       "no-model.yaml"},
      {"trace synth --model " + path("bad-model.yaml") + " --seq-len 2K --out " + path("x.safetensors"), "layers"},
      {"trace synth --model " + model() + " --seq-len 2K", "--out"},
      {"trace synth --model " + model() + " --seq-len 2K --prior " + path("none.yaml") + " --out " +
           path("x.safetensors"),
       "none.yaml"},
      {"trace synth --model " + model() + " --seq-len 2K --out " + path("no/such/dir/x.safetensors"), "does not exist"},
      {"trace synth --seq-len 2K --out " + path("x.safetensors"), "--model"},
      {"trace info", "trace"},
  };
  for (const auto& [args, needle] : cases) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << args << "\nexpected '" << needle << "' in:\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(path("x.safetensors")));
}

}  // namespace
