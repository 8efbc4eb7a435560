// Single-rank index preparation (see pattern_pipeline.hpp): host orchestration of the estimation,
// selection and build launchers in stream-ordered scratch memory; no kernels of its own.
#include "kernels/cuda/pattern_pipeline.hpp"

#include <array>
#include <cmath>

#include "common/error.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/estimate_pattern.hpp"
#include "kernels/cuda/recall_select.hpp"

namespace sparsering {
namespace {

int64_t checked_rows(const PatternPipelineParams& params) {
  const AttentionShape& shape = params.shape;
  require(shape.kv_len >= 1 && shape.kv_len < (int64_t{1} << 31), "shape.kv_len must be in [1, 2^31), got ",
          shape.kv_len);
  require(params.capacity >= 1, "capacity must be >= 1, got ", params.capacity);
  const int64_t rows = int64_t{shape.batch} * shape.q_heads;
  require(rows >= 1 && rows <= 65535, "batch x q_heads must be in [1, 65535], got ", rows);
  return rows;
}

KeptSetsView view_of(const PatternPipelineParams& params, int64_t rows, const KeptSetsOutput& kept) {
  return KeptSetsView{static_cast<int32_t>(rows), params.capacity, kept.vertical_count, kept.vertical_keys,
                      kept.slash_count, kept.slash_offsets};
}

}  // namespace

RingPosition single_rank_position(const PatternPipelineParams& params) {
  return RingPosition{make_token_layout(LayoutKind::contiguous, params.shape.kv_len, 1), 0, 0};
}

void launch_single_rank_estimate_select(const PatternPipelineParams& params, const KeptSetsOutput& kept,
                                        cudaStream_t stream) {
  const int64_t rows = checked_rows(params);
  const AttentionShape& shape = params.shape;
  const int64_t n = shape.kv_len;

  // Row statistics, then the vertical and slash masses side by side (rows x n each).
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
  estimate.position = single_rank_position(params);
  estimate.softmax_scale = params.softmax_scale;
  estimate.q_last = params.q_last;
  estimate.k = params.k;
  estimate.row_max = row_max;
  estimate.row_sum = row_sum;
  estimate.vertical_mass = vertical;
  estimate.slash_mass = slash;
  launch_estimate_pattern_pass1(estimate, stream);
  launch_estimate_pattern_pass2(estimate, stream);

  std::array<RecallSelectParams, 2> select;
  for (RecallSelectParams& part : select) {
    part.rows = static_cast<int32_t>(rows);
    part.entries = n;
    part.recall = params.recall;
    part.capacity = params.capacity;
  }
  select[0].mass = vertical;
  select[0].kept_count = kept.vertical_count;
  select[0].kept_index = kept.vertical_keys;
  select[1].mass = slash;
  select[1].kept_count = kept.slash_count;
  select[1].kept_index = kept.slash_offsets;
  launch_recall_select_batch(select, stream);
}

DeviceSparseIndex run_single_rank_pattern_pipeline(const PatternPipelineParams& params, cudaStream_t stream) {
  const int64_t rows = checked_rows(params);
  const size_t kept = static_cast<size_t>(rows) * static_cast<size_t>(params.capacity);
  StreamBuffer sets((2 * static_cast<size_t>(rows) + 2 * kept) * 4, stream);
  KeptSetsOutput out;
  out.vertical_count = sets.as<int32_t>();
  out.slash_count = out.vertical_count + rows;
  out.vertical_keys = out.slash_count + rows;
  out.slash_offsets = out.vertical_keys + kept;
  launch_single_rank_estimate_select(params, out, stream);
  return launch_build_sparse_index(view_of(params, rows, out), single_rank_position(params), params.block_q,
                                   params.block_k, stream);
}

void launch_single_rank_pattern_pipeline(const PatternPipelineParams& params, const KeptSetsOutput& kept,
                                         DeviceSparseIndex& index, cudaStream_t stream) {
  const int64_t rows = checked_rows(params);
  require(index.block_q == params.block_q && index.block_k == params.block_k, "the index was allocated for blocks ",
          index.block_q, "x", index.block_k, ", the problem has ", params.block_q, "x", params.block_k);
  launch_single_rank_estimate_select(params, kept, stream);
  launch_build_sparse_index_into(view_of(params, rows, kept), single_rank_position(params), index, stream);
}

}  // namespace sparsering
