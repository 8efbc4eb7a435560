// Which launches and message sizes `sparsering calibrate` measures: the kernel case grid (head
// counts, local sequence lengths, tiles and vertical chunks per query block) and the NCCL message
// sizes. Pure host logic, so tests can check the grid covers what the fit needs.
// Tested in tests/measure/calibration/benchmark_plan_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

namespace sparsering {

/// One kernel benchmark shape: a synthetic off-diagonal ring step (measure/calibration/
/// synthetic_index.hpp) with batch 1.
struct KernelBenchCase {
  int32_t q_heads = 16;
  int32_t kv_heads = 2;
  int64_t local_tokens = 4096;   ///< query tokens = K/V chunk tokens
  int32_t tiles_per_list = 1;    ///< per (head, query block)
  int32_t chunks_per_list = 0;   ///< gathered vertical chunks per (head, query block)
};

/// The default grid: head counts {4, 16, 32} (GQA groups 4-8) x local lengths {4K, 16K, 64K}
/// tokens x nine (tiles, chunks) mixes, plus launches of one head that leave most SMs idle (kept
/// out of the fit, reported apart). `quick` is a small subset for smoke runs. Every case fits
/// its K/V chunk (tiles + chunks <= key blocks of block_k tokens).
std::vector<KernelBenchCase> default_kernel_cases(bool quick, int32_t block_k);

/// Message sizes of the hop curve: powers of 4 from 64 KiB to 1 GiB (`quick`: to 256 MiB), or
/// powers of 2 over the same range when `dense` is set.
std::vector<int64_t> default_hop_sizes(bool quick, bool dense);

}  // namespace sparsering
