// The end-to-end simulator: for a plan, its model and cluster, and a trace (sparse) or none
// (dense attention), predicts every rank's ring steps forward and backward in every layer, the
// rest of each layer (projections and MLP as GEMMs, layout and Ulysses all-to-alls, pattern
// estimation collectives, the index build), the training step (LM head, gradient
// synchronisation, optimizer), tokens per second and the memory per GPU. The model and its
// assumptions: docs/simulator.md. Tested in tests/sim/simulation_test.cpp (closed forms on uniform
// dense rings, determinism, ring-order relabelling, cache reuse, NIC sharing across ring levels,
// dK/dV accumulator routes, the index build phase) and end to end in tests/golden/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/config/cluster_config.hpp"
#include "sim/config/model_config.hpp"
#include "sim/config/plan_config.hpp"
#include "sim/core/sim_time.hpp"
#include "sim/cost/kernel_cost.hpp"
#include "sim/memory/memory_model.hpp"
#include "sim/ring/ring_simulation.hpp"
#include "sim/step/simulation_context.hpp"
#include "sim/work/work_counts.hpp"
#include "traces/trace.hpp"

namespace sparsering {

/// When the token layout costs an all-to-all of Q, K, V in and of the output back (docs/simulator.md section 5).
enum class LayoutShuffle : int32_t {
  automatic = 0,  ///< the plan's layout_shuffle; without it striped layouts only (contiguous and zigzag come from the data loader)
  always = 1,
  never = 2,
};

struct SimulationOptions {
  int64_t trace_sample = 0;          ///< which sample of the trace gives the patterns
  std::string trace_key;             ///< identity of the trace for the context's caches; empty = no caching
  RooflineAssumptions roofline;      ///< used where the GPU has no calibration
  LayoutShuffle layout_shuffle = LayoutShuffle::automatic;
  bool overlap_grad_sync = true;     ///< gradient reduction overlaps the backward of earlier layers
  bool keep_ring_records = true;     ///< keep per-rank per-step records of every ring pass
  /// How the backward dK/dV accumulators travel (sim/ring/ring_simulation.hpp): along the K/V ring
  /// at every level (docs/simulator.md section 4) or straight back to the owner after each inner cycle.
  AccumulatorRoute accumulator_route = AccumulatorRoute::mirror;
  int threads = 1;                   ///< work counting threads (>= 1); results do not depend on it
};

/// One phase of a layer, executed by every rank in order.
struct LayerPhase {
  std::string name;        ///< e.g. "qkv_proj", "ulysses_a2a_in", "attention_ring"
  SimNs duration_ns = 0;
  bool communication = false;
};

/// One simulated ring pass (a layer, a set of identical rings, one direction).
struct RingPassResult {
  int64_t layer = 0;
  int64_t head_group = 0;
  bool backward = false;
  int32_t ring_class = 0;             ///< index into SimulationResult::ring_classes
  RingRun run;
  RingMetrics metrics;
  std::vector<SimNs> compute_ns;      ///< [position x W + step]
  std::vector<WorkCounts> cell_work;  ///< [position x W + step]: the work each compute_ns was costed on
};

/// Rings whose links time the same (they share one simulation).
struct RingClass {
  int64_t head_group = 0;
  std::vector<int64_t> rings;         ///< ring indices d x head_parallel + h
  std::vector<int64_t> members;       ///< global ranks of the first ring, in ring order
  std::vector<std::vector<int64_t>> ring_members;  ///< global ranks of every ring of `rings`
};

struct LayerResult {
  int64_t layer = 0;
  std::vector<LayerPhase> forward;
  std::vector<LayerPhase> backward;
  SimNs attention_fwd_ns = 0;          ///< slowest ring, forward
  SimNs attention_bwd_ns = 0;          ///< slowest ring, backward
  SimNs busiest_kernel_fwd_ns = 0;     ///< busiest rank's summed kernel time of any ring, forward
  SimNs busiest_kernel_bwd_ns = 0;     ///< the same, backward
  SimNs forward_ns = 0;                ///< sum of the forward phases
  SimNs backward_ns = 0;               ///< sum of the backward phases
  WorkCounts work;                     ///< all ranks, steps and head groups
  double worker_imbalance = 1.0;       ///< forward, worst head group
  double step_imbalance = 1.0;         ///< forward, mean over steps, worst head group
  double exposed_share = 0.0;          ///< forward, worst head group
  double backward_exposed_share = 0.0;
};

struct StepResult {
  SimNs forward_ns = 0;            ///< all layers + LM head
  SimNs backward_ns = 0;
  SimNs lm_head_ns = 0;            ///< forward + backward of the LM head
  SimNs grad_sync_ns = 0;          ///< gradient reduction (and ZeRO-3 gathers), total
  SimNs grad_sync_exposed_ns = 0;  ///< the part not hidden behind backward
  SimNs optimizer_ns = 0;
  SimNs step_ns = 0;
  int64_t tokens_per_step = 0;     ///< data_parallel x micro_batch x seq_len
  double tokens_per_s = 0.0;
};

struct SimulationResult {
  std::string plan_name;
  std::string model_name;
  std::string cluster_name;
  std::string gpu_name;
  bool dense = false;                  ///< dense attention (no sparsity)
  bool calibrated = false;             ///< kernel costs from a calibration (false = roofline)
  std::string cost_source;
  CalibrationStatus calibration;       ///< the kernel costs' calibration: source, stale, shape used
  std::vector<std::string> notes;      ///< assumptions that apply (uncalibrated, stale, extrapolated, ...)
  int64_t context_parallel = 1;
  int64_t head_parallel = 1;
  int64_t data_parallel = 1;
  std::vector<int64_t> ring_levels;
  std::string layout;
  int64_t heads_per_group = 0;
  std::vector<RingClass> ring_classes;
  std::vector<LayerResult> layers;
  std::vector<RingPassResult> rings;   ///< per layer, ring class and direction (if kept)
  LaunchGeometry launch;               ///< the shape of every ring step's launch (its per-key-block term)
  StepResult step;
  MemoryReport memory;
  double worker_imbalance = 1.0;       ///< max / mean over ranks of forward attention compute, all layers
  double step_imbalance = 1.0;         ///< mean over layers and steps of per-step max / mean
  double exposed_share = 0.0;          ///< forward steps whose K/V arrived after the previous compute, all layers
  int64_t work_cache_hits = 0;         ///< context cache state after this simulation

  /// The plan's `prediction` block for this result.
  PlanPrediction prediction(const std::string& version) const;
};

/// The key under which simulate() caches the kept patterns of sample `sample` of the trace
/// identified by `trace_key` at `settings` (SimulationContext::patterns); empty without a trace key.
/// A caller that selected the same patterns may place them in the context under this key first.
/// `kv_group` (query heads per K/V head, PatternSet::kv_group) is part of the key.
std::string pattern_cache_key(const std::string& trace_key, int64_t sample, const RecallSettings& settings,
                              int64_t kv_group = 1);

/// Simulates one training step of `plan`. `trace` is required when the plan is sparse and must
/// match the model (layers, query heads) and the plan's sequence length; it is ignored when dense.
/// Throws InputError naming the mismatch for inconsistent inputs.
SimulationResult simulate(SimulationContext& context, const PlanConfig& plan, const ModelConfig& model,
                          const ClusterConfig& cluster, const Trace* trace, const SimulationOptions& options = {});

}  // namespace sparsering
