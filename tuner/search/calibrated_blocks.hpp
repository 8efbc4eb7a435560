// Which block sizes `sparsering tune` searches, given the GPU's calibration: a block b whose kernel
// shape (b, b, head dim) the calibration does not list would be costed by extrapolation from
// another shape (sim/cost/kernel_cost.hpp), and a ranking that puts such a guess beside measured
// costs misleads. So by default the search keeps the calibrated blocks only and says which it
// left out; with `allow_extrapolated` it keeps every requested block and names the extrapolated
// ones, which the ranking then marks (docs/tuner.md, "Calibrated shapes"). An uncalibrated GPU
// (roofline costs everywhere, flagged by every output) keeps every block.
// Tested in tests/tuner_search/calibrated_blocks_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/config/gpu_config.hpp"

namespace sparsering {

struct BlockChoice {
  std::vector<int64_t> searched;      ///< the blocks to search, in the requested order
  std::vector<int64_t> extrapolated;  ///< searched blocks whose shape is not calibrated (allow_extrapolated)
  std::vector<int64_t> left_out;      ///< requested blocks left out because their shape is not calibrated
  std::string note;                   ///< what was left out or extrapolated, for the output; empty if nothing
};

/// Splits `requested` block sizes (block_q = block_k) for a model of `head_dim` on `gpu`. Throws
/// InputError when a calibration covers none of them and `allow_extrapolated` is false, naming the
/// calibrated shapes and the two ways out (recalibrate, or allow extrapolation).
BlockChoice choose_calibrated_blocks(const GpuConfig& gpu, int64_t head_dim, const std::vector<int64_t>& requested,
                                     bool allow_extrapolated);

}  // namespace sparsering
