// Synthetic sparsity traces (docs/algorithm.md section 2) for models and lengths nobody has captured yet.
//
// Per (sample, layer, head) the generator draws vertical and slash candidates whose structure
// follows what RoPE attention produces, and whose masses are shaped so that recall selection at
// `budget_recall` keeps about the head's budget from the sparsity prior:
//   target = prior budget * (seq_len / budget_reference_tokens)^budget_length_exponent
//            * exp(step_variation * z)       (z standard normal, drawn per sample: budgets vary by step)
//            * exp(drift * s / (S - 1) * y)  (y standard normal, fixed per head and kind: over the S
//                                             samples, read as training steps in order, each head's
//                                             budgets move steadily one way; 0 = no trend)
// clamped to [1, min(3/4, 0.9 budget_recall) of the candidate slots] so a tail of weaker
// candidates always follows.
// Verticals: 1-4 attention sinks at positions 0.. that hold 20-70% of the head's kept mass, then
// heavy content keys from a pool shared by the heads of a KV group (document starts of the packed
// sample first, the rest spread over the sequence). Slashes: offset 0, a local window 0..w-1
// (w = 10-60% of the target) whose mass decays with the offset, then bands of distant diagonals
// whose weight decays with their offset (15% of heads are periodic: bands at multiples of a
// period). The band width sets how many kernel tiles the kept slashes touch and therefore the
// tile density; its range is set so Qwen2.5-3B at 512K tokens and recall 0.95 has about 95%
// tile sparsity, the figure the MTraining paper reports (see traces/synth/README.md).
// Head structure (sinks, window share, band widths, decay, periods) is fixed per (seed, layer,
// head); documents, heavy keys, 25% of the bands and the budgets change per sample, independently
// from sample to sample unless `drift` adds the trend (traces/synth/README.md, "Samples").
// Deterministic per seed and independent of the thread count: every (sample, layer, head) draws
// from its own SplitMix64 stream keyed by (seed, sample, layer, head).
// Its peak memory is estimated before anything is allocated (estimate_synth_memory), so that
// `trace synth` refuses a request beyond --max-memory-gib.
// Tested in tests/traces/synthetic_trace_test.cpp and, against the measured peak, in
// tests/cli/resource_budget_cli_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/memory_budget.hpp"
#include "traces/sparsity_prior.hpp"
#include "traces/trace.hpp"

namespace sparsering {

struct SynthSettings {
  std::string model;           ///< model name recorded in the trace metadata
  int64_t layers = 0;          ///< L >= 1
  int64_t q_heads = 0;         ///< H >= 1
  int64_t kv_heads = 0;        ///< KV heads (heavy keys are shared within a group); 0 = q_heads
  int64_t seq_len_tokens = 0;  ///< N: tokens per sample, in [16, 2^31)
  int64_t samples = 1;         ///< S >= 1
  uint64_t seed = 0;
  int64_t vertical_slots = 8192;  ///< Kv: candidate slots per head (clamped to N)
  int64_t slash_slots = 8192;     ///< Ks (clamped to N)
  int64_t last_q = 64;            ///< estimator settings recorded in the metadata
  int64_t block_q = 64;
  int64_t block_k = 64;
  SparsityPrior prior;                       ///< resampled onto layers x q_heads when the shapes differ
  double budget_recall = 0.95;               ///< recall at which kept counts match the budgets, in [0.5, 0.999]
  int64_t budget_reference_tokens = 131072;  ///< length at which the prior's budgets hold as published
  double budget_length_exponent = 0.5;       ///< budgets scale as (N / reference)^exponent, in [0, 1]
  double step_variation = 0.15;              ///< log-normal sigma of per-sample budget changes, in [0, 1]
  double drift = 0.0;                        ///< log-scale trend of each head's budgets over the samples, in [0, 2]
  int threads = 0;                           ///< worker threads; 0 = hardware concurrency; never changes the result
};

/// Throws InputError naming the field when a setting is out of range.
void validate_synth_settings(const SynthSettings& settings);

/// The budget target of a head before clamping to the slots: prior budget times the length
/// scaling (no per-sample variation). Exposed so tests can compare kept counts with it.
double scaled_budget(const SynthSettings& settings, int64_t prior_budget);

/// The peak memory of synthesize_trace(settings) and write_trace of its result, by part (largest
/// first), without allocating anything proportional to them: the trace's tensors, the document
/// starts of every sample, the per-worker scratch of a layer (candidate lists, the heavy-key pool,
/// a bitmap of the sequence or a hash set beyond 2^26 tokens) and the validation bitmap.
/// Preconditions: validate_synth_settings(settings) passed.
struct SynthMemoryEstimate {
  std::vector<MemoryEstimatePart> parts;  ///< largest first
  double bytes = 0.0;                     ///< sum of the parts
};
SynthMemoryEstimate estimate_synth_memory(const SynthSettings& settings);

/// Generates a trace (validated) as described above.
Trace synthesize_trace(const SynthSettings& settings);

}  // namespace sparsering
