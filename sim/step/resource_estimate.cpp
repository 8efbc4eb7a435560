// The resource estimate of one simulation (sim/step/resource_estimate.hpp). Tested in
// tests/sim/resource_estimate_test.cpp and tests/cli/resource_budget_cli_test.cpp.
#include "sim/step/resource_estimate.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "common/memory_budget.hpp"

namespace sparsering {

namespace {

// Per (thread, query block, ring rank): the visible-column prefix, three cases of int32.
constexpr double kVisibleBytesPerBlockRank = 3 * 4;
// Per (thread, query block): difference arrays and covered counts (int64), block classes (int32).
constexpr double kCounterBytesPerBlock = 3 * 8 + 2 * 4;
// Per ring cell (position, step): one RingStepRecord plus its transfers while a pass runs.
constexpr double kRingRunBytesPerCell = 64 + 2 * 48;
// Per kept ring cell: the record, its compute time, and its share of result.json / timeline.json
// (JSON values and the dumped text) when --out asks for them.
constexpr double kKeptBytesPerCell = 64 + 8 + 2 * 48 + 600;

}  // namespace

std::string SimulationResourceEstimate::largest(size_t count) const { return largest_items(items, count); }

SimulationResourceEstimate estimate_simulation_resources(const PlanConfig& plan, const ModelConfig& model,
                                                         const SimulationOptions& options, double trace_bytes) {
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  const double w = d(plan.context_parallel);
  const double cells = w * w;
  const double levels = std::max<double>(1.0, d(static_cast<int64_t>(plan.ring_levels.size())));
  const double layers = d(model.layers);
  const double groups = d(plan.head_parallel);
  const double local_tokens = d(plan.seq_len_tokens) / w;
  const double q_blocks = std::ceil(local_tokens / d(plan.sparse.block_q));
  const double k_blocks = std::ceil(local_tokens / d(plan.sparse.block_k));
  // Dense plans count one head on one thread; sparse plans count layers on every thread.
  const double threads = plan.sparse.enabled ? std::min(d(std::max(1, options.threads)), layers) : 1.0;

  SimulationResourceEstimate e;
  e.items.push_back({"process", kProcessBaseBytes});
  e.items.push_back({"work counting scratch (per query block)",
                     threads * q_blocks * (w * kVisibleBytesPerBlockRank + kCounterBytesPerBlock) +
                         4.0 * (q_blocks + k_blocks)});
  // Every ring's link table (W x W x levels transfer times, twice with mirrored accumulators),
  // and the work matrices of every layer and head group.
  const double link_cell_bytes = options.accumulator_route == AccumulatorRoute::mirror ? 16.0 * levels : 8.0 * levels + 12.0;
  e.items.push_back({"ring link tables (W x W per ring)", d(plan.ring_count()) * cells * link_cell_bytes});
  e.work_set_bytes = layers * groups * cells * 32.0;
  e.items.push_back({"work matrices (W x W per layer and head group)", e.work_set_bytes});
  // One ring pass at a time per ring class (at least one class per head group).
  e.items.push_back({"ring passes (W x W)", groups * cells * (2 * link_cell_bytes + 16.0) + cells * kRingRunBytesPerCell});
  if (options.keep_ring_records) {
    e.items.push_back({"per-rank ring records (--out)", layers * groups * 2.0 * cells * kKeptBytesPerCell});
  }
  if (trace_bytes > 0.0) {
    // The trace as read, and the kept patterns (int64 of the int32 slots) of every head.
    e.items.push_back({"trace and patterns", 3.0 * trace_bytes});
  }
  e.memory_bytes = sort_and_sum(e.items);

  // Work: the column sweep visits every query block of every rank pair per head (W x N / block_q
  // per head), the ring passes every cell per layer and group; dense plans count one head.
  const double heads = plan.sparse.enabled ? layers * d(model.q_heads) : 1.0;
  e.work_units = heads * cells * q_blocks + layers * groups * cells * 4.0 + q_blocks;
  return e;
}

}  // namespace sparsering
