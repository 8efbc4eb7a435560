// The synthetic trace generator (model and guarantees in synthetic_trace.hpp). Work is split over
// (sample, layer) tasks; each head draws only from streams keyed by its own coordinates, so the
// output does not depend on the order the tasks run in.
#include "traces/synth/synthetic_trace.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "traces/synth/candidate_positions.hpp"
#include "traces/synth/mass_profile.hpp"
#include "traces/synth/prng.hpp"

namespace sparsering {
namespace {

using synth::derive_seed;
using synth::SplitMix64;

// Stream purposes: part of every derived seed so two purposes never share a stream.
enum Purpose : uint64_t { kHeadShape = 1, kLayerShape, kBands, kDocuments, kPool, kHeadSample, kDrift };

constexpr double kPeriodicHeadShare = 0.15;
constexpr double kBandReplaceShare = 0.25;  // bands redrawn per sample
constexpr int64_t kMinDocumentTokens = 1024;
constexpr int64_t kMaxDocumentTokens = 131072;
// Beyond this sequence length, distinct positions are drawn with a hash set instead of a bitmap
// (traces/synth/candidate_positions.cpp) and duplicates found by sorting (traces/trace.cpp).
constexpr int64_t kBitmapLimitTokens = int64_t{1} << 26;

// Calibration of the band width (tokens): log-uniform in this range, times a per-layer factor.
// Narrow bands spread the kept diagonals over more kernel tiles (lower tile sparsity).
constexpr double kBandWidthMin = 4.0;
constexpr double kBandWidthMax = 64.0;
constexpr double kLayerBandFactorMin = 0.4;
constexpr double kLayerBandFactorMax = 2.5;

struct HeadShape {
  int64_t sinks = 1;               // attention sinks at positions 0..sinks-1
  double sink_share = 0.4;         // share of the kept vertical mass on the sinks
  double vertical_exponent = 0.8;  // power-law exponent of the kept verticals' masses
  double vertical_total = 0.8;     // mass the vertical candidates capture
  double window_share = 0.3;       // share of the kept slashes in the local window
  double band_width = 8.0;         // mean diagonals per distant band
  double band_decay = 0.5;         // band weight ~ (offset / window)^-decay
  int64_t period = 0;              // > 0: bands at multiples of this offset
  double diagonal_share = 0.15;    // share of the kept slash mass on offset 0
  double slash_exponent = 0.7;
  double slash_total = 0.8;
};

HeadShape head_shape(const SynthSettings& s, int64_t layer, int64_t head) {
  SplitMix64 layer_rng(derive_seed({s.seed, kLayerShape, static_cast<uint64_t>(layer)}));
  const double layer_band_factor = layer_rng.log_uniform(kLayerBandFactorMin, kLayerBandFactorMax);
  SplitMix64 rng(derive_seed({s.seed, kHeadShape, static_cast<uint64_t>(layer), static_cast<uint64_t>(head)}));
  HeadShape shape;
  const double u = rng.uniform();  // sinks: mostly token 0 alone or the first four tokens
  shape.sinks = u < 0.45 ? 1 : u < 0.6 ? 2 : u < 0.7 ? 3 : 4;
  shape.sink_share = rng.uniform(0.2, 0.7);
  shape.vertical_exponent = rng.uniform(0.5, 1.1);
  shape.vertical_total = rng.uniform(0.55, 0.95);
  shape.window_share = rng.uniform(0.1, 0.6);
  shape.band_width = rng.log_uniform(kBandWidthMin, kBandWidthMax) * layer_band_factor;
  shape.band_decay = rng.uniform(0.3, 1.0);
  const bool periodic = rng.uniform() < kPeriodicHeadShare;
  const double period = rng.log_uniform(128.0, 8192.0);
  shape.period = periodic ? static_cast<int64_t>(period) : 0;
  shape.diagonal_share = rng.uniform(0.05, 0.3);
  shape.slash_exponent = rng.uniform(0.4, 1.0);
  shape.slash_total = rng.uniform(0.55, 0.95);
  return shape;
}

int64_t clamp_target(double target, int64_t slots, double recall) {
  const double share = synth::max_core_share(recall);
  const auto most = std::max<int64_t>(1, static_cast<int64_t>(std::floor(share * static_cast<double>(slots))));
  if (!(target >= 1.0)) return 1;
  return std::min(most, static_cast<int64_t>(std::llround(target)));
}

struct LayerContext {
  const SynthSettings& settings;
  const SparsityPrior& prior;
  int64_t vertical_slots;  // Kv after clamping to N
  int64_t slash_slots;
  Trace& trace;
};

void write_head(Trace& trace, int64_t sample, int64_t layer, int64_t head,
                const std::vector<int32_t>& vertical_positions, const std::vector<double>& vertical_masses,
                const std::vector<int32_t>& slash_offsets, const std::vector<double>& slash_masses) {
  const auto v0 = static_cast<size_t>(trace.head_offset(sample, layer, head, trace.vertical_candidates));
  for (size_t i = 0; i < vertical_positions.size(); ++i) {
    trace.vertical_index[v0 + i] = vertical_positions[i];
    trace.vertical_mass[v0 + i] = static_cast<float>(vertical_masses[i]);
  }
  const auto s0 = static_cast<size_t>(trace.head_offset(sample, layer, head, trace.slash_candidates));
  for (size_t i = 0; i < slash_offsets.size(); ++i) {
    trace.slash_offset[s0 + i] = slash_offsets[i];
    trace.slash_mass[s0 + i] = static_cast<float>(slash_masses[i]);
  }
}

void synthesize_layer(const LayerContext& ctx, int64_t sample, int64_t layer, const std::vector<int64_t>& doc_starts) {
  const SynthSettings& s = ctx.settings;
  const int64_t n = s.seq_len_tokens;
  const int64_t kv_heads = s.kv_heads > 0 ? s.kv_heads : s.q_heads;
  const int64_t group_size = s.q_heads / kv_heads;
  const auto us = static_cast<uint64_t>(sample);
  const auto ul = static_cast<uint64_t>(layer);
  // Heavy keys are a property of the keys, so the heads of one KV group draw from one pool.
  const int64_t pool_size = std::min(n - 1, ctx.vertical_slots + ctx.vertical_slots / 2 + 4);
  std::vector<int32_t> pool;
  for (int64_t head = 0; head < s.q_heads; ++head) {
    const auto uh = static_cast<uint64_t>(head);
    if (head % group_size == 0) {
      SplitMix64 pool_rng(derive_seed({s.seed, kPool, us, ul, static_cast<uint64_t>(head / group_size)}));
      pool = synth::heavy_key_pool(pool_rng, n, pool_size, doc_starts);
    }
    const HeadShape shape = head_shape(s, layer, head);
    const HeadBudget& budget = ctx.prior.at(layer, head);
    SplitMix64 rng(derive_seed({s.seed, kHeadSample, us, ul, uh}));
    // Drift: each head's budgets move along a direction of its own from the first sample to the
    // last (its own stream, so drift 0 leaves every other draw as it was).
    SplitMix64 drift_rng(derive_seed({s.seed, kDrift, ul, uh}));
    const double progress = s.samples > 1 ? static_cast<double>(sample) / static_cast<double>(s.samples - 1) : 0.0;
    const double vertical_drift = std::exp(s.drift * progress * drift_rng.normal());
    const double slash_drift = std::exp(s.drift * progress * drift_rng.normal());
    const double vertical_jitter = std::exp(s.step_variation * rng.normal()) * vertical_drift;
    const double slash_jitter = std::exp(s.step_variation * rng.normal()) * slash_drift;

    // Verticals: sinks first, then this head's view of the group's heavy keys.
    const int64_t vertical_target =
        clamp_target(scaled_budget(s, budget.vertical_budget) * vertical_jitter, ctx.vertical_slots, s.budget_recall);
    const int64_t sinks = std::min(shape.sinks, vertical_target);
    std::vector<int32_t> vertical_positions;
    vertical_positions.reserve(static_cast<size_t>(ctx.vertical_slots));
    for (int64_t p = 0; p < sinks; ++p) vertical_positions.push_back(static_cast<int32_t>(p));
    const auto heavy = synth::head_heavy_keys(rng, pool, sinks, ctx.vertical_slots - sinks, 0.3);
    vertical_positions.insert(vertical_positions.end(), heavy.begin(), heavy.end());
    synth::ProfileShape vertical_profile;
    vertical_profile.slots = static_cast<int64_t>(vertical_positions.size());
    vertical_profile.core = std::min(vertical_target, vertical_profile.slots);
    vertical_profile.boosted = sinks;
    vertical_profile.boost_share = shape.sink_share;
    vertical_profile.exponent = shape.vertical_exponent;
    vertical_profile.recall = s.budget_recall;
    vertical_profile.total = std::min(0.99, shape.vertical_total * rng.uniform(0.95, 1.05));
    const auto vertical_masses = synth::mass_profile(vertical_profile);

    // Slashes: local window and distant bands, then weak diagonals anywhere.
    const int64_t slash_target =
        clamp_target(scaled_budget(s, budget.slash_budget) * slash_jitter, ctx.slash_slots, s.budget_recall);
    const int64_t window =
        std::clamp<int64_t>(std::llround(shape.window_share * static_cast<double>(slash_target)), 1, slash_target);
    SplitMix64 band_rng(derive_seed({s.seed, kBands, ul, uh}));  // same bands in every sample...
    int64_t band_index = 0;
    auto next_band = [&]() {
      ++band_index;
      synth::DiagonalCluster band;
      band.width = std::max<int64_t>(1, std::llround(shape.band_width * std::exp(0.5 * band_rng.normal())));
      const double lo = static_cast<double>(window + band.width);
      const double hi = static_cast<double>(std::max<int64_t>(n, window + band.width + 1));
      double center = shape.period > 0 ? static_cast<double>(band_index * shape.period) : band_rng.log_uniform(lo, hi);
      if (shape.period > 0 && center >= static_cast<double>(n)) center = band_rng.log_uniform(lo, hi);
      const double base_noise = band_rng.normal();
      if (rng.uniform() < kBandReplaceShare) center = rng.log_uniform(lo, hi);  // ...except these
      band.center = static_cast<int64_t>(center);
      band.weight = 0.6 * std::pow(std::max(1.0, center / static_cast<double>(window)), -shape.band_decay) *
                    std::exp(0.4 * base_noise);
      return band;
    };
    auto slash_offsets = synth::slash_core(n, window, slash_target, next_band);
    std::vector<int32_t> core_sorted = slash_offsets;
    std::sort(core_sorted.begin(), core_sorted.end());
    const auto weak =
        synth::sample_distinct(rng, 1, n, ctx.slash_slots - static_cast<int64_t>(slash_offsets.size()), core_sorted);
    slash_offsets.insert(slash_offsets.end(), weak.begin(), weak.end());
    synth::ProfileShape slash_profile;
    slash_profile.slots = static_cast<int64_t>(slash_offsets.size());
    slash_profile.core = std::min(slash_target, slash_profile.slots);
    slash_profile.boosted = 1;
    slash_profile.boost_share = shape.diagonal_share;
    slash_profile.exponent = shape.slash_exponent;
    slash_profile.recall = s.budget_recall;
    slash_profile.total = std::min(0.99, shape.slash_total * rng.uniform(0.95, 1.05));
    const auto slash_masses = synth::mass_profile(slash_profile);

    write_head(ctx.trace, sample, layer, head, vertical_positions, vertical_masses, slash_offsets, slash_masses);
  }
}

/// Worker threads of synthesize_trace: one per (sample, layer) task at most.
int64_t worker_count(const SynthSettings& settings) {
  const int64_t hardware = std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()));
  return std::clamp<int64_t>(settings.threads > 0 ? settings.threads : hardware, 1, settings.samples * settings.layers);
}

std::string format_double(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace

void validate_synth_settings(const SynthSettings& s) {
  require(s.layers >= 1 && s.layers <= 4096, "synth: layers must be in [1, 4096], got ", s.layers);
  require(s.q_heads >= 1 && s.q_heads <= 4096, "synth: q_heads must be in [1, 4096], got ", s.q_heads);
  require(s.kv_heads >= 0 && (s.kv_heads == 0 || s.q_heads % s.kv_heads == 0), "synth: kv_heads must divide q_heads (",
          s.q_heads, "), got ", s.kv_heads);
  require(s.seq_len_tokens >= 16 && s.seq_len_tokens <= (int64_t{1} << 31) - 1,
          "synth: seq_len must be in [16, 2^31) tokens, got ", s.seq_len_tokens);
  require(s.samples >= 1 && s.samples <= 4096, "synth: samples must be in [1, 4096], got ", s.samples);
  require(s.vertical_slots >= 4 && s.vertical_slots <= (1 << 20), "synth: vertical slots must be in [4, 2^20], got ",
          s.vertical_slots);
  require(s.slash_slots >= 4 && s.slash_slots <= (1 << 20), "synth: slash slots must be in [4, 2^20], got ",
          s.slash_slots);
  require(s.last_q >= 1 && s.block_q >= 1 && s.block_k >= 1, "synth: last_q and block sizes must be >= 1");
  require(s.budget_recall >= 0.5 && s.budget_recall <= 0.999, "synth: budget recall must be in [0.5, 0.999], got ",
          s.budget_recall);
  require(s.budget_reference_tokens >= 1, "synth: budget reference length must be >= 1 token, got ",
          s.budget_reference_tokens);
  require(s.budget_length_exponent >= 0.0 && s.budget_length_exponent <= 1.0,
          "synth: budget length exponent must be in [0, 1], got ", s.budget_length_exponent);
  require(s.step_variation >= 0.0 && s.step_variation <= 1.0, "synth: step variation must be in [0, 1], got ",
          s.step_variation);
  require(s.drift >= 0.0 && s.drift <= 2.0, "synth: drift must be in [0, 2], got ", s.drift);
  require(s.threads >= 0 && s.threads <= 1024, "synth: threads must be in [0, 1024], got ", s.threads);
  require(s.prior.layers >= 1 && s.prior.q_heads >= 1 &&
              static_cast<int64_t>(s.prior.budgets.size()) == s.prior.layers * s.prior.q_heads,
          "synth: the sparsity prior '", s.prior.name, "' is empty or inconsistent");
  const int64_t bytes_per_slot = 8;  // index + mass
  const double bytes =
      static_cast<double>(s.samples * s.layers * s.q_heads) *
      static_cast<double>(std::min(s.vertical_slots, s.seq_len_tokens) + std::min(s.slash_slots, s.seq_len_tokens)) *
      static_cast<double>(bytes_per_slot);
  require(bytes <= 64.0 * (1ULL << 30), "synth: the trace would take ", bytes / double(1ULL << 30),
          " GiB (limit 64 GiB); use fewer samples or candidate slots");
}

double scaled_budget(const SynthSettings& settings, int64_t prior_budget) {
  const double ratio =
      static_cast<double>(settings.seq_len_tokens) / static_cast<double>(settings.budget_reference_tokens);
  return static_cast<double>(prior_budget) * std::pow(ratio, settings.budget_length_exponent);
}

SynthMemoryEstimate estimate_synth_memory(const SynthSettings& s) {
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  const double n = d(s.seq_len_tokens);
  const double heads = d(s.samples) * d(s.layers) * d(s.q_heads);
  const double vertical = d(std::min(s.vertical_slots, s.seq_len_tokens));
  const double slash = d(std::min(s.slash_slots, s.seq_len_tokens));
  // Document lengths are log-uniform in [min, max]: their mean is (max - min) / ln(max / min).
  const double mean_document = d(kMaxDocumentTokens - kMinDocumentTokens) /
                               std::log(d(kMaxDocumentTokens) / d(kMinDocumentTokens));
  const double documents = n / mean_document + 1.0;
  const double pool = std::min(n - 1.0, 1.5 * vertical + 4.0);
  // Distinct positions: one bit per token, or a hash-set node (about 48 bytes) per drawn value.
  const double distinct_bytes = n <= d(kBitmapLimitTokens) ? n / 8.0 : 48.0 * std::max(pool, slash);
  // Per worker, one head at a time: positions (4 bytes), masses (8, and 8 more while profiled),
  // scored slashes (16), sorted and weak copies (8); the pool (4) and its sort keys (16); the
  // document-start tokens of the pool (3 x 4 per document).
  const double worker_bytes = 28.0 * vertical + 44.0 * slash + 20.0 * pool + 12.0 * documents + distinct_bytes;

  SynthMemoryEstimate e;
  e.parts.push_back({"process", kProcessBaseBytes});
  e.parts.push_back({"trace tensors (samples x layers x heads x slots, 8 bytes a slot)", heads * (vertical + slash) * 8.0});
  // Vectors grow by doubling: up to twice their size.
  e.parts.push_back({"document starts of every sample", d(s.samples) * 2.0 * 8.0 * documents});
  e.parts.push_back({"worker scratch", d(worker_count(s)) * worker_bytes});
  e.parts.push_back({"validation", (n <= d(kBitmapLimitTokens) ? n / 8.0 : 0.0) + 4.0 * std::max(vertical, slash)});
  e.parts.push_back({"resampled prior", d(s.layers) * d(s.q_heads) * 16.0});
  e.bytes = sort_and_sum(e.parts);
  return e;
}

Trace synthesize_trace(const SynthSettings& settings) {
  validate_synth_settings(settings);
  const SparsityPrior prior = resample_prior(settings.prior, settings.layers, settings.q_heads, settings.seed);
  const int64_t n = settings.seq_len_tokens;

  Trace trace;
  trace.metadata.model = settings.model;
  trace.metadata.source = "synthetic";
  trace.metadata.last_q = settings.last_q;
  trace.metadata.block_q = settings.block_q;
  trace.metadata.block_k = settings.block_k;
  auto& provenance = trace.metadata.provenance;
  provenance["generator"] = "sparsering synthetic trace generator 1 (traces/synth/synthetic_trace.hpp)";
  provenance["seed"] = std::to_string(settings.seed);
  provenance["prior"] = prior.name;
  provenance["prior_source"] = prior.source;
  if (!prior.resampled_from.empty()) provenance["prior_resampled"] = prior.resampled_from;
  provenance["budget_recall"] = format_double(settings.budget_recall);
  provenance["budget_reference_tokens"] = std::to_string(settings.budget_reference_tokens);
  provenance["budget_length_exponent"] = format_double(settings.budget_length_exponent);
  provenance["step_variation"] = format_double(settings.step_variation);
  provenance["drift"] = format_double(settings.drift);
  provenance["kv_heads"] = std::to_string(settings.kv_heads > 0 ? settings.kv_heads : settings.q_heads);

  trace.samples = settings.samples;
  trace.layers = settings.layers;
  trace.heads = settings.q_heads;
  trace.vertical_candidates = std::min(settings.vertical_slots, n);
  trace.slash_candidates = std::min(settings.slash_slots, n);
  const auto heads_total = static_cast<size_t>(trace.samples * trace.layers * trace.heads);
  trace.vertical_index.assign(heads_total * static_cast<size_t>(trace.vertical_candidates), -1);
  trace.vertical_mass.assign(heads_total * static_cast<size_t>(trace.vertical_candidates), 0.0f);
  trace.slash_offset.assign(heads_total * static_cast<size_t>(trace.slash_candidates), -1);
  trace.slash_mass.assign(heads_total * static_cast<size_t>(trace.slash_candidates), 0.0f);
  trace.sample_seq_len.assign(static_cast<size_t>(trace.samples), n);

  std::vector<std::vector<int64_t>> doc_starts;
  for (int64_t s = 0; s < settings.samples; ++s) {
    SplitMix64 rng(derive_seed({settings.seed, kDocuments, static_cast<uint64_t>(s)}));
    doc_starts.push_back(synth::document_starts(rng, n, kMinDocumentTokens, kMaxDocumentTokens));
  }

  const LayerContext ctx{settings, prior, trace.vertical_candidates, trace.slash_candidates, trace};
  const int64_t tasks = settings.samples * settings.layers;
  const int64_t workers = worker_count(settings);
  std::atomic<int64_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&]() {
    try {
      for (int64_t task = next++; task < tasks; task = next++) {
        synthesize_layer(ctx, task / settings.layers, task % settings.layers,
                         doc_starts[static_cast<size_t>(task / settings.layers)]);
      }
    } catch (...) {
      const std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = tasks;
    }
  };
  std::vector<std::thread> pool;
  for (int64_t i = 1; i < workers; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  validate_trace(trace);
  return trace;
}

}  // namespace sparsering
