// Vertical-slash pattern estimation: device code and launchers (see estimate_pattern.hpp).
// Both passes tile the problem as (row, 1024-key chunk) CTAs of 4 warps; each warp scores 16 of
// the last queries against 64-key tiles with mma.sync (K double-buffered through cp.async), in
// fp32 with the causal mask from the token layout. Pass 1 keeps an online (max, sum) per query
// and chunk, and a small kernel folds the chunks. Pass 2 recomputes the scores, turns them into
// probabilities with the combined statistics into a shared tile, from which one thread per key
// sums its column (a chunk's keys belong to one CTA, so vertical_mass is written, not added) and
// one thread per diagonal sums it before one global atomic per diagonal (a per-pair atomic when
// the tile's keys are not consecutive global positions). Tested against the CPU references in
// tests/kernels_gpu/estimate_pattern_test.cpp.
#include "kernels/cuda/estimate_pattern.hpp"

#include <cmath>

#include "common/error.hpp"
#include "kernels/cuda/attention_checks.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/warp_mma.cuh"

namespace sparsering {
namespace {

using cuda::kTileRows;

constexpr int kEstimateThreads = 128;
constexpr int kChunkTiles = 16;  // key tiles per CTA
constexpr int kChunkKeys = kChunkTiles * kTileRows;
constexpr float kLog2e = 1.4426950408889634f;

void check_estimate(const EstimateParams& p, bool pass2) {
  const AttentionShape& shape = p.shape;
  require(shape.batch >= 1 && shape.q_heads >= 1 && shape.kv_heads >= 1 && shape.q_heads % shape.kv_heads == 0,
          "shape: batch, q_heads >= 1 and kv_heads dividing q_heads required, got ", shape.batch, ", ", shape.q_heads,
          ", ", shape.kv_heads);
  require(shape.head_dim == 64 || shape.head_dim == 128, "shape.head_dim must be 64 or 128, got ", shape.head_dim);
  const TokenLayout& layout = p.position.layout;
  require(layout.seq_len_tokens() < (int64_t{1} << 31), "position.layout.seq_len_tokens must be < 2^31, got ",
          layout.seq_len_tokens());
  require(p.position.kv_rank >= 0 && p.position.kv_rank < layout.ranks(), "position.kv_rank = ", p.position.kv_rank,
          " is outside [0, ", layout.ranks(), ")");
  require(shape.q_len >= 1 && shape.q_len <= layout.seq_len_tokens(), "last_q (shape.q_len) = ", shape.q_len,
          " must be in [1, ", layout.seq_len_tokens(), "]");
  require(shape.kv_len == layout.local_len(), "shape.kv_len = ", shape.kv_len, " must equal the layout's local length ",
          layout.local_len());
  require(std::isfinite(p.softmax_scale), "softmax_scale = ", p.softmax_scale, " is not finite");
  check_device_pointer(p.q_last, 16, "q_last");
  check_device_pointer(p.k, 16, "k");
  check_device_pointer(p.row_max, 4, "row_max");
  check_device_pointer(p.row_sum, 4, "row_sum");
  if (pass2) {
    check_device_pointer(p.vertical_mass, 4, "vertical_mass");
    check_device_pointer(p.slash_mass, 4, "slash_mass");
  }
}

/// Shared-memory layout of both passes: Q tile, 2 K stages, key global positions [2][64], and
/// (pass 2) the chunk's vertical sums [1024] and one tile's probabilities [64][65] (padded).
template <int kHeadDim>
struct EstimateSmem {
  static constexpr int kTile = cuda::kTileBytes<kHeadDim>;
  static constexpr int kQ = 0;
  static constexpr int kK = kTile;
  static constexpr int kKeyGlobal = 3 * kTile;
  static constexpr int kVertical = kKeyGlobal + 2 * kTileRows * 4;
  static constexpr int kProbs = kVertical + kChunkKeys * 4;
  static constexpr int kBytes = kProbs + kTileRows * (kTileRows + 1) * 4;
};

/// The CTA's (query tile, key chunk) walk: loads Q rows q0.. and the chunk's key tiles
/// (double-buffered), and calls visit(tile, s, key_global) with each warp's 16 x 64 scores
/// (scaled, -inf where masked) after the tile's keys landed.
template <int kHeadDim, typename Visit>
__device__ __forceinline__ void for_each_score_tile(const EstimateParams& p, int row, int64_t q0, int64_t key_begin,
                                                    unsigned char* smem, Visit visit) {
  using Smem = EstimateSmem<kHeadDim>;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int b = row / p.shape.q_heads;
  const int h = row % p.shape.q_heads;
  const int hk = h / (p.shape.q_heads / p.shape.kv_heads);
  const int64_t last_q = p.shape.q_len;
  const int64_t kv_len = p.shape.kv_len;
  const uint16_t* q_rows = p.q_last + int64_t{row} * last_q * kHeadDim;
  const uint16_t* k_rows = p.k + (int64_t{b} * p.shape.kv_heads + hk) * kv_len * kHeadDim;
  const uint32_t base = cuda::smem_address(smem);
  int32_t* key_global = reinterpret_cast<int32_t*>(smem + Smem::kKeyGlobal);
  const int64_t first_query = p.position.layout.seq_len_tokens() - last_q;
  const int tiles = static_cast<int>(min(int64_t{kChunkTiles}, (kv_len - key_begin + kTileRows - 1) / kTileRows));

  cuda::load_tile_async<kHeadDim, kEstimateThreads>(base + Smem::kQ, q_rows, [&](int r) -> const uint16_t* {
    return q0 + r < last_q ? q_rows + (q0 + r) * kHeadDim : nullptr;
  });
  auto issue = [&](int tile, int stage) {
    const int64_t k0 = key_begin + int64_t{tile} * kTileRows;
    cuda::load_tile_async<kHeadDim, kEstimateThreads>(base + Smem::kK + stage * Smem::kTile, k_rows,
                                                      [&](int r) -> const uint16_t* {
                                                        return k0 + r < kv_len ? k_rows + (k0 + r) * kHeadDim : nullptr;
                                                      });
    cuda::cp_async_commit();
    const int r = static_cast<int>(threadIdx.x);
    if (r < kTileRows) {
      key_global[stage * kTileRows + r] =
          k0 + r < kv_len ? static_cast<int32_t>(p.position.layout.global_token(p.position.kv_rank, k0 + r)) : INT32_MAX;
    }
  };
  issue(0, 0);
  int32_t q_global[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int64_t t = q0 + warp * 16 + lane / 4 + rr * 8;
    q_global[rr] = t < last_q ? static_cast<int32_t>(first_query + t) : -1;
  }
  uint32_t q_frag[kHeadDim / 16][4];
  for (int tile = 0; tile < tiles; ++tile) {
    const int stage = tile & 1;
    cuda::cp_async_wait<0>();
    __syncthreads();
    if (tile == 0) {
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        cuda::ldmatrix_x4(q_frag[kk], base + Smem::kQ +
                                          static_cast<uint32_t>(cuda::tile_offset<kHeadDim>(warp * 16 + lane % 16, kk * 2 + lane / 16) * 2));
      }
    }
    if (tile + 1 < tiles) issue(tile + 1, stage ^ 1);
    float s[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
    const uint32_t k_tile = base + Smem::kK + stage * Smem::kTile;
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t kf[4];
        const int r = np * 16 + (lane % 8) + (lane / 16) * 8;
        cuda::ldmatrix_x4(kf, k_tile + static_cast<uint32_t>(cuda::tile_offset<kHeadDim>(r, kk * 2 + (lane / 8) % 2) * 2));
        cuda::mma_bf16_16816(s[2 * np], q_frag[kk], kf[0], kf[1]);
        cuda::mma_bf16_16816(s[2 * np + 1], q_frag[kk], kf[2], kf[3]);
      }
    }
    const int32_t* kg = key_global + stage * kTileRows;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[nt][e] = q_global[e / 2] < kg[nt * 8 + (lane % 4) * 2 + (e & 1)] ? -INFINITY : s[nt][e] * p.softmax_scale;
      }
    }
    visit(tile, s, kg);
    __syncthreads();  // the visit's shared-memory use of this tile is complete
  }
  cuda::cp_async_wait<0>();
}

/// Pass 1: partial (max, sum) per (row, query, chunk) -> partial_max / partial_sum.
template <int kHeadDim>
__global__ void __launch_bounds__(kEstimateThreads)
    estimate_pattern_pass1_kernel(const EstimateParams p, int chunks, float* partial_max, float* partial_sum) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int chunk = static_cast<int>(blockIdx.x);
  const int row = static_cast<int>(blockIdx.y);
  const int64_t q0 = int64_t{blockIdx.z} * kTileRows;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  float m[2] = {-INFINITY, -INFINITY};
  float sum[2] = {0.0f, 0.0f};
  for_each_score_tile<kHeadDim>(p, row, q0, int64_t{chunk} * kChunkKeys, smem,
                                [&](int, float (&s)[8][4], const int32_t*) {
#pragma unroll
                                  for (int rr = 0; rr < 2; ++rr) {
                                    float tile_max = -INFINITY;
#pragma unroll
                                    for (int nt = 0; nt < 8; ++nt) {
                                      tile_max = fmaxf(tile_max, fmaxf(s[nt][2 * rr], s[nt][2 * rr + 1]));
                                    }
                                    const float new_max = fmaxf(m[rr], cuda::quad_max(tile_max));
                                    if (new_max == -INFINITY) continue;
                                    float add = 0.0f;
#pragma unroll
                                    for (int nt = 0; nt < 8; ++nt) {
                                      add += exp2f((s[nt][2 * rr] - new_max) * kLog2e) +
                                             exp2f((s[nt][2 * rr + 1] - new_max) * kLog2e);
                                    }
                                    sum[rr] = sum[rr] * exp2f((m[rr] - new_max) * kLog2e) + add;
                                    m[rr] = new_max;
                                  }
                                });
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const float total = cuda::quad_sum(sum[rr]);
    const int64_t t = q0 + warp * 16 + lane / 4 + rr * 8;
    if (lane % 4 == 0 && t < p.shape.q_len) {
      const int64_t at = (int64_t{row} * p.shape.q_len + t) * chunks + chunk;
      partial_max[at] = m[rr];
      partial_sum[at] = total;
    }
  }
}

/// Folds the chunks' partials of one (row, query) into row_max / row_sum (one thread each).
__global__ void estimate_pattern_fold_kernel(int64_t entries, int chunks, const float* partial_max,
                                             const float* partial_sum, float* row_max, float* row_sum) {
  const int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (e >= entries) return;
  float m = -INFINITY;
  for (int c = 0; c < chunks; ++c) m = fmaxf(m, partial_max[e * chunks + c]);
  float s = 0.0f;
  if (m != -INFINITY) {
    for (int c = 0; c < chunks; ++c) {
      const float mc = partial_max[e * chunks + c];
      if (mc != -INFINITY) s += partial_sum[e * chunks + c] * expf(mc - m);
    }
  }
  row_max[e] = m;
  row_sum[e] = s;
}

__global__ void estimate_pattern_combine_kernel(int64_t rows, const float* shard_max, const float* shard_sum,
                                                float* row_max, float* row_sum) {
  const int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (e >= rows) return;
  const float ma = row_max[e];
  const float mb = shard_max[e];
  const float m = fmaxf(ma, mb);
  if (m == -INFINITY) return;
  const float sa = ma == -INFINITY ? 0.0f : row_sum[e] * expf(ma - m);
  const float sb = mb == -INFINITY ? 0.0f : shard_sum[e] * expf(mb - m);
  row_max[e] = m;
  row_sum[e] = sa + sb;
}

/// Pass 2: CTA per (chunk, row); loops over the query tiles.
template <int kHeadDim>
__global__ void __launch_bounds__(kEstimateThreads) estimate_pattern_pass2_kernel(const EstimateParams p) {
  using Smem = EstimateSmem<kHeadDim>;
  extern __shared__ __align__(128) unsigned char smem[];
  const int chunk = static_cast<int>(blockIdx.x);
  const int row = static_cast<int>(blockIdx.y);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t key_begin = int64_t{chunk} * kChunkKeys;
  const int64_t n = p.position.layout.seq_len_tokens();
  const int64_t last_q = p.shape.q_len;
  float* vertical = reinterpret_cast<float*>(smem + Smem::kVertical);
  float* probs = reinterpret_cast<float*>(smem + Smem::kProbs);  // [64][65]
  for (int i = static_cast<int>(threadIdx.x); i < kChunkKeys; i += kEstimateThreads) vertical[i] = 0.0f;
  float* slash_row = p.slash_mass + int64_t{row} * n;

  for (int64_t q0 = 0; q0 < last_q; q0 += kTileRows) {
    // This thread's rows: statistics in base 2 (p = 2^(s log2e - m log2e) / sum).
    float row_m[2];
    float row_inv[2];
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int64_t t = q0 + warp * 16 + lane / 4 + rr * 8;
      const float sum = t < last_q ? p.row_sum[int64_t{row} * last_q + t] : 0.0f;
      row_m[rr] = t < last_q ? p.row_max[int64_t{row} * last_q + t] : 0.0f;
      row_inv[rr] = sum > 0.0f ? 1.0f / sum : 0.0f;  // no key anywhere: nothing to share out
    }
    const int64_t query_global0 = n - last_q + q0;
    for_each_score_tile<kHeadDim>(p, row, q0, key_begin, smem, [&](int tile, float (&s)[8][4], const int32_t* kg) {
      // The tile's probabilities go to shared memory; columns and diagonals are then summed by
      // one thread each (no shared atomics, conflict-free: row pitch 65 floats).
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = warp * 16 + lane / 4 + (e / 2) * 8;
          const int c = nt * 8 + (lane % 4) * 2 + (e & 1);
          probs[r * (kTileRows + 1) + c] =
              s[nt][e] == -INFINITY ? 0.0f : exp2f((s[nt][e] - row_m[e / 2]) * kLog2e) * row_inv[e / 2];
        }
      }
      __syncthreads();
      const int t = static_cast<int>(threadIdx.x);
      if (t < kTileRows) {
        float column = 0.0f;
        for (int r = 0; r < kTileRows; ++r) column += probs[r * (kTileRows + 1) + t];
        vertical[tile * kTileRows + t] += column;  // this thread alone owns the key in this CTA
      }
      // Keys of the tile at consecutive global positions: diagonal b = r - c + 63 is one offset.
      const bool consecutive = kg[kTileRows - 1] != INT32_MAX && kg[kTileRows - 1] - kg[0] == kTileRows - 1;
      if (consecutive) {
        if (t < 2 * kTileRows - 1) {
          const int shift = t - (kTileRows - 1);  // r - c
          float diagonal = 0.0f;
          for (int r = max(0, shift); r < min(kTileRows, kTileRows + shift); ++r) {
            diagonal += probs[r * (kTileRows + 1) + (r - shift)];
          }
          if (diagonal != 0.0f) atomicAdd(slash_row + (query_global0 - kg[0] + shift), diagonal);
        }
      } else {
        for (int e = t; e < kTileRows * kTileRows; e += kEstimateThreads) {
          const int r = e / kTileRows;
          const int c = e % kTileRows;
          const float prob = probs[r * (kTileRows + 1) + c];
          if (prob != 0.0f) atomicAdd(slash_row + (query_global0 + r - kg[c]), prob);
        }
      }
    });
  }
  __syncthreads();
  const int64_t kv_len = p.shape.kv_len;
  for (int i = static_cast<int>(threadIdx.x); i < kChunkKeys; i += kEstimateThreads) {
    if (key_begin + i < kv_len) p.vertical_mass[int64_t{row} * kv_len + key_begin + i] = vertical[i];
  }
}

template <int kHeadDim>
void launch_pass1_instance(const EstimateParams& p, cudaStream_t stream) {
  const int rows = p.shape.batch * p.shape.q_heads;
  const int chunks = static_cast<int>((p.shape.kv_len + kChunkKeys - 1) / kChunkKeys);
  const int64_t entries = int64_t{rows} * p.shape.q_len;
  if (chunks == 0) {  // an empty shard: every query sees no key
    estimate_pattern_fold_kernel<<<static_cast<unsigned>((entries + 255) / 256), 256, 0, stream>>>(
        entries, 0, nullptr, nullptr, p.row_max, p.row_sum);
    SPARSERING_CUDA_CHECK(cudaGetLastError());
    return;
  }
  StreamBuffer partials(static_cast<size_t>(entries) * static_cast<size_t>(chunks) * 8, stream);
  float* partial_max = partials.as<float>();
  float* partial_sum = partial_max + entries * chunks;
  constexpr int smem = EstimateSmem<kHeadDim>::kBytes;
  SPARSERING_CUDA_CHECK(
      cudaFuncSetAttribute(estimate_pattern_pass1_kernel<kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(rows),
                  static_cast<unsigned>((p.shape.q_len + kTileRows - 1) / kTileRows));
  estimate_pattern_pass1_kernel<kHeadDim><<<grid, kEstimateThreads, smem, stream>>>(p, chunks, partial_max, partial_sum);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
  estimate_pattern_fold_kernel<<<static_cast<unsigned>((entries + 255) / 256), 256, 0, stream>>>(
      entries, chunks, partial_max, partial_sum, p.row_max, p.row_sum);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

template <int kHeadDim>
void launch_pass2_instance(const EstimateParams& p, cudaStream_t stream) {
  const int rows = p.shape.batch * p.shape.q_heads;
  const int chunks = static_cast<int>((p.shape.kv_len + kChunkKeys - 1) / kChunkKeys);
  if (chunks == 0) return;
  constexpr int smem = EstimateSmem<kHeadDim>::kBytes;
  SPARSERING_CUDA_CHECK(
      cudaFuncSetAttribute(estimate_pattern_pass2_kernel<kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(rows));
  estimate_pattern_pass2_kernel<kHeadDim><<<grid, kEstimateThreads, smem, stream>>>(p);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void launch_estimate_pattern_pass1(const EstimateParams& params, cudaStream_t stream) {
  check_estimate(params, false);
  require(int64_t{params.shape.batch} * params.shape.q_heads <= 65535, "batch x q_heads must be <= 65535");
  if (params.shape.head_dim == 64) {
    launch_pass1_instance<64>(params, stream);
  } else {
    launch_pass1_instance<128>(params, stream);
  }
}

void launch_estimate_pattern_combine(int64_t rows, const float* shard_max, const float* shard_sum, float* row_max,
                                     float* row_sum, cudaStream_t stream) {
  require(rows >= 0, "rows = ", rows, " is negative");
  if (rows == 0) return;
  check_device_pointer(shard_max, 4, "shard_max");
  check_device_pointer(shard_sum, 4, "shard_sum");
  check_device_pointer(row_max, 4, "row_max");
  check_device_pointer(row_sum, 4, "row_sum");
  estimate_pattern_combine_kernel<<<static_cast<unsigned>((rows + 255) / 256), 256, 0, stream>>>(
      rows, shard_max, shard_sum, row_max, row_sum);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

void launch_estimate_pattern_pass2(const EstimateParams& params, cudaStream_t stream) {
  check_estimate(params, true);
  require(int64_t{params.shape.batch} * params.shape.q_heads <= 65535, "batch x q_heads must be <= 65535");
  if (params.shape.head_dim == 64) {
    launch_pass2_instance<64>(params, stream);
  } else {
    launch_pass2_instance<128>(params, stream);
  }
}

}  // namespace sparsering
