// Launchers of the vertical-slash pattern estimation (docs/algorithm.md section 2) on one key shard:
// pass 1 (per-query row statistics), the statistics combine across shards, pass 2 (vertical and
// slash mass). Semantics: EstimateParams in kernels/attention_params.hpp; CPU oracles:
// estimate_pattern_pass1_ref / _combine_ref / _pass2_ref. Tested in
// tests/kernels_gpu/estimate_pattern_test.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/attention_params.hpp"

namespace sparsering {

/// The kernels of both passes: mma.sync (every GPU of the build) or warpgroup MMAs (sm_90a builds
/// on compute capability 9.0; pass 1's in kernels/cuda/estimate_pattern_sm90.hpp); automatic
/// takes wgmma where it runs. Both write the same results (within float rounding).
enum class EstimateKernel { automatic, mma_sync, wgmma };

/// Empty when `kernel` can run on the current device, else why not.
std::string estimate_kernel_unavailable(EstimateKernel kernel);

/// Pass 1: row_max / row_sum of this shard (a query that sees no key of the shard gets
/// (-inf, 0)). Preconditions (checked, InputError): head_dim 64 or 128, Hq a multiple of Hkv,
/// 1 <= last_q (shape.q_len) <= N, kv_len == the layout's local length, N < 2^31, finite
/// softmax_scale >= FLT_MIN, non-null 16-byte aligned inputs, and a `kernel` that can run here.
void launch_estimate_pattern_pass1(const EstimateParams& params, cudaStream_t stream,
                                   EstimateKernel kernel = EstimateKernel::automatic);

/// Folds another shard's statistics into (row_max, row_sum), element-wise over `rows` entries:
/// m = max(m_a, m_b), s = s_a e^(m_a - m) + s_b e^(m_b - m), (-inf, 0) the identity.
void launch_estimate_pattern_combine(int64_t rows, const float* shard_max, const float* shard_sum, float* row_max,
                                     float* row_sum, cudaStream_t stream);

/// Pass 2 with the combined statistics: writes vertical_mass (B, Hq, Skv) and adds into
/// slash_mass (B, Hq, N) the probabilities of this shard's visible pairs. Same preconditions as
/// pass 1, plus the two mass arrays non-null.
void launch_estimate_pattern_pass2(const EstimateParams& params, cudaStream_t stream,
                                   EstimateKernel kernel = EstimateKernel::automatic);

}  // namespace sparsering
