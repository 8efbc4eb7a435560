// The whole index preparation of one rank that holds every key (W = 1; the benchmark's and a
// single GPU's case): pattern estimation (both passes), recall selection of verticals and
// slashes on the GPU, and the GPU index build. With several ranks the same launchers run per
// shard with the statistics and masses exchanged between them (estimate_pattern.hpp).
// Exercised end to end by kernels/bench/bench_attention.py (timed against the sparse forward) and
// tests/kernels_gpu/pattern_pipeline_test.cpp; each stage is tested on its own in tests/kernels_gpu/.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/attention_params.hpp"
#include "kernels/cuda/sparse_index_build.hpp"

namespace sparsering {

struct PatternPipelineParams {
  AttentionShape shape;             ///< q_len = last_q, kv_len = N (all keys)
  float softmax_scale = 0.0f;
  const bf16_bits* q_last = nullptr;  ///< (B, Hq, last_q, D) the last queries
  const bf16_bits* k = nullptr;       ///< (B, Hkv, N, D)
  double recall = 0.95;               ///< top-p target of both verticals and slashes
  int32_t capacity = 4096;            ///< cap on kept verticals / slashes per row
  int32_t block_q = 64;
  int32_t block_k = 64;
};

/// Kept sets as the selection writes them (device arrays, rows x capacity, ascending).
struct KeptSetsOutput {
  int32_t* vertical_count = nullptr;  ///< (rows)
  int32_t* vertical_keys = nullptr;   ///< (rows, capacity)
  int32_t* slash_count = nullptr;     ///< (rows)
  int32_t* slash_offsets = nullptr;   ///< (rows, capacity)
};

/// Queues estimation (both passes) and the recall selection of verticals and slashes (one batched
/// selection) on `stream`, writing the kept sets. Asynchronous, no host synchronization. Throws
/// InputError for a bad problem.
void launch_single_rank_estimate_select(const PatternPipelineParams& params, const KeptSetsOutput& kept,
                                        cudaStream_t stream);

/// Estimation, selection and index build; returns the index in arrays of exactly the needed size
/// (synchronizes once, inside the build). Throws InputError for a bad problem, CudaError on failure.
DeviceSparseIndex run_single_rank_pattern_pipeline(const PatternPipelineParams& params, cudaStream_t stream);

/// The same preparation with no host synchronization (CUDA-graph capturable): the kept sets go to
/// `kept` (rows x params.capacity) and the index into `index`, allocated by allocate_sparse_index
/// for this problem's geometry (sparse_index_capacity_bound with params.capacity for both kinds
/// always suffices). The counts stay on the device until read_sparse_index_counts.
void launch_single_rank_pattern_pipeline(const PatternPipelineParams& params, const KeptSetsOutput& kept,
                                         DeviceSparseIndex& index, cudaStream_t stream);

/// The ring position of the single-rank problem (contiguous layout of kv_len tokens, one rank).
RingPosition single_rank_position(const PatternPipelineParams& params);

}  // namespace sparsering
