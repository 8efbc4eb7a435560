// The raw measurements of `sparsering calibrate`, as plain structs shared by the GPU benchmarks
// (measure/bench/) and the CPU side that fits them and writes them out as JSON and
// CSV for notebooks (measure/calibration/calibration_output.hpp). No CUDA or NCCL types here.
// Tested through tests/measure/calibration/calibration_output_test.cpp.
#pragma once

#include <cstdint>
#include <string>

namespace sparsering {

/// One benchmarked kernel launch shape and its measured times (one direction).
struct KernelMeasurement {
  std::string direction;        ///< "forward" or "backward"
  int32_t q_heads = 0;          ///< query heads of the launch (batch 1)
  int32_t kv_heads = 0;
  int64_t local_tokens = 0;     ///< query tokens = K/V chunk tokens of the step
  int32_t block_q = 0;
  int32_t block_k = 0;
  int32_t head_dim = 0;
  int32_t tiles_per_list = 0;   ///< per (head, query block)
  int32_t chunks_per_list = 0;
  int32_t columns_per_list = -1;  ///< gathered columns per list; -1: chunks_per_list x block_k (older records)
  std::string placement = "random";  ///< synthetic index: "random" or "banded" (synthetic_index.hpp)
  int32_t key_block_stride = 1;  ///< lists meet only key blocks j with j mod stride = 0 (1 in older records)
  int64_t lists = 0;            ///< heads x query blocks (non-empty (head, query block) lists)
  int64_t tiles = 0;            ///< all heads
  int64_t column_chunks = 0;    ///< all heads
  // The backward's units (kernels/index/count_sparse_index.hpp backward_units), all heads; -1 when
  // not recorded (older CSVs: restore_backward_units rebuilds them from the synthetic index).
  int64_t key_lists = -1;       ///< non-empty (K/V head, key block) segments
  int64_t column_lists = -1;    ///< lists with a column
  int64_t column_items = -1;    ///< sum over lists of ceil(columns / 64)
  int64_t columns = -1;         ///< gathered columns
  int64_t longest_key_list = -1;  ///< entries of the heaviest (K/V head, key block) segment
  int32_t repeats = 0;
  double median_us = 0.0;
  double min_us = 0.0;
  double max_us = 0.0;
  bool under_filled = false;    ///< under two waves of CTAs (kernel_calibration.hpp): kept out of the fit
  /// Backward only: median time of its key-block pass alone (index transposition and key-block
  /// kernel, measure/bench/kernel_bench.cu), where the Hopper backward lets it run alone; the
  /// column pass is the rest. -1 when not measured (older records, the mma.sync backward).
  double key_pass_us = -1.0;
  /// The SM clock the timed repeats ran at (median of the probes after each, MHz;
  /// kernels/cuda/sm_clock_probe.hpp); 0 when not measured (older records, replayed cells).
  double sm_clock_mhz = 0.0;
  double predicted_us = 0.0;    ///< the fitted model of its shape and direction, filled after the fit
};

/// One NCCL hop measurement.
struct HopMeasurement {
  std::string mode;        ///< "send" (GPU a -> b), "recv" (b -> a), "both" (a <-> b), "ring"
  int32_t gpus = 0;        ///< GPUs taking part
  int32_t ring_size = 0;   ///< ring mode: GPUs per ring (rings = gpus / ring_size); else 2
  int64_t bytes = 0;       ///< message size per sender
  int32_t repeats = 0;
  int32_t iterations = 0;  ///< back-to-back hops per timed repeat
  double median_us = 0.0;  ///< one hop
  double min_us = 0.0;
  double gbytes_per_s = 0.0;  ///< bytes / median time, per direction per sender (1e9 bytes/s)
};

}  // namespace sparsering
