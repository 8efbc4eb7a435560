// Synthetic traces: valid, shaped by the prior (kept counts = budgets at the budget recall),
// realistic in aggregate (Qwen2.5-3B at 512K: ~95% tile sparsity), drifting steadily over the
// samples when asked, reproducible per seed and independent of the thread count.
#include "traces/synth/synthetic_trace.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "common/error.hpp"
#include "traces/recall.hpp"
#include "traces/safetensors_trace.hpp"
#include "traces/synth/mass_profile.hpp"
#include "traces/trace_summary.hpp"
#include "tests/common/test_seed.hpp"

namespace sparsering {
namespace {

const std::filesystem::path kSparsity = std::filesystem::path(SPARSERING_SOURCE_DIR) / "configs" / "sparsity";

SparsityPrior tiny_prior() {
  SparsityPrior p;
  p.name = "tiny";
  p.model = "Tiny";
  p.source = "test";
  p.score_kind = "recall";
  p.layers = 3;
  p.q_heads = 4;
  for (int64_t i = 0; i < 12; ++i) p.budgets.push_back({10 + 7 * i, 20 + 11 * i, 0.9});
  return p;
}

SynthSettings tiny_settings(uint64_t seed) {
  SynthSettings s;
  s.model = "tiny";
  s.layers = 3;
  s.q_heads = 4;
  s.kv_heads = 2;
  s.seq_len_tokens = 4096;
  s.samples = 2;
  s.seed = seed;
  s.vertical_slots = 256;
  s.slash_slots = 320;
  s.prior = tiny_prior();
  s.budget_reference_tokens = 4096;
  return s;
}

TEST(SyntheticTrace, ValidWithSinksAndDiagonalFirst) {
  const Trace t = synthesize_trace(tiny_settings(sparsering::testing_support::test_seed()));
  EXPECT_NO_THROW(validate_trace(t));
  EXPECT_EQ(t.samples, 2);
  EXPECT_EQ(t.layers, 3);
  EXPECT_EQ(t.heads, 4);
  EXPECT_EQ(t.vertical_candidates, 256);
  EXPECT_EQ(t.slash_candidates, 320);
  EXPECT_EQ(t.metadata.source, "synthetic");
  EXPECT_EQ(t.metadata.provenance.at("prior"), "tiny");
  for (int64_t s = 0; s < 2; ++s) {
    for (int64_t l = 0; l < 3; ++l) {
      for (int64_t h = 0; h < 4; ++h) {
        EXPECT_EQ(t.verticals(s, l, h)[0], 0) << "token 0 is the strongest sink";
        EXPECT_EQ(t.slashes(s, l, h)[0], 0) << "the main diagonal is the strongest slash";
        EXPECT_EQ(t.verticals(s, l, h).back() >= 0, true) << "all slots real";
        double sum = 0.0;
        for (const float m : t.vertical_masses(s, l, h)) sum += static_cast<double>(m);
        EXPECT_GT(sum, 0.4);
        EXPECT_LE(sum, 1.0);
      }
    }
  }
}

TEST(SyntheticTrace, KeptCountsEqualThePublishedBudgetsAtTheReferenceLength) {
  SynthSettings s;
  s.model = "qwen2.5-3b";
  s.layers = 36;
  s.q_heads = 16;
  s.kv_heads = 2;
  s.seq_len_tokens = 131072;  // the reference length: budgets apply unscaled
  s.samples = 1;
  s.seed = sparsering::testing_support::test_seed();
  s.step_variation = 0.0;
  s.prior = load_sparsity_prior(kSparsity / "qwen2.5-3b.yaml");
  const Trace t = synthesize_trace(s);
  RecallSettings r;
  r.recall = 0.95;
  r.max_verticals = r.max_slashes = 1 << 20;
  for (int64_t l = 0; l < 36; ++l) {
    for (int64_t h = 0; h < 16; ++h) {
      const KeptCounts kept = kept_counts(t, 0, l, h, r);
      EXPECT_EQ(kept.verticals, s.prior.at(l, h).vertical_budget) << "layer " << l << " head " << h;
      EXPECT_EQ(kept.slashes, s.prior.at(l, h).slash_budget) << "layer " << l << " head " << h;
    }
  }
  // A lower recall keeps fewer, a higher one more.
  r.recall = 0.9;
  const KeptCounts fewer = kept_counts(t, 0, 0, 0, r);
  EXPECT_LT(fewer.slashes, s.prior.at(0, 0).slash_budget);
  r.recall = 0.99;
  const KeptCounts more = kept_counts(t, 0, 0, 0, r);
  EXPECT_GT(more.slashes, s.prior.at(0, 0).slash_budget);
}

TEST(SyntheticTrace, KeptCountsFollowScaledBudgetsWithStepVariation) {
  SynthSettings s = tiny_settings(sparsering::testing_support::test_seed());
  s.seq_len_tokens = 16384;  // 4x the reference: budgets double (exponent 0.5)
  s.samples = 4;
  s.vertical_slots = s.slash_slots = 1024;
  EXPECT_DOUBLE_EQ(scaled_budget(s, 100), 200.0);
  const Trace t = synthesize_trace(s);
  RecallSettings r;
  r.max_verticals = r.max_slashes = 1 << 20;
  double log_ratio_sum = 0.0;
  int count = 0;
  for (int64_t sample = 0; sample < 4; ++sample) {
    for (int64_t l = 0; l < 3; ++l) {
      for (int64_t h = 0; h < 4; ++h) {
        const KeptCounts kept = kept_counts(t, sample, l, h, r);
        const double target = scaled_budget(s, s.prior.at(l, h).slash_budget);
        const double ratio = static_cast<double>(kept.slashes) / target;
        // exp(0.15 z) with |z| < 5: within a factor 2.2 either way.
        EXPECT_GT(ratio, 0.45);
        EXPECT_LT(ratio, 2.2);
        log_ratio_sum += std::log(ratio);
        ++count;
      }
    }
  }
  EXPECT_NEAR(log_ratio_sum / count, 0.0, 0.15);
}

TEST(SyntheticTrace, DriftMovesEachHeadsBudgetsSteadilyAcrossTheSamples) {
  SynthSettings s = tiny_settings(sparsering::testing_support::test_seed());
  s.seq_len_tokens = 16384;
  s.samples = 3;
  s.step_variation = 0.0;  // only the trend moves the budgets
  s.vertical_slots = s.slash_slots = 1024;
  RecallSettings r;
  r.max_verticals = r.max_slashes = 1 << 20;
  const Trace flat = synthesize_trace(s);
  s.drift = 1.0;
  const Trace drifting = synthesize_trace(s);
  EXPECT_EQ(drifting.metadata.provenance.at("drift"), "1");
  int moved = 0;
  for (int64_t l = 0; l < 3; ++l) {
    for (int64_t h = 0; h < 4; ++h) {
      for (const bool verticals : {false, true}) {
        const auto count = [&](const Trace& t, int64_t sample) {
          const KeptCounts kept = kept_counts(t, sample, l, h, r);
          return verticals ? kept.verticals : kept.slashes;
        };
        // Without drift every sample keeps the same; with it the first sample is unchanged and
        // the counts move one way.
        EXPECT_EQ(count(flat, 0), count(flat, 2));
        EXPECT_EQ(count(drifting, 0), count(flat, 0));
        const int64_t c0 = count(drifting, 0);
        const int64_t c1 = count(drifting, 1);
        const int64_t c2 = count(drifting, 2);
        EXPECT_GE((c1 - c0) * (c2 - c1), 0) << "layer " << l << " head " << h;
        moved += std::abs(std::log(static_cast<double>(c2) / static_cast<double>(c0))) > 0.1 ? 1 : 0;
      }
    }
  }
  EXPECT_GE(moved, 12);  // of 24: |y| > 0.1 for 92% of heads
}

TEST(SyntheticTrace, ReproduciblePerSeedDifferentAcrossSeedsAndSamples) {
  const uint64_t seed = sparsering::testing_support::test_seed();
  const std::string a = serialize_trace(synthesize_trace(tiny_settings(seed)));
  EXPECT_EQ(a, serialize_trace(synthesize_trace(tiny_settings(seed))));
  EXPECT_NE(a, serialize_trace(synthesize_trace(tiny_settings(seed + 1))));
  const Trace t = synthesize_trace(tiny_settings(seed));
  const auto v0 = t.verticals(0, 1, 2), v1 = t.verticals(1, 1, 2);
  EXPECT_FALSE(std::equal(v0.begin(), v0.end(), v1.begin())) << "samples (steps) differ";
}

TEST(SyntheticTrace, ThreadCountDoesNotChangeTheResult) {
  SynthSettings s = tiny_settings(sparsering::testing_support::test_seed());
  s.samples = 3;
  s.threads = 1;
  const std::string one = serialize_trace(synthesize_trace(s));
  for (const int threads : {2, 3, 7}) {
    s.threads = threads;
    EXPECT_EQ(one, serialize_trace(synthesize_trace(s))) << threads << " threads";
  }
}

TEST(SyntheticTrace, ResamplesAPriorOntoABiggerModel) {
  SynthSettings s;
  s.model = "llama-3.1-70b";
  s.layers = 80;
  s.q_heads = 64;
  s.kv_heads = 8;
  s.seq_len_tokens = 8192;
  s.vertical_slots = s.slash_slots = 64;
  s.seed = 5;
  s.prior = load_sparsity_prior(kSparsity / "llama-3.1-8b.yaml");
  const Trace t = synthesize_trace(s);
  EXPECT_EQ(t.layers, 80);
  EXPECT_EQ(t.heads, 64);
  EXPECT_NE(t.metadata.provenance.at("prior_resampled").find("onto 80 x 64"), std::string::npos);
}

TEST(SyntheticTrace, ShortSequencesClampTheSlots) {
  SynthSettings s = tiny_settings(3);
  s.seq_len_tokens = 16;
  const Trace t = synthesize_trace(s);
  EXPECT_EQ(t.vertical_candidates, 16);
  EXPECT_EQ(t.slash_candidates, 16);
  EXPECT_NO_THROW(validate_trace(t));
}

TEST(SyntheticTrace, Qwen512KHasAboutTheReportedSparsity) {
  // MTraining reports ~95% sparsity for Qwen2.5-3B at 512K tokens, 87-99.6% by layer.
  SynthSettings s;
  s.model = "qwen2.5-3b";
  s.layers = 36;
  s.q_heads = 16;
  s.kv_heads = 2;
  s.seq_len_tokens = 524288;
  s.samples = 1;
  s.seed = 7;
  s.prior = load_sparsity_prior(kSparsity / "qwen2.5-3b.yaml");
  const TraceSummary summary = summarize_trace(synthesize_trace(s), SummarySettings{});
  EXPECT_GT(1.0 - summary.tile_density, 0.93);
  EXPECT_LT(1.0 - summary.tile_density, 0.97);
  double densest = 0.0, sparsest = 1.0;
  for (const auto& layer : summary.layer_summaries) {
    densest = std::max(densest, layer.tile_density);
    sparsest = std::min(sparsest, layer.tile_density);
  }
  EXPECT_GT(densest, 0.08);   // some layer below 92% sparsity
  EXPECT_LT(sparsest, 0.02);  // some layer above 98%
}

double estimate_part(const SynthMemoryEstimate& e, const std::string& prefix) {
  for (const MemoryEstimatePart& p : e.parts) {
    if (p.name.rfind(prefix, 0) == 0) return p.bytes;
  }
  ADD_FAILURE() << "no part " << prefix;
  return -1.0;
}

TEST(SyntheticTrace, MemoryEstimateCountsTheTensorsItAllocates) {
  SynthSettings s = tiny_settings(1);
  s.threads = 1;
  const Trace t = synthesize_trace(s);
  const double tensors = 4.0 * static_cast<double>(t.vertical_index.size() + t.vertical_mass.size() +
                                                   t.slash_offset.size() + t.slash_mass.size());
  const SynthMemoryEstimate e = estimate_synth_memory(s);
  EXPECT_DOUBLE_EQ(estimate_part(e, "trace tensors"), tensors);
  EXPECT_DOUBLE_EQ(estimate_part(e, "process"), kProcessBaseBytes);
  // 4096 tokens: a bitmap of 512 bytes, plus one head's 320 slash offsets being checked.
  EXPECT_DOUBLE_EQ(estimate_part(e, "validation"), 512.0 + 4.0 * 320);
  EXPECT_DOUBLE_EQ(estimate_part(e, "resampled prior"), 3 * 4 * 16.0);
  double sum = 0.0;
  for (const MemoryEstimatePart& p : e.parts) sum += p.bytes;
  EXPECT_DOUBLE_EQ(e.bytes, sum);
  for (size_t i = 1; i < e.parts.size(); ++i) EXPECT_GE(e.parts[i - 1].bytes, e.parts[i].bytes);
}

TEST(SyntheticTrace, MemoryEstimateScalesWithWorkersUpToTheTasks) {
  SynthSettings s = tiny_settings(1);  // 2 samples x 3 layers: 6 tasks
  s.threads = 1;
  const double one = estimate_part(estimate_synth_memory(s), "worker scratch");
  s.threads = 3;
  EXPECT_DOUBLE_EQ(estimate_part(estimate_synth_memory(s), "worker scratch"), 3.0 * one);
  s.threads = 100;
  EXPECT_DOUBLE_EQ(estimate_part(estimate_synth_memory(s), "worker scratch"), 6.0 * one);
}

TEST(SyntheticTrace, MemoryEstimateAtTheLongestSequence) {
  // Beyond 2^26 tokens distinct positions use hash sets and the duplicate check sorts: no bitmap.
  SynthSettings s = tiny_settings(1);
  s.seq_len_tokens = (int64_t{1} << 31) - 1;
  s.samples = 4096;
  const SynthMemoryEstimate e = estimate_synth_memory(s);
  EXPECT_DOUBLE_EQ(estimate_part(e, "validation"), 4.0 * 320);
  // Documents of log-uniform length in [1024, 131072] tokens: mean 130048 / ln 128 tokens.
  const double documents = static_cast<double>(s.seq_len_tokens) / (130048.0 / std::log(128.0)) + 1.0;
  EXPECT_NEAR(estimate_part(e, "document starts"), 4096 * 2 * 8 * documents, 1.0);
}

TEST(SyntheticTrace, BadSettingsAreInputErrors) {
  auto error_of = [](SynthSettings s) {
    try {
      validate_synth_settings(s);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error_of(tiny_settings(1)), "");
  const std::pair<void (*)(SynthSettings&), const char*> cases[] = {
      {[](SynthSettings& s) { s.layers = 0; }, "layers"},
      {[](SynthSettings& s) { s.kv_heads = 3; }, "kv_heads"},
      {[](SynthSettings& s) { s.seq_len_tokens = 8; }, "seq_len"},
      {[](SynthSettings& s) { s.samples = 0; }, "samples"},
      {[](SynthSettings& s) { s.vertical_slots = 2; }, "vertical slots"},
      {[](SynthSettings& s) { s.budget_recall = 1.0; }, "budget recall"},
      {[](SynthSettings& s) { s.budget_length_exponent = -1; }, "exponent"},
      {[](SynthSettings& s) { s.step_variation = 2; }, "step variation"},
      {[](SynthSettings& s) { s.drift = 2.5; }, "drift"},
      {[](SynthSettings& s) { s.prior.budgets.pop_back(); }, "prior"},
      {[](SynthSettings& s) {
         s.samples = 4000;
         s.seq_len_tokens = 1 << 30;
         s.vertical_slots = 1 << 20;
       },
       "GiB"},
  };
  for (const auto& [breaks, needle] : cases) {
    SynthSettings s = tiny_settings(1);
    breaks(s);
    EXPECT_NE(error_of(s).find(needle), std::string::npos) << needle << ": " << error_of(s);
  }
}

}  // namespace
}  // namespace sparsering
