// The Hopper (sm_90a) path of the estimation's pass 1 (row statistics): warpgroup MMAs whose
// asynchrony overlaps one query tile's scores with the other's exponentials
// (kernels/cuda/estimate_pattern_sm90.cu). Chosen by launch_estimate_pattern_pass1
// (kernels/cuda/estimate_pattern.hpp); not meant to be called directly.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/attention_params.hpp"

namespace sparsering {

/// Keys per pass-1 CTA and query rows of a GQA group per CTA ("round"), shared by both pass-1
/// kernels: they write the same per-chunk partials, which one fold kernel combines.
inline constexpr int kEstimatePass1ChunkKeys = 2048;
inline constexpr int kEstimatePass1RowsPerCta = 256;

/// Queues the Hopper pass-1 kernel over a grid of (chunks, batch x kv_heads, rounds) CTAs, writing
/// the base-2 (max, sum) partials of every (row, query, chunk) at ((row x last_q + t) x chunks +
/// chunk). The caller has checked the problem and the device (sm90a_code_unavailable).
void launch_estimate_pattern_pass1_sm90(const EstimateParams& params, int chunks, int m_tiles_per_head, int rounds,
                                        float* partial_max, float* partial_sum, cudaStream_t stream);

}  // namespace sparsering
