// What the estimation's two pass-1 kernels share, its mma.sync kernel (estimate_pattern.cu) and
// its Hopper kernel (estimate_pattern_sm90.cu): the query-tile loads, the in-place causal mask and
// the online row statistics. Each thread folds the 16 scores it holds of a query row per 64-key
// tile into base-2 statistics of its own, and the four lanes of a quad (same rows, different keys)
// are combined once, at the end, when the partials are written.
#pragma once

#include <cfloat>
#include <cmath>

#include "kernels/cuda/warp_mma.cuh"

namespace sparsering::cuda {

/// Loads one warp's 16-query tile of the last queries, queries t0 .. t0 + 15 of a head whose
/// (last_q x kHeadDim) rows start at `q_rows`, as the bf16 A fragments of the head dimension's
/// k16 steps (the m16n8k16 A layout, which is also wgmma's register A layout), straight from
/// global memory; `q_global` gets the global positions of the thread's two rows (lane / 4 and + 8),
/// -1 for rows past last_q or when the tile is not valid (its fragments are then zero).
template <int kHeadDim>
__device__ __forceinline__ void load_query_fragments(uint32_t (&q)[kHeadDim / 16][4], int32_t (&q_global)[2],
                                                     const uint16_t* q_rows, int64_t t0, bool tile_valid,
                                                     int64_t last_q, int64_t first_query) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const uint32_t* q_words = reinterpret_cast<const uint32_t*>(q_rows);
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int64_t t = t0 + lane / 4 + rr * 8;
    const bool row_valid = tile_valid && t < last_q;
    q_global[rr] = row_valid ? static_cast<int32_t>(first_query + t) : -1;
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int64_t word = (t * kHeadDim + kk * 16 + half * 8 + (lane % 4) * 2) / 2;
        q[kk][rr + 2 * half] = row_valid ? q_words[word] : 0u;
      }
    }
  }
}

/// Sets to -inf, in place, the scores of a 16-query x 64-key tile that its queries may not see:
/// `s` is the thread's part of the tile in the m16n8 accumulator layout (s[4 nt + 2 rr + e]: row
/// lane / 4 + 8 rr, key 8 nt + 2 (lane % 4) + e; also the wgmma m64n64 layout of a warp), the
/// thread's two rows at global positions q_global[rr], the keys at key_global[0..63] (INT32_MAX
/// past kv_len). In place, so that the masked and unmasked paths leave the scores in the same
/// registers (no copies).
__device__ __forceinline__ void mask_tile_scores(float (&s)[32], const int32_t (&q_global)[2],
                                                 const int32_t* key_global) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int32_t key = key_global[nt * 8 + (lane % 4) * 2 + e];
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        if (q_global[rr] < key) s[4 * nt + 2 * rr + e] = -INFINITY;
      }
    }
  }
}

/// The 16 scores of row half rr of a tile in the m16n8 accumulator layout (see mask_tile_scores).
__device__ __forceinline__ void row_scores(const float (&s)[32], int rr, float (&v)[16]) {
#pragma unroll
  for (int c = 0; c < 16; ++c) v[c] = s[4 * (c / 2) + 2 * rr + c % 2];
}

/// Loads query m16-tile gm of a GQA group whose first query head is row `group_row` (batch x
/// query head) of q_last: head gm / m_tiles_per_head, queries (gm % m_tiles_per_head) x 16 + 0..15.
/// Gives its fragments and positions (load_query_fragments; zero and -1 for gm >= valid_m_tiles)
/// and where its rows' statistics go: the head's row and the tile's first query.
template <int kHeadDim>
__device__ __forceinline__ void load_group_query_tile(int gm, int valid_m_tiles, int m_tiles_per_head, int group_row,
                                                      const uint16_t* q_last, int64_t last_q, int64_t first_query,
                                                      uint32_t (&q)[kHeadDim / 16][4], int32_t (&q_global)[2],
                                                      int& out_row, int64_t& out_t) {
  const bool tile_valid = gm < valid_m_tiles;
  out_row = group_row + (tile_valid ? gm / m_tiles_per_head : 0);
  out_t = tile_valid ? int64_t{gm % m_tiles_per_head} * 16 : 0;
  load_query_fragments<kHeadDim>(q, q_global, q_last + int64_t{out_row} * last_q * kHeadDim, out_t, tile_valid, last_q,
                                 first_query);
}

/// One query row's statistics over the keys a thread holds: max2, the maximum of score x scale2
/// (scale2 = softmax scale x log2 e > 0), and sum, the sum of 2^(score x scale2 - ref2) against a
/// reference ref2 that trails max2 by at most kSlack, so no term exceeds 2^kSlack. The reference
/// moves only when a tile's maximum passes it by more than that (the row's first visible tile,
/// rarely another), so a tile's exponentials use the reference known before the tile and run
/// beside its maximum instead of after it; an exact running maximum would chain them.
struct RowStatistics {
  static constexpr float kSlack = 8.0f;
  float max2;
  float ref2;
  float sum;

  /// The statistics of no key. (An explicit call, not default member initializers: nvcc left
  /// some elements of a local array of this struct at zero.)
  __device__ __forceinline__ void reset() {
    max2 = -INFINITY;
    ref2 = -FLT_MAX;  // finite: a masked score (-inf) against it is -inf, never NaN
    sum = 0.0f;
  }

  /// Folds 16 raw scores of the row (masked ones -inf).
  __device__ __forceinline__ void fold(const float (&v)[16], float scale2) {
    float m[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) m[c] = fmaxf(v[c], v[c + 8]);
#pragma unroll
    for (int width = 4; width >= 1; width /= 2) {
#pragma unroll
      for (int c = 0; c < width; ++c) m[c] = fmaxf(m[c], m[c + width]);
    }
    const float tile_max = m[0] * scale2;
    float added = sum_of_powers(v, scale2, ref2);
    if (tile_max > ref2 + kSlack) {  // the first visible tile, or scores far above the reference
      added = sum_of_powers(v, scale2, tile_max);
      sum *= fast_exp2(ref2 - tile_max);  // 0 from the initial reference, where sum is 0
      ref2 = tile_max;
    }
    sum += added;
    max2 = fmaxf(max2, tile_max);
  }

  /// The statistics against max2 itself: sum of 2^(score x scale2 - max2); (-inf, 0) when the
  /// thread saw no visible key.
  __device__ __forceinline__ void finish(float& max_out, float& sum_out) const {
    max_out = max2;
    sum_out = max2 == -INFINITY ? 0.0f : sum * fast_exp2(ref2 - max2);
  }

 private:
  /// Sum of 2^(v[c] x scale2 - reference) over the 16 scores, as a tree.
  __device__ __forceinline__ static float sum_of_powers(const float (&v)[16], float scale2, float reference) {
    float e[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      e[c] = fast_exp2(fmaf(v[c], scale2, -reference)) + fast_exp2(fmaf(v[c + 8], scale2, -reference));
    }
#pragma unroll
    for (int width = 4; width >= 1; width /= 2) {
#pragma unroll
      for (int c = 0; c < width; ++c) e[c] += e[c + width];
    }
    return e[0];
  }
};

/// Combines the (max2, sum) of the four lanes of a quad (lane % 4 = 0..3; sums against max2, as
/// RowStatistics::finish gives them): afterwards every lane of the quad holds the row's
/// statistics over all their keys.
__device__ __forceinline__ void combine_quad_statistics(float& max2, float& sum) {
#pragma unroll
  for (int mask = 1; mask <= 2; mask <<= 1) {
    const float m_other = __shfl_xor_sync(0xffffffffu, max2, mask);
    const float s_other = __shfl_xor_sync(0xffffffffu, sum, mask);
    const float m_new = fmaxf(max2, m_other);
    sum = m_new == -INFINITY ? 0.0f : sum * fast_exp2(max2 - m_new) + s_other * fast_exp2(m_other - m_new);
    max2 = m_new;
  }
}

/// Ends a CTA's pass 1 for the thread's rows (kTiles 16-query tiles of two rows each, the tile's
/// head row `out_row` and first query `out_t`): combines the quad's lanes and lets one lane write
/// each row's partial at ((row x last_q + t) x chunks + chunk), the base-2 maximum and the sum
/// against it; rows past last_q (q_global < 0) write nothing.
template <int kTiles>
__device__ __forceinline__ void write_row_partials(const RowStatistics (&stats)[kTiles][2],
                                                   const int32_t (&q_global)[kTiles][2], const int (&out_row)[kTiles],
                                                   const int64_t (&out_t)[kTiles], int64_t last_q, int chunks,
                                                   int chunk, float* partial_max, float* partial_sum) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      float max2 = 0.0f;
      float sum = 0.0f;
      stats[i][rr].finish(max2, sum);
      combine_quad_statistics(max2, sum);
      const int64_t t = out_t[i] + lane / 4 + rr * 8;
      if (lane % 4 == 0 && q_global[i][rr] >= 0) {
        const int64_t at = (int64_t{out_row[i]} * last_q + t) * chunks + chunk;
        partial_max[at] = max2;
        partial_sum[at] = sum;
      }
    }
  }
}

}  // namespace sparsering::cuda
