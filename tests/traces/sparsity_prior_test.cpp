// Sparsity priors: the shipped files hold the published budgets; bad files name the key path;
// resampling maps layers by relative depth.
#include "traces/sparsity_prior.hpp"

#include <gtest/gtest.h>

#include <map>

#include "common/error.hpp"

namespace sparsering {
namespace {

const std::filesystem::path kSparsity = std::filesystem::path(SPARSERING_SOURCE_DIR) / "configs" / "sparsity";

TEST(SparsityPrior, ShippedPriorsLoad) {
  struct Expected {
    const char* name;
    int64_t layers, heads;
    const char* score_kind;
  };
  for (const Expected e : {Expected{"qwen2.5-3b", 36, 16, "recall"}, Expected{"llama-3.1-8b", 32, 32, "recall"},
                           Expected{"llama-3-8b-262k", 32, 32, "raw"}, Expected{"qwen2.5-7b", 28, 28, "recall"}}) {
    const SparsityPrior prior = load_sparsity_prior(kSparsity / (std::string(e.name) + ".yaml"));
    EXPECT_EQ(prior.name, e.name);
    EXPECT_EQ(prior.layers, e.layers);
    EXPECT_EQ(prior.q_heads, e.heads);
    EXPECT_EQ(prior.score_kind, e.score_kind);
    EXPECT_EQ(static_cast<int64_t>(prior.budgets.size()), e.layers * e.heads);
    EXPECT_NE(prior.source.find("MInference"), std::string::npos);
    EXPECT_TRUE(prior.resampled_from.empty());
  }
}

TEST(SparsityPrior, QwenBudgetsMatchThePublishedCounts) {
  // docs/algorithm.md section 2: (1000, 6096) on 310 heads, (3500, 100) on 107, (30, 800) on 96,
  // (100, 800) on 44, (500, 700) on 17 (and (100, 750) on the remaining 2).
  const SparsityPrior prior = load_sparsity_prior(kSparsity / "qwen2.5-3b.yaml");
  std::map<std::pair<int64_t, int64_t>, int> counts;
  for (const auto& b : prior.budgets) ++counts[{b.vertical_budget, b.slash_budget}];
  EXPECT_EQ((counts[{1000, 6096}]), 310);
  EXPECT_EQ((counts[{3500, 100}]), 107);
  EXPECT_EQ((counts[{30, 800}]), 96);
  EXPECT_EQ((counts[{100, 800}]), 44);
  EXPECT_EQ((counts[{500, 700}]), 17);
  EXPECT_EQ((counts[{100, 750}]), 2);
  // Spot values from the source file.
  EXPECT_EQ(prior.at(0, 12).vertical_budget, 30);
  EXPECT_EQ(prior.at(0, 12).slash_budget, 800);
  EXPECT_DOUBLE_EQ(prior.at(0, 0).score, 0.9872);
  EXPECT_EQ(prior.at(33, 7).vertical_budget, 3500);
  for (const auto& b : prior.budgets) {
    EXPECT_GE(b.score, 0.0);
    EXPECT_LE(b.score, 1.0);
  }
}

std::string error_of(const std::string& yaml) {
  try {
    parse_sparsity_prior(yaml, "p.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const char* kGood = R"(
name: tiny
model: Tiny
source: test
score_kind: recall
layers: 2
q_heads: 2
budgets:
  - [[10, 20, 0.9], [30, 40, 0.95]]
  - [[1, 2, 1.0], [0, 0, 0.0]]
)";

TEST(SparsityPrior, ParsesAndNamesKeyPaths) {
  EXPECT_EQ(error_of(kGood), "");
  const SparsityPrior p = parse_sparsity_prior(kGood, "p.yaml");
  EXPECT_EQ(p.at(0, 1).slash_budget, 40);
  EXPECT_EQ(p.at(1, 0).vertical_budget, 1);
  auto replaced = [](std::string from, std::string to) {
    std::string yaml = kGood;
    yaml.replace(yaml.find(from), from.size(), to);
    return yaml;
  };
  const std::pair<std::string, std::string> cases[] = {
      {replaced("[30, 40, 0.95]", "[30, -40, 0.95]"),
       "p.yaml: budgets[0][1][1] must be an integer in [0, 2147483647], got -40"},
      {replaced("[30, 40, 0.95]", "[30, 40, 1.5]"), "budgets[0][1][2] is a recall"},
      {replaced("[30, 40, 0.95]", "[30, 40]"), "budgets[0][1] must be [vertical_budget, slash_budget, score]"},
      {replaced("[30, 40, 0.95]", "[30, x, 0.95]"), "budgets[0][1][1] must be an integer"},
      {replaced("[[1, 2, 1.0], [0, 0, 0.0]]", "[[1, 2, 1.0]]"), "budgets[1] must be a list of 2 heads"},
      {replaced("layers: 2", "layers: 3"), "budgets has 2 layers, but layers is 3"},
      {replaced("layers: 2", "layers: 0"), "layers must be an integer in [1, 4096]"},
      {replaced("name: tiny", "name: ti/ny"), "name must be"},
      {replaced("name: tiny", "nmae: tiny"), "unknown key nmae (did you mean name?)"},
      {replaced("score_kind: recall", "score_kind: maybe"), "score_kind must be one of recall, raw; got \"maybe\""},
      {replaced("source: test\n", ""), "source is required"},
      {"budgets: [", "YAML syntax error"},
      {"- 1\n- 2\n", "the top level must be a mapping, got a sequence"},
  };
  for (const auto& [yaml, needle] : cases) {
    const std::string message = error_of(yaml);
    EXPECT_NE(message.find(needle), std::string::npos) << "expected '" << needle << "', got '" << message << "'";
  }
  EXPECT_EQ(error_of(replaced("score_kind: recall", "score_kind: raw")), "");
  EXPECT_THROW(load_sparsity_prior(kSparsity / "no-such-prior.yaml"), InputError);
}

TEST(SparsityPrior, ResamplingByRelativeDepth) {
  const SparsityPrior prior = load_sparsity_prior(kSparsity / "llama-3.1-8b.yaml");
  EXPECT_TRUE(resample_prior(prior, 32, 32, 1).resampled_from.empty());
  const SparsityPrior big = resample_prior(prior, 80, 64, 7);
  EXPECT_EQ(big.layers, 80);
  EXPECT_EQ(big.q_heads, 64);
  ASSERT_EQ(big.budgets.size(), 80u * 64u);
  EXPECT_NE(big.resampled_from.find("llama-3.1-8b (32 layers x 32 heads) onto 80 x 64"), std::string::npos);
  // Every head of target layer l comes from prior layer round(l * 31 / 79).
  for (int64_t l = 0; l < 80; ++l) {
    const int64_t source = (l * 31 * 2 + 79) / (79 * 2);
    for (int64_t h = 0; h < 64; ++h) {
      const HeadBudget& b = big.at(l, h);
      bool found = false;
      for (int64_t sh = 0; sh < 32 && !found; ++sh) {
        const HeadBudget& s = prior.at(source, sh);
        found = s.vertical_budget == b.vertical_budget && s.slash_budget == b.slash_budget && s.score == b.score;
      }
      EXPECT_TRUE(found) << "layer " << l << " head " << h;
    }
  }
  // Same head count: heads keep their index; deterministic per seed.
  const SparsityPrior deeper = resample_prior(prior, 64, 32, 3);
  for (int64_t h = 0; h < 32; ++h) EXPECT_EQ(deeper.at(63, h).score, prior.at(31, h).score);
  EXPECT_EQ(deeper.at(0, 5).score, prior.at(0, 5).score);
  const SparsityPrior again = resample_prior(prior, 80, 64, 7);
  for (size_t i = 0; i < big.budgets.size(); ++i) EXPECT_EQ(big.budgets[i].score, again.budgets[i].score);
  const SparsityPrior single = resample_prior(prior, 1, 32, 3);
  EXPECT_EQ(single.at(0, 4).score, prior.at(0, 4).score);
  EXPECT_THROW(resample_prior(prior, 0, 32, 3), InputError);
}

}  // namespace
}  // namespace sparsering
