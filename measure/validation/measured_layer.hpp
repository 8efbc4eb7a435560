// What `sparsering validate` measured for one attention layer on GPUs, in one plain struct that the
// comparison, the JSON and the timeline read: the compute matrix (every ring position's kernel time
// at every step, forward and backward) and, for a run on real GPUs, the step times, the K/V
// transfer times and the layer's wall time. The replay (measure/replay/) and the NCCL ring
// runtime (kernels/nccl/ring_attention_layer.hpp) both fill it. Plain data; exercised by
// tests/measure/validation/validation_compare_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sparsering {

/// One direction of the layer (forward or backward). Vectors are [position x W + step]; times in
/// microseconds; optional vectors are empty when not measured.
struct MeasuredPass {
  std::vector<double> compute_us;        ///< kernel time of position p at step t (median over iterations)
  /// optional (replays): the SM clock its timed launches ran at, MHz (median of the probes after
  /// each, kernels/cuda/sm_clock_probe.hpp); 0 for a cell that launched nothing
  std::vector<double> sm_clock_mhz;
  std::vector<double> compute_start_us;  ///< optional: kernel start, from the pass start
  std::vector<double> step_us;           ///< optional: end of compute(p, t) - end of compute(p, t-1) (t = 0: from the start)
  std::vector<double> comm_us;           ///< optional: transfer that delivered step t's chunk (0 at t = 0)
  std::vector<double> comm_start_us;     ///< optional: its start, from the pass start
  double wall_ms = 0.0;                  ///< optional (ring runs): slowest rank's pass, start to end
  double exposed_comm_ms = 0.0;          ///< optional (ring runs): slowest rank's time waiting for K/V
};

struct MeasuredLayer {
  std::string mode;         ///< "replay" (one GPU, every virtual rank in turn) or "ring" (real GPUs, NCCL)
  int32_t ranks = 0;        ///< W
  int32_t iterations = 0;   ///< timed repetitions behind each median
  int64_t tiles = 0;        ///< key tiles of every index the kernels ran, summed over positions and steps
  int64_t column_chunks = 0;///< vertical column chunks, likewise
  MeasuredPass forward;
  MeasuredPass backward;
};

}  // namespace sparsering
