// `sparsering export` run end to end: writes the folder and NOTES.md, prints what is lost, refuses
// to overwrite without --force (exit 2), and refuses bad plans and arguments with exit 2 and a
// message. Skips itself while the binary has no export command registered.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace {

struct CliRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CliRun run(const std::string& args) {
  const std::string command = std::string(SPARSERING_CLI) + " " + args + " 2>&1";
  CliRun result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

class ExportCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    if (run("export --help").exit_code != 0) GTEST_SKIP() << "this sparsering binary has no export command registered";
    dir_ = std::filesystem::temp_directory_path() / ("sparsering_export_cli_" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string plan(const std::string& name) const {
    return std::string(SPARSERING_SOURCE_DIR) + "/tests/tuner/data/plans/" + name + ".yaml";
  }
  std::filesystem::path dir_;
};

TEST_F(ExportCommand, WritesTheExportAndRefusesToOverwrite) {
  const std::string out = (dir_ / "megatron").string();
  const CliRun first = run("export " + plan("hier-striped-4") + " --to megatron --out " + out);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("what megatron cannot express of the plan:"), std::string::npos) << first.output;
  EXPECT_NE(first.output.find("becomes one flat ring of 4"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(dir_ / "megatron" / "megatron_args.sh"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "megatron" / "NOTES.md"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "megatron" / "token_permutation.npy"));

  const CliRun again = run("export " + plan("hier-striped-4") + " --to megatron --out " + out);
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("--force"), std::string::npos);
  const CliRun forced = run("--force export " + plan("hier-striped-4") + " --to megatron --out " + out);
  EXPECT_EQ(forced.exit_code, 0) << forced.output;
}

TEST_F(ExportCommand, JsonOutputAndTorchTarget) {
  const CliRun r = run("--format json export " + plan("hier-striped-8") + " --to torch --out " + (dir_ / "t").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"exact\": true"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "t" / "plan.json"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "t" / "sparsering_plan.py"));
}

TEST_F(ExportCommand, TorchtitanFormatsAndChakraOptions) {
  const CliRun current = run("export " + plan("hier-striped-4") + " --to torchtitan --out " + (dir_ / "tt").string());
  ASSERT_EQ(current.exit_code, 0) << current.output;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "tt" / "torchtitan_config.py"));
  const CliRun old = run("export " + plan("hier-striped-4") + " --to torchtitan --torchtitan-format toml-v0.2 --out " +
                         (dir_ / "toml").string());
  ASSERT_EQ(old.exit_code, 0) << old.output;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "toml" / "torchtitan.toml"));
  const CliRun bad = run("export " + plan("hier-striped-4") + " --to torchtitan --torchtitan-format yaml --out " +
                         (dir_ / "bad").string());
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("unknown torchtitan format"), std::string::npos) << bad.output;
  const CliRun misplaced = run("export " + plan("hier-striped-4") + " --to megatron --trace t.safetensors --out " +
                               (dir_ / "m").string());
  EXPECT_EQ(misplaced.exit_code, 2) << misplaced.output;
  EXPECT_NE(misplaced.output.find("--to chakra only"), std::string::npos) << misplaced.output;
}

TEST_F(ExportCommand, RefusesBadInput) {
  const CliRun no_out = run("export " + plan("hier-striped-4") + " --to megatron");
  EXPECT_EQ(no_out.exit_code, 2);
  EXPECT_NE(no_out.output.find("--out"), std::string::npos) << no_out.output;
  const CliRun bad_target = run("export " + plan("hier-striped-4") + " --to deepspeed --out " + dir_.string());
  EXPECT_EQ(bad_target.exit_code, 2);
  EXPECT_NE(bad_target.output.find("unknown export target"), std::string::npos) << bad_target.output;
  const CliRun chakra = run("export " + plan("hier-striped-4") + " --to chakra --out " + (dir_ / "c").string());
  EXPECT_EQ(chakra.exit_code, 2);
  EXPECT_NE(chakra.output.find("--trace"), std::string::npos) << chakra.output;

  // A plan whose ring order names a rank its cluster does not have.
  const auto bad_plan = dir_ / "bad.yaml";
  std::ifstream in(plan("hier-striped-4"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.replace(text.find("order: [0, 1, 2, 3]"), 19, "order: [0, 1, 2, 9]");
  text.replace(text.find("cluster: test-2x2"), 17,
               "cluster: " + std::string(SPARSERING_SOURCE_DIR) + "/tests/tuner/data/clusters/test-2x2.yaml");
  text.replace(text.find("model: ../../../../configs"), 26, "model: " + std::string(SPARSERING_SOURCE_DIR) + "/configs");
  std::ofstream(bad_plan) << text;
  const CliRun bad = run("export " + bad_plan.string() + " --to torch --out " + (dir_ / "b").string());
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("9"), std::string::npos) << bad.output;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "b" / "plan.json"));
}

}  // namespace
