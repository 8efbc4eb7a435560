// Launcher of the GPU recall (top-p) selection: per row, the smallest mass-sorted prefix of
// entries whose mass reaches the recall target, as traces/recall.hpp defines it (candidates =
// every entry of the row, ties broken by smaller index, never a zero-mass entry, capped), written
// as ascending indices: the kept vertical keys or slash offsets the index build reads.
// CPU oracle: recall_prefix_length (traces/recall.hpp). Tested in
// tests/kernels_gpu/recall_select_test.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

namespace sparsering {

struct RecallSelectParams {
  int32_t rows = 0;            ///< independent rows (batch x heads)
  int64_t entries = 0;         ///< n: masses per row (keys or offsets), < 2^31
  double recall = 0.95;        ///< p in (0, 1]
  int32_t capacity = 4096;     ///< cap on kept entries per row, >= 1
  const float* mass = nullptr; ///< (rows, n) masses >= 0 (negative, NaN and infinite ones count as 0)
  int32_t* kept_count = nullptr; ///< (rows) written
  int32_t* kept_index = nullptr; ///< (rows, capacity) written: kept indices ascending, then -1
};

/// Queues the selection on `stream` (stream-ordered scratch memory, no host synchronization, no
/// sort). Throws InputError for bad settings or pointers, CudaError on failure.
void launch_recall_select(const RecallSelectParams& params, cudaStream_t stream);

/// The selection of up to 4 row sets in one set of launches (the verticals and the slashes of a
/// layer): each part as launch_recall_select alone would select it. Every part must have the same
/// entries, recall and capacity.
void launch_recall_select_batch(std::span<const RecallSelectParams> parts, cudaStream_t stream);

}  // namespace sparsering
