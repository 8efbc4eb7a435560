// Single-rank index preparation (see pattern_pipeline.hpp): host orchestration of the estimation,
// selection and build launchers in stream-ordered scratch memory; no kernels of its own.
#include "kernels/cuda/pattern_pipeline.hpp"

#include <cmath>

#include "common/error.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/estimate_pattern.hpp"
#include "kernels/cuda/recall_select.hpp"

namespace sparsering {

void launch_single_rank_estimate_select(const PatternPipelineParams& params, const KeptSetsOutput& kept,
                                        cudaStream_t stream) {
  const AttentionShape& shape = params.shape;
  require(shape.kv_len >= 1 && shape.kv_len < (int64_t{1} << 31), "shape.kv_len must be in [1, 2^31), got ",
          shape.kv_len);
  require(params.capacity >= 1, "capacity must be >= 1, got ", params.capacity);
  const int64_t rows = int64_t{shape.batch} * shape.q_heads;
  require(rows >= 1 && rows <= 65535, "batch x q_heads must be in [1, 65535], got ", rows);
  const int64_t n = shape.kv_len;
  const TokenLayout layout = make_token_layout(LayoutKind::contiguous, n, 1);

  const size_t stats = static_cast<size_t>(rows * shape.q_len);
  const size_t masses = static_cast<size_t>(rows * n);
  StreamBuffer scratch((2 * stats + 2 * masses) * 4, stream);
  float* row_max = scratch.as<float>();
  float* row_sum = row_max + stats;
  float* vertical = row_sum + stats;
  float* slash = vertical + masses;
  SPARSERING_CUDA_CHECK(cudaMemsetAsync(slash, 0, masses * 4, stream));

  EstimateParams estimate;
  estimate.shape = shape;
  estimate.position = RingPosition{layout, 0, 0};
  estimate.softmax_scale = params.softmax_scale;
  estimate.q_last = params.q_last;
  estimate.k = params.k;
  estimate.row_max = row_max;
  estimate.row_sum = row_sum;
  estimate.vertical_mass = vertical;
  estimate.slash_mass = slash;
  launch_estimate_pattern_pass1(estimate, stream);
  launch_estimate_pattern_pass2(estimate, stream);

  RecallSelectParams select;
  select.rows = static_cast<int32_t>(rows);
  select.entries = n;
  select.recall = params.recall;
  select.capacity = params.capacity;
  select.mass = vertical;
  select.kept_count = kept.vertical_count;
  select.kept_index = kept.vertical_keys;
  launch_recall_select(select, stream);
  select.mass = slash;
  select.kept_count = kept.slash_count;
  select.kept_index = kept.slash_offsets;
  launch_recall_select(select, stream);
}

DeviceSparseIndex run_single_rank_pattern_pipeline(const PatternPipelineParams& params, cudaStream_t stream) {
  const int64_t rows = int64_t{params.shape.batch} * params.shape.q_heads;
  require(rows >= 1 && rows <= 65535 && params.capacity >= 1, "batch x q_heads must be in [1, 65535] and capacity >= 1");
  const size_t kept = static_cast<size_t>(rows) * static_cast<size_t>(params.capacity);
  StreamBuffer sets((2 * static_cast<size_t>(rows) + 2 * kept) * 4, stream);
  KeptSetsOutput out;
  out.vertical_count = sets.as<int32_t>();
  out.slash_count = out.vertical_count + rows;
  out.vertical_keys = out.slash_count + rows;
  out.slash_offsets = out.vertical_keys + kept;
  launch_single_rank_estimate_select(params, out, stream);
  const KeptSetsView view{static_cast<int32_t>(rows), params.capacity, out.vertical_count, out.vertical_keys,
                          out.slash_count, out.slash_offsets};
  const TokenLayout layout = make_token_layout(LayoutKind::contiguous, params.shape.kv_len, 1);
  return launch_build_sparse_index(view, RingPosition{layout, 0, 0}, params.block_q, params.block_k, stream);
}

}  // namespace sparsering
