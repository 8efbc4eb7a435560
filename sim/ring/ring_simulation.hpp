// Event simulation of one ring-attention pass over a flat or nested ring (core/ring_schedule.hpp)
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
//   Backward adds the fp32 dK/dV accumulators, routed one of two ways:
//   - mirror (docs/algorithm.md section 5, the default): the accumulators travel the K/V ring backwards at
//     every level. Level k keeps one accumulator per position and level-k iteration (one pass of
//     the levels below). The innermost level's accumulator of the chunk computed at step t leaves
//     after compute(p, t) and after the incoming one arrived (inner digit >= 1) for the inner
//     successor; after the last inner step it lands, holding the sum of the whole inner ring, on
//     the position that held the chunk at the start of the inner ring. That position adds it to
//     the incoming level-k+1 accumulator (if its level-k+1 digit >= 1) and sends the sum to its
//     level-k+1 successor, and so on upwards; the last hop of the outermost level lands on the
//     chunk's owner. The outer hops overlap the next inner ring, as the outer K/V hops do.
//   - direct_return: along the innermost level only; at the last inner step each accumulator goes
//     straight to the chunk's owner, which adds the partial sums of each inner cycle.
//   For a flat ring both routes are the same. "Innermost" is the innermost level with more than
//   one position; levels of size 1 are skipped. Accumulator hops use the per-level link queues of
//   the K/V forwards (a direct return the queue the input names).
// Closed form (tested): uniform compute C and hop time T on a flat ring of W give
//   compute_start(p, t) = t x max(C, T) and a forward pass of (W-1) x max(C, T) + C.
// Tested in tests/sim/ring_simulation_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/sim_time.hpp"
#include "core/ring_schedule.hpp"

namespace sparsering {

enum class TransferKind : uint8_t {
  kv = 0,          ///< a K/V chunk
  dkv = 1,         ///< a dK/dV accumulator on its way
  dkv_return = 2,  ///< a dK/dV accumulator landing on the chunk's owner
};

/// How the backward pass's dK/dV accumulators travel (see the file comment).
enum class AccumulatorRoute : uint8_t {
  mirror = 0,         ///< along the K/V ring at every level (docs/algorithm.md section 5)
  direct_return = 1,  ///< innermost level, then straight to the owner after every inner cycle
};

/// One point-to-point transfer of the ring.
struct RingTransfer {
  TransferKind kind = TransferKind::kv;
  int32_t from = 0;   ///< sending position
  int32_t to = 0;     ///< receiving position
  int32_t step = 0;   ///< the sender's step whose chunk (or accumulator) is sent
  int32_t level = 0;  ///< ring level of the hop (a direct return: the queue level given by the input)
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

/// Inputs of one pass. Vectors indexed [p x W + t] or [(p x W + t) x L + level].
struct RingInput {
  std::vector<SimNs> compute_ns;     ///< kernel time of position p at step t
  std::vector<SimNs> kv_send_ns;     ///< time of the K/V forward posted at (p, t) over `level`
  std::vector<SimNs> dkv_send_ns;    ///< backward, direct_return: accumulator hop of (p, t) (inner hop or return)
  std::vector<int32_t> dkv_level;    ///< backward, direct_return: link level of that hop (queue it waits in)
  std::vector<SimNs> start_ns;       ///< per position: when it may start; empty = all 0
  std::vector<SimNs> dkv_hop_ns;     ///< backward, mirror: [(p x W + t) x L + level] time of the level's
                                     ///< accumulator hop that p sends at step t to its level successor
  AccumulatorRoute route = AccumulatorRoute::mirror;  ///< backward: which accumulator inputs apply
  bool keep_transfers = true;        ///< false: RingRun::transfers stays empty (the times are the same)
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

/// Runs the event model. Backward needs dkv_hop_ns (mirror route) or dkv_send_ns and dkv_level
/// (direct_return route). Throws InputError if the input sizes do not match the schedule or a
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
