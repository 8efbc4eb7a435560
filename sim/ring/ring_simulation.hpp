// Event simulation of one ring-attention pass over a flat or nested ring (sim/ring/ring_schedule.hpp)
// with double-buffered K/V, forward (K/V ring) or backward (K/V ring plus the dK/dV accumulators).
//
// Model, per position p and step t (all times integer ns):
//   compute_start(p, t) = max(compute_end(p, t-1) [or the rank's start time], chunk arrival(p, t))
//   compute_end(p, t)   = compute_start + compute(p, t)
//   A position forwards the chunk it holds at step t over every level the schedule says, as soon
//   as it has the chunk, the link (one queue per position and level, first come first served) is
//   free, and the receiver has a free buffer. Receive buffers: the chunk arriving over level k for
//   step t reuses the buffer of the receiver's chunk of step t - stride_k - 1, free once that chunk
//   is computed and every forward of it has ended. For a flat ring (stride 1) that is the classic
//   double buffer: chunk t waits for chunk t-2 to be released.
//   Backward: the dK/dV accumulator of the chunk held at step t leaves after compute(p, t) and
//   after the incoming accumulator arrived (inner digit >= 1); it moves to the inner successor, or
//   at the last inner step returns straight to the chunk's owner (owners add the partial sums of
//   each inner cycle). "Inner" is the innermost level with more than one position. Accumulator
//   hops use the same per-level link queues as the K/V forwards.
// Closed form (tested): uniform compute C and hop time T on a flat ring of W give
//   compute_start(p, t) = t x max(C, T) and a forward pass of (W-1) x max(C, T) + C.
// Tested in tests/sim/ring_simulation_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/sim_time.hpp"
#include "sim/ring/ring_schedule.hpp"

namespace sparsering {

enum class TransferKind : uint8_t { kv = 0, dkv = 1, dkv_return = 2 };

/// One point-to-point transfer of the ring.
struct RingTransfer {
  TransferKind kind = TransferKind::kv;
  int32_t from = 0;   ///< sending position
  int32_t to = 0;     ///< receiving position
  int32_t step = 0;   ///< the sender's step whose chunk (or accumulator) is sent
  int32_t level = 0;  ///< ring level of the hop (the return hop: the level given by the input)
  SimNs start_ns = 0;
  SimNs end_ns = 0;
};

/// What one position did at one step.
struct RingStepRecord {
  SimNs compute_start_ns = 0;
  SimNs compute_end_ns = 0;
  SimNs recv_start_ns = 0;  ///< transfer of this step's chunk (0 at step 0: own chunk)
  SimNs recv_end_ns = 0;
  SimNs wait_ns = 0;        ///< idle before this compute (after the previous one, or the start)
  bool comm_exposed = false;///< step >= 1 and the chunk arrived after the previous compute ended
};

/// Inputs of one pass. Vectors indexed [p x W + t] (compute, dkv) or [(p x W + t) x L + level].
struct RingInput {
  std::vector<SimNs> compute_ns;     ///< kernel time of position p at step t
  std::vector<SimNs> kv_send_ns;     ///< time of the K/V forward posted at (p, t) over `level`
  std::vector<SimNs> dkv_send_ns;    ///< backward: accumulator hop of (p, t) (inner hop or return)
  std::vector<int32_t> dkv_level;    ///< backward: link level of that hop (queue it waits in)
  std::vector<SimNs> start_ns;       ///< per position: when it may start; empty = all 0
};

/// The simulated pass.
struct RingRun {
  int32_t ranks = 0;
  std::vector<RingStepRecord> steps;  ///< [p x W + t]
  std::vector<RingTransfer> transfers;
  std::vector<SimNs> finish_ns;       ///< per position: compute done and (backward) its accumulators home
  SimNs end_ns = 0;                   ///< max of finish_ns

  const RingStepRecord& at(int32_t position, int32_t step) const {
    return steps[static_cast<size_t>(position) * static_cast<size_t>(ranks) + static_cast<size_t>(step)];
  }
};

/// Runs the event model. Throws InputError if the input sizes do not match the schedule or a
/// duration is negative.
RingRun simulate_ring(const RingSchedule& schedule, const RingInput& input, bool backward);

/// Figures of merit of a pass.
struct RingMetrics {
  double worker_imbalance = 1.0;          ///< max / mean over positions of total compute (1 if all 0)
  std::vector<double> step_imbalance;     ///< per step: max / mean over positions of compute
  double mean_step_imbalance = 1.0;       ///< mean of step_imbalance
  int64_t exposed_steps = 0;              ///< (p, t >= 1) whose chunk arrived after compute(p, t-1) ended
  double exposed_share = 0.0;             ///< exposed_steps / (W x (W-1)); 0 for W = 1
  SimNs total_wait_ns = 0;                ///< sum of wait_ns
};

/// Computes the metrics of a run from its compute times.
RingMetrics ring_metrics(const RingRun& run, const std::vector<SimNs>& compute_ns);

}  // namespace sparsering
