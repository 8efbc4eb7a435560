// Which launches and message sizes `sparsering calibrate` measures: the kernel shapes (block_q x
// block_k x head_dim), for each the case grid (head counts, local sequence lengths, tiles and
// vertical chunks per query block), and the NCCL message sizes. Pure host logic, so tests can
// check the grid covers what the fit needs and every shape the tuner searches.
// Tested in tests/measure/calibration/benchmark_plan_test.cpp.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/config/gpu_config.hpp"

namespace sparsering {

/// One kernel benchmark: a synthetic off-diagonal ring step (measure/calibration/
/// synthetic_index.hpp) with batch 1, at one kernel shape.
struct KernelBenchCase {
  KernelShape shape;
  int32_t q_heads = 16;
  int32_t kv_heads = 2;
  int64_t local_tokens = 4096;   ///< query tokens = K/V chunk tokens
  int32_t tiles_per_list = 1;    ///< key tiles of block_k tokens per (head, query block)
  int32_t chunks_per_list = 0;   ///< gathered vertical chunks of block_k columns per (head, query block)
  /// Gathered columns per list when >= 0 (then chunks_per_list = ceil(columns / block_k)): partly
  /// filled chunks and 64-column items, which separate the backward's per-column cost from its
  /// per-item cost; -1: chunks_per_list x block_k.
  int32_t columns_per_list = -1;
  /// Lists meet only the key blocks j with j mod key_block_stride = 0 (synthetic_index.hpp): the
  /// backward's key lists are then a 1/stride part of the key blocks its key-block pass launches.
  int32_t key_block_stride = 1;
};

/// The shapes one `calibrate` run measures by default: block_q = block_k in the tuner's default
/// block sizes (64, 128) at head dim 128, the head dim of every shipped model config.
std::vector<KernelShape> default_calibration_shapes();

/// Parses a comma-separated list of shapes "64x64x128,128x128x128" (block_q x block_k x head_dim).
/// Throws InputError naming `option` for a malformed entry, a shape the kernels cannot run
/// (core/kernel_support.hpp), a repeated shape or an empty list.
std::vector<KernelShape> parse_kernel_shapes(std::string_view text, std::string_view option);

/// The grid, for each shape in turn: head counts {4, 16, 32} (GQA groups 4-8) x local lengths
/// {4K, 16K, 32K, 64K} tokens x nine (tiles, chunks) mixes, heads 16/4 at 16K-64K (the backward's
/// key lists twice those of 16/2 at the same lists and length), then lists with partly filled column
/// items (4 tiles + 16, 40 or 100 columns at heads 16/2 and 32/4, 16K-64K tokens), plus launches
/// of one head that leave most SMs idle (kept out of the fit, reported apart). `quick` is a small subset for smoke runs
/// that still leaves at least five filled launches per direction and shape on a 132-SM GPU.
/// Every case fits its K/V chunk (tiles + chunks <= key blocks of block_k tokens).
std::vector<KernelBenchCase> default_kernel_cases(bool quick, const std::vector<KernelShape>& shapes);

/// Message sizes of the hop curve: powers of 4 from 64 KiB to 1 GiB (`quick`: to 256 MiB), or
/// powers of 2 over the same range when `dense` is set.
std::vector<int64_t> default_hop_sizes(bool quick, bool dense);

}  // namespace sparsering
