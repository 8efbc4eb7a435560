// Sparse attention backward: device code, launcher and its two instances (head dim 64, 128).
// Design (docs/kernels.md, "backward"), FlashAttention-2 style in two passes over one shared
// pair step (64 keys x 64 queries, 4 warps, each warp owning 16 keys):
//   S^T = K Q^T, P^T = exp(S^T - lse), dV += P^T dO, dP^T = V dO^T, dS^T = P^T (dP^T - delta),
//   dK += dS^T Q, and dQ += dS K through shared memory and fp32 atomics.
// Key-block pass: one CTA per (batch, KV head, 64-key sub-block) walks the transposed index over
//   every query head of the GQA group, so it owns its dK/dV rows (registers, one += at the end).
//   The next query tile's Q and dO (cp.async), statistics and index entry load while the current
//   one computes, so no warp waits on global memory before its MMAs.
// Column pass: one CTA per (row, 64-query tile) with vertical columns walks its gathered chunks;
//   each chunk's dK/dV goes out with fp32 atomics (many query tiles share a column).
// Tested against sparse_attn_bwd_ref in tests/kernels_gpu/sparse_attn_bwd_test.cpp.
#include "kernels/cuda/sparse_attn_bwd.hpp"

#include <cmath>
#include <cstdlib>
#include <string>

#include "common/error.hpp"
#include "kernels/cuda/attention_checks.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/key_items.cuh"
#include "kernels/cuda/sparse_attn_bwd_sm90.hpp"
#include "kernels/cuda/sparse_index_transpose.hpp"
#include "kernels/cuda/warp_mma.cuh"

namespace sparsering {
namespace {

using cuda::kTileRows;

constexpr int kBwdThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;

/// Shared memory of both backward kernels. The "fixed" side (K, V in the key-block pass; Q, dO
/// in the column pass) has one stage, the walking side two.
template <int kHeadDim>
struct BwdSmem {
  static constexpr int kTileBytes = cuda::kTileBytes<kHeadDim>;
  static constexpr int kFixedA = 0;                        // K or Q
  static constexpr int kFixedB = kFixedA + kTileBytes;     // V or dO
  static constexpr int kWalkA = kFixedB + kTileBytes;      // [2] Q or K
  static constexpr int kWalkB = kWalkA + 2 * kTileBytes;   // [2] dO or V
  static constexpr int kDs = kWalkB + 2 * kTileBytes;      // 64 x 64 bf16 dS^T
  static constexpr int kQStats = kDs + kTileRows * kTileRows * 2;  // [2][2][64] float: lse*log2e, delta
  static constexpr int kQGlobal = kQStats + 2 * 2 * kTileRows * 4; // [2][64] int32
  static constexpr int kKGlobal = kQGlobal + 2 * kTileRows * 4;    // [2][64] int32
  static constexpr int kBytes = kKGlobal + 2 * kTileRows * 4;      // two CTAs fit one SM (D = 128)
};

/// Offset in bf16 elements of chunk `chunk` of row `row` of the 64 x 64 dS^T tile, which is
/// XOR-swizzled (chunk ^ row mod 8) instead of padded so two CTAs still fit one SM.
__device__ __forceinline__ int ds_offset(int row, int chunk) { return row * kTileRows + ((chunk ^ (row & 7)) << 3); }

/// Per-thread accumulators of the warp's 16 keys: dK and dV, (16, D) in C-fragment layout.
template <int kHeadDim>
struct KeyGradients {
  float dk[kHeadDim / 8][4];
  float dv[kHeadDim / 8][4];
  __device__ void zero() {
#pragma unroll
    for (int dt = 0; dt < kHeadDim / 8; ++dt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[dt][e] = dv[dt][e] = 0.0f;
    }
  }
};

/// Shared-memory operands of one pair step (64 keys x 64 queries).
struct PairTiles {
  uint32_t k, v, q, dout, ds;    // shared addresses of swizzled tiles
  const float* lse2;             // [64] lse * log2(e) of the queries (+inf for absent rows)
  const float* delta;            // [64]
  const int32_t* q_global;       // [64] global positions (-1 for absent rows)
  const int32_t* k_global;       // [64] global positions (kNoKeyGlobal for absent keys)
};

/// One pair step: accumulates the warp's dK/dV rows and adds scale * dS K into dq with atomics
/// (`dq_rows` points at the (Sq, D) fp32 slice of the row, `q0` the first query, q_len bound).
/// `after_scores()` runs once S^T is computed, before anything reads the query statistics: the
/// key-block pass writes the next tile's statistics there, whose global loads were issued earlier.
template <int kHeadDim, typename AfterScores>
__device__ __forceinline__ void bwd_pair_step(const PairTiles& tiles, bool masked, float scale_log2, float scale,
                                              KeyGradients<kHeadDim>& grads, float* dq_rows, int64_t q0,
                                              int64_t q_len, AfterScores after_scores) {
  constexpr int kDSteps = kHeadDim / 16;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;

  // S^T (16 keys x 64 queries) = K Q^T.
  float s[8][4];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < kDSteps; ++kk) {
    uint32_t ka[4];
    cuda::ldmatrix_x4(ka, tiles.k + static_cast<uint32_t>(cuda::tile_offset<kHeadDim>(warp * 16 + lane % 16, kk * 2 + lane / 16) * 2));
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t qb[4];
      const int r = np * 16 + (lane % 8) + (lane / 16) * 8;
      cuda::ldmatrix_x4(qb, tiles.q + static_cast<uint32_t>(cuda::tile_offset<kHeadDim>(r, kk * 2 + (lane / 8) % 2) * 2));
      cuda::mma_bf16_16816(s[2 * np], ka, qb[0], qb[1]);
      cuda::mma_bf16_16816(s[2 * np + 1], ka, qb[2], qb[3]);
    }
  }
  after_scores();
  // P^T = exp(scale * S^T - lse), masked pairs 0. Query columns 2c, 2c+1 of a quad lane are
  // adjacent: one 8-byte shared load each for lse and (below) delta.
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    const float2 lse2 = *reinterpret_cast<const float2*>(tiles.lse2 + nt * 8 + (lane % 4) * 2);
    s[nt][0] = cuda::fast_exp2(fmaf(s[nt][0], scale_log2, -lse2.x));
    s[nt][1] = cuda::fast_exp2(fmaf(s[nt][1], scale_log2, -lse2.y));
    s[nt][2] = cuda::fast_exp2(fmaf(s[nt][2], scale_log2, -lse2.x));
    s[nt][3] = cuda::fast_exp2(fmaf(s[nt][3], scale_log2, -lse2.y));
  }
  if (masked) {
    const int32_t key_global0 = tiles.k_global[warp * 16 + lane / 4];
    const int32_t key_global1 = tiles.k_global[warp * 16 + lane / 4 + 8];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int2 q_global = *reinterpret_cast<const int2*>(tiles.q_global + nt * 8 + (lane % 4) * 2);
      if (q_global.x < key_global0) s[nt][0] = 0.0f;
      if (q_global.y < key_global0) s[nt][1] = 0.0f;
      if (q_global.x < key_global1) s[nt][2] = 0.0f;
      if (q_global.y < key_global1) s[nt][3] = 0.0f;
    }
  }
  // dV += P^T dO.
#pragma unroll
  for (int kq = 0; kq < 4; ++kq) {
    const uint32_t pa[4] = {cuda::pack_bf16x2(s[2 * kq][0], s[2 * kq][1]), cuda::pack_bf16x2(s[2 * kq][2], s[2 * kq][3]),
                            cuda::pack_bf16x2(s[2 * kq + 1][0], s[2 * kq + 1][1]),
                            cuda::pack_bf16x2(s[2 * kq + 1][2], s[2 * kq + 1][3])};
#pragma unroll
    for (int dp = 0; dp < kHeadDim / 16; ++dp) {
      uint32_t ob[4];
      const int r = kq * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
      cuda::ldmatrix_x4_trans(ob, tiles.dout + static_cast<uint32_t>(cuda::tile_offset<kHeadDim>(r, dp * 2 + lane / 16) * 2));
      cuda::mma_bf16_16816(grads.dv[2 * dp], pa, ob[0], ob[1]);
      cuda::mma_bf16_16816(grads.dv[2 * dp + 1], pa, ob[2], ob[3]);
    }
  }
  // dP^T = V dO^T, then dS^T = P^T (dP^T - delta) in place.
  float ds[8][4];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) ds[nt][0] = ds[nt][1] = ds[nt][2] = ds[nt][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < kDSteps; ++kk) {
    uint32_t va[4];
    cuda::ldmatrix_x4(va, tiles.v + static_cast<uint32_t>(cuda::tile_offset<kHeadDim>(warp * 16 + lane % 16, kk * 2 + lane / 16) * 2));
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t ob[4];
      const int r = np * 16 + (lane % 8) + (lane / 16) * 8;
      cuda::ldmatrix_x4(ob, tiles.dout + static_cast<uint32_t>(cuda::tile_offset<kHeadDim>(r, kk * 2 + (lane / 8) % 2) * 2));
      cuda::mma_bf16_16816(ds[2 * np], va, ob[0], ob[1]);
      cuda::mma_bf16_16816(ds[2 * np + 1], va, ob[2], ob[3]);
    }
  }
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    const float2 delta = *reinterpret_cast<const float2*>(tiles.delta + nt * 8 + (lane % 4) * 2);
    ds[nt][0] = s[nt][0] * (ds[nt][0] - delta.x);
    ds[nt][1] = s[nt][1] * (ds[nt][1] - delta.y);
    ds[nt][2] = s[nt][2] * (ds[nt][2] - delta.x);
    ds[nt][3] = s[nt][3] * (ds[nt][3] - delta.y);
  }
  // dK += dS^T Q (scale applied at the end), and dS^T to shared memory for dQ.
#pragma unroll
  for (int kq = 0; kq < 4; ++kq) {
    const uint32_t da[4] = {cuda::pack_bf16x2(ds[2 * kq][0], ds[2 * kq][1]), cuda::pack_bf16x2(ds[2 * kq][2], ds[2 * kq][3]),
                            cuda::pack_bf16x2(ds[2 * kq + 1][0], ds[2 * kq + 1][1]),
                            cuda::pack_bf16x2(ds[2 * kq + 1][2], ds[2 * kq + 1][3])};
#pragma unroll
    for (int dp = 0; dp < kHeadDim / 16; ++dp) {
      uint32_t qb[4];
      const int r = kq * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
      cuda::ldmatrix_x4_trans(qb, tiles.q + static_cast<uint32_t>(cuda::tile_offset<kHeadDim>(r, dp * 2 + lane / 16) * 2));
      cuda::mma_bf16_16816(grads.dk[2 * dp], da, qb[0], qb[1]);
      cuda::mma_bf16_16816(grads.dk[2 * dp + 1], da, qb[2], qb[3]);
    }
    // Row key = warp*16 + lane/4 (+8), query columns (2kq + half)*8 + (lane%4)*2: chunk 2kq + half.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        const int key = warp * 16 + lane / 4 + rr * 8;
        const uint32_t offset = static_cast<uint32_t>(ds_offset(key, 2 * kq + half) + (lane % 4) * 2);
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(tiles.ds + offset * 2), "r"(da[half * 2 + rr]));
      }
    }
  }
  __syncthreads();  // dS^T complete

  // dQ (16 queries of this warp x D) += scale * dS K, 32 columns of D at a time, fp32 atomics.
  uint32_t dsa[4][4];
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const int r = kk * 16 + (lane % 8) + (lane / 16) * 8;
    cuda::ldmatrix_x4_trans(dsa[kk], tiles.ds + static_cast<uint32_t>(ds_offset(r, warp * 2 + (lane / 8) % 2) * 2));
  }
  const int64_t row0 = q0 + warp * 16 + lane / 4;
#pragma unroll
  for (int dc = 0; dc < kHeadDim / 32; ++dc) {
    float acc[4][4];
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
      for (int dp = 0; dp < 2; ++dp) {
        uint32_t kb[4];
        const int r = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
        cuda::ldmatrix_x4_trans(kb, tiles.k + static_cast<uint32_t>(cuda::tile_offset<kHeadDim>(r, dc * 4 + dp * 2 + lane / 16) * 2));
        cuda::mma_bf16_16816(acc[2 * dp], dsa[kk], kb[0], kb[1]);
        cuda::mma_bf16_16816(acc[2 * dp + 1], dsa[kk], kb[2], kb[3]);
      }
    }
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int64_t q = row0 + rr * 8;
      if (q >= q_len) continue;
      float* dst = dq_rows + q * kHeadDim + dc * 32 + (lane % 4) * 2;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        cuda::atomic_add_float2(dst + nt * 8, acc[nt][2 * rr] * scale, acc[nt][2 * rr + 1] * scale);
      }
    }
  }
}

/// Statistics of query slot threadIdx.x (< 64) of a 64-query tile as read from global memory:
/// fetched early into registers, stored to shared memory later, so the loads' latency overlaps
/// other work. Rows past q_len keep the defaults (lse -inf, delta 0, position -1).
struct QueryStats {
  float lse = -INFINITY;
  float delta = 0.0f;
  int32_t q_global = -1;
};

/// Reads the statistics of this thread's query slot (threads 0..63; the others return defaults).
__device__ __forceinline__ QueryStats fetch_query_stats(const SparseAttnBwdParams& p, int64_t token_base, int64_t q0) {
  QueryStats stats;
  const int r = static_cast<int>(threadIdx.x);
  const int64_t q = q0 + r;
  if (r < kTileRows && q < p.shape.q_len) {
    stats.lse = p.lse[token_base + q];
    stats.delta = p.delta[token_base + q];
    stats.q_global = static_cast<int32_t>(p.position.layout.global_token(p.position.q_rank, q));
  }
  return stats;
}

/// Writes fetched statistics to shared memory (threads 0..63): lse * log2(e) (+inf for rows past
/// q_len or never computed, so their P is 0), delta, global position.
__device__ __forceinline__ void store_query_stats(float* lse2, float* delta, int32_t* q_global, const QueryStats& stats) {
  const int r = static_cast<int>(threadIdx.x);
  if (r >= kTileRows) return;
  lse2[r] = stats.lse == -INFINITY ? INFINITY : stats.lse * kLog2e;
  delta[r] = stats.delta;
  q_global[r] = stats.q_global;
}

/// Issues the cp.async loads of a 64-query tile of Q or dO (rows past q_len zero-filled).
template <int kHeadDim>
__device__ __forceinline__ void load_query_tile(uint32_t tile, const uint16_t* rows, int64_t q0, int64_t q_len) {
  cuda::load_tile_async<kHeadDim, kBwdThreads>(tile, rows, [&](int r) -> const uint16_t* {
    return q0 + r < q_len ? rows + (q0 + r) * kHeadDim : nullptr;
  });
}

/// Key-block pass: CTA per (segment = (b, hk, key block), 64-key sub-block), segments longest first
/// (TransposedIndexView::order).
template <int kHeadDim>
__global__ void __launch_bounds__(kBwdThreads, 2)
    sparse_attn_bwd_key_block_kernel(const SparseAttnBwdParams p, const TransposedIndexView transposed) {
  using Smem = BwdSmem<kHeadDim>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int k_subs = p.index.block_k / kTileRows;
  const int segment = transposed.order[blockIdx.x / k_subs];
  const int k_sub = static_cast<int>(blockIdx.x) % k_subs;
  const int entry_begin = transposed.offsets[segment];
  const int entry_end = transposed.offsets[segment + 1];
  const int q_subs = p.index.block_q / kTileRows;
  const int n_items = (entry_end - entry_begin) * q_subs;
  const int key_block = segment % transposed.key_blocks;
  const int bhk = segment / transposed.key_blocks;  // b * Hkv + hk
  const int64_t k0 = int64_t{key_block} * p.index.block_k + int64_t{k_sub} * kTileRows;
  if (n_items == 0 || k0 >= p.shape.kv_len) return;

  const int b = bhk / p.shape.kv_heads;
  const int hk = bhk % p.shape.kv_heads;
  const int64_t kv_rows = int64_t{bhk} * p.shape.kv_len;
  const uint32_t base = cuda::smem_address(smem_raw);
  float* stats = reinterpret_cast<float*>(smem_raw + Smem::kQStats);
  int32_t* q_globals = reinterpret_cast<int32_t*>(smem_raw + Smem::kQGlobal);
  int32_t* k_global = reinterpret_cast<int32_t*>(smem_raw + Smem::kKGlobal);

  cuda::KeyItem keys;
  keys.key0 = k0;
  keys.count = static_cast<int>(p.shape.kv_len - k0 < kTileRows ? p.shape.kv_len - k0 : kTileRows);
  cuda::load_item_async<kHeadDim, kBwdThreads>(base + Smem::kFixedA, p.k + kv_rows * kHeadDim, keys);
  cuda::load_item_async<kHeadDim, kBwdThreads>(base + Smem::kFixedB, p.v + kv_rows * kHeadDim, keys);
  cuda::store_item_globals(k_global, keys, p.position);

  // Item t = (entry t / q_subs, 64-query sub-tile t % q_subs). Entry codes are read one item
  // ahead of their use, so issuing an item's loads never waits on the transposed index.
  auto entry_code = [&](int t) { return transposed.entries[entry_begin + t / q_subs]; };
  auto item_query = [&](int code, int t, int& h, int64_t& q0, bool& masked) {
    const int g_i = code >> 1;
    masked = (code & 1) != 0 || keys.count < kTileRows;
    h = hk * transposed.group + g_i / transposed.q_blocks;
    q0 = int64_t{g_i % transposed.q_blocks} * p.index.block_q + int64_t{t % q_subs} * kTileRows;
  };
  // Issues the Q and dO copies of item t into `stage` and returns its statistics (fetched).
  auto issue = [&](int code, int t, int stage) {
    int h;
    int64_t q0;
    bool masked;
    item_query(code, t, h, q0, masked);
    const int64_t token_base = (int64_t{b} * p.shape.q_heads + h) * p.shape.q_len;
    load_query_tile<kHeadDim>(base + Smem::kWalkA + stage * Smem::kTileBytes, p.q + token_base * kHeadDim, q0, p.shape.q_len);
    load_query_tile<kHeadDim>(base + Smem::kWalkB + stage * Smem::kTileBytes, p.dout + token_base * kHeadDim, q0,
                              p.shape.q_len);
    cuda::cp_async_commit();
    return fetch_query_stats(p, token_base, q0);
  };
  // Stage s of the statistics: lse2 [64] | delta [64] at stats + s * 128, positions at q_globals + s * 64.
  auto store_stats = [&](int stage, const QueryStats& fetched) {
    float* lse2 = stats + stage * 2 * kTileRows;
    store_query_stats(lse2, lse2 + kTileRows, q_globals + stage * kTileRows, fetched);
  };
  int code_now = entry_code(0);
  store_stats(0, issue(code_now, 0, 0));
  int code_next = n_items > 1 ? entry_code(1) : 0;

  KeyGradients<kHeadDim> grads;
  grads.zero();
  const float scale_log2 = p.softmax_scale * kLog2e;
  for (int t = 0; t < n_items; ++t) {
    const int stage = t & 1;
    cuda::cp_async_wait<0>();
    __syncthreads();  // item t landed everywhere; item t-1 (its dS, its stage) fully consumed
    const bool has_next = t + 1 < n_items;
    QueryStats next_stats;
    int code_after = 0;
    if (has_next) {
      next_stats = issue(code_next, t + 1, stage ^ 1);
      if (t + 2 < n_items) code_after = entry_code(t + 2);
    }
    int h;
    int64_t q0;
    bool masked;
    item_query(code_now, t, h, q0, masked);
    const int64_t token_base = (int64_t{b} * p.shape.q_heads + h) * p.shape.q_len;
    PairTiles tiles;
    tiles.k = base + Smem::kFixedA;
    tiles.v = base + Smem::kFixedB;
    tiles.q = base + Smem::kWalkA + stage * Smem::kTileBytes;
    tiles.dout = base + Smem::kWalkB + stage * Smem::kTileBytes;
    tiles.ds = base + Smem::kDs;
    tiles.lse2 = stats + stage * 2 * kTileRows;
    tiles.delta = stats + stage * 2 * kTileRows + kTileRows;
    tiles.q_global = q_globals + stage * kTileRows;
    tiles.k_global = k_global;
    // Item t+1's statistics go to the other stage, last read by item t-1.
    bwd_pair_step<kHeadDim>(tiles, masked, scale_log2, p.softmax_scale, grads, p.dq + token_base * kHeadDim, q0,
                            p.shape.q_len, [&] {
                              if (has_next) store_stats(stage ^ 1, next_stats);
                            });
    code_now = code_next;
    code_next = code_after;
  }
  cuda::cp_async_wait<0>();

  // The CTA owns these dK/dV rows in this launch: plain read-add-write.
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int slot = warp * 16 + lane / 4 + rr * 8;
    if (slot >= keys.count) continue;
    const int64_t offset = (kv_rows + k0 + slot) * kHeadDim + (lane % 4) * 2;
#pragma unroll
    for (int dt = 0; dt < kHeadDim / 8; ++dt) {
      float2* dk = reinterpret_cast<float2*>(p.dk + offset + dt * 8);
      float2* dv = reinterpret_cast<float2*>(p.dv + offset + dt * 8);
      const float2 dk_old = *dk;
      const float2 dv_old = *dv;
      *dk = make_float2(fmaf(grads.dk[dt][2 * rr], p.softmax_scale, dk_old.x), fmaf(grads.dk[dt][2 * rr + 1], p.softmax_scale, dk_old.y));
      *dv = make_float2(dv_old.x + grads.dv[dt][2 * rr], dv_old.y + grads.dv[dt][2 * rr + 1]);
    }
  }
}

/// Column pass: CTA per (row, 64-query tile) over its gathered vertical chunks.
template <int kHeadDim>
__global__ void __launch_bounds__(kBwdThreads, 2) sparse_attn_bwd_column_kernel(const SparseAttnBwdParams p) {
  using Smem = BwdSmem<kHeadDim>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const SparseIndexView& index = p.index;
  const int row = static_cast<int>(blockIdx.x);
  const int q_subs = index.block_q / kTileRows;
  const int q_block = static_cast<int>(blockIdx.y) / q_subs;
  const int64_t q0 = int64_t{q_block} * index.block_q + int64_t{static_cast<int>(blockIdx.y) % q_subs} * kTileRows;
  if (q0 >= p.shape.q_len) return;
  const int64_t list = int64_t{row} * index.q_blocks + q_block;
  const int column_begin = index.column_offsets[list];
  const int column_end = index.column_offsets[list + 1];
  const int n_items = (column_end - column_begin + kTileRows - 1) / kTileRows;
  if (n_items == 0) return;

  const int b = row / p.shape.q_heads;
  const int h = row % p.shape.q_heads;
  const int hk = h / (p.shape.q_heads / p.shape.kv_heads);
  const int64_t token_base = int64_t{row} * p.shape.q_len;
  const int64_t kv_rows = (int64_t{b} * p.shape.kv_heads + hk) * p.shape.kv_len;
  const uint32_t base = cuda::smem_address(smem_raw);
  float* stats = reinterpret_cast<float*>(smem_raw + Smem::kQStats);
  int32_t* q_global = reinterpret_cast<int32_t*>(smem_raw + Smem::kQGlobal);
  int32_t* k_globals = reinterpret_cast<int32_t*>(smem_raw + Smem::kKGlobal);

  load_query_tile<kHeadDim>(base + Smem::kFixedA, p.q + token_base * kHeadDim, q0, p.shape.q_len);
  load_query_tile<kHeadDim>(base + Smem::kFixedB, p.dout + token_base * kHeadDim, q0, p.shape.q_len);
  store_query_stats(stats, stats + kTileRows, q_global, fetch_query_stats(p, token_base, q0));

  auto chunk = [&](int t) {
    cuda::KeyItem item;
    const int start = column_begin + t * kTileRows;
    item.columns = index.column_index + start;
    item.count = column_end - start < kTileRows ? column_end - start : kTileRows;
    item.masked = true;
    return item;
  };
  auto issue = [&](int t, int stage) {
    const cuda::KeyItem item = chunk(t);
    cuda::load_item_async<kHeadDim, kBwdThreads>(base + Smem::kWalkA + stage * Smem::kTileBytes, p.k + kv_rows * kHeadDim, item);
    cuda::load_item_async<kHeadDim, kBwdThreads>(base + Smem::kWalkB + stage * Smem::kTileBytes, p.v + kv_rows * kHeadDim, item);
    cuda::cp_async_commit();
    cuda::store_item_globals(k_globals + stage * kTileRows, item, p.position);
  };
  issue(0, 0);

  const float scale_log2 = p.softmax_scale * kLog2e;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  for (int t = 0; t < n_items; ++t) {
    const int stage = t & 1;
    cuda::cp_async_wait<0>();
    __syncthreads();
    if (t + 1 < n_items) issue(t + 1, stage ^ 1);
    PairTiles tiles;
    tiles.k = base + Smem::kWalkA + stage * Smem::kTileBytes;
    tiles.v = base + Smem::kWalkB + stage * Smem::kTileBytes;
    tiles.q = base + Smem::kFixedA;
    tiles.dout = base + Smem::kFixedB;
    tiles.ds = base + Smem::kDs;
    tiles.lse2 = stats;
    tiles.delta = stats + kTileRows;
    tiles.q_global = q_global;
    tiles.k_global = k_globals + stage * kTileRows;
    KeyGradients<kHeadDim> grads;
    grads.zero();
    bwd_pair_step<kHeadDim>(tiles, true, scale_log2, p.softmax_scale, grads, p.dq + token_base * kHeadDim, q0,
                            p.shape.q_len, [] {});
    const cuda::KeyItem item = chunk(t);
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int slot = warp * 16 + lane / 4 + rr * 8;
      if (slot >= item.count) continue;
      const int64_t offset = (kv_rows + item.columns[slot]) * kHeadDim + (lane % 4) * 2;
#pragma unroll
      for (int dt = 0; dt < kHeadDim / 8; ++dt) {
        cuda::atomic_add_float2(p.dk + offset + dt * 8, grads.dk[dt][2 * rr] * p.softmax_scale,
                                grads.dk[dt][2 * rr + 1] * p.softmax_scale);
        cuda::atomic_add_float2(p.dv + offset + dt * 8, grads.dv[dt][2 * rr], grads.dv[dt][2 * rr + 1]);
      }
    }
  }
  cuda::cp_async_wait<0>();
}

template <int kHeadDim>
void launch_bwd_instance(const SparseAttnBwdParams& params, BackwardKernel kernel, cudaStream_t stream) {
  constexpr int smem = BwdSmem<kHeadDim>::kBytes;
  const TransposedIndex transposed = launch_sparse_index_transpose(params.index, params.shape, stream);
  if (transposed.view.segments > 0) {
    if (kernel == BackwardKernel::wgmma) {
      launch_sparse_attn_bwd_key_blocks_sm90(params, transposed.view, stream);
    } else {
      SPARSERING_CUDA_CHECK(cudaFuncSetAttribute(sparse_attn_bwd_key_block_kernel<kHeadDim>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      const int64_t blocks = int64_t{transposed.view.segments} * (params.index.block_k / kTileRows);
      sparse_attn_bwd_key_block_kernel<kHeadDim>
          <<<static_cast<unsigned>(blocks), kBwdThreads, smem, stream>>>(params, transposed.view);
      SPARSERING_CUDA_CHECK(cudaGetLastError());
    }
  }
  if (kernel == BackwardKernel::wgmma && sparse_attn_bwd_columns_sm90_supports(params)) {
    launch_sparse_attn_bwd_columns_sm90(params, stream);
    return;
  }
  SPARSERING_CUDA_CHECK(
      cudaFuncSetAttribute(sparse_attn_bwd_column_kernel<kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(static_cast<unsigned>(params.index.rows),
                  static_cast<unsigned>(params.index.q_blocks * (params.index.block_q / kTileRows)));
  sparse_attn_bwd_column_kernel<kHeadDim><<<grid, kBwdThreads, smem, stream>>>(params);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

const char* backward_kernel_name(BackwardKernel kernel) {
  switch (kernel) {
    case BackwardKernel::automatic: return "automatic";
    case BackwardKernel::mma_sync: return "mma_sync";
    case BackwardKernel::wgmma: return "wgmma";
  }
  return "unknown";
}

std::string backward_kernel_unavailable(BackwardKernel kernel, const SparseAttnBwdParams& params) {
  if (kernel != BackwardKernel::wgmma) return "";
  if (!sparse_attn_bwd_sm90_built()) return "this build has no sm_90a code (CMAKE_CUDA_ARCHITECTURES lacks 90a)";
  int device = 0;
  SPARSERING_CUDA_CHECK(cudaGetDevice(&device));
  int major = 0;
  int minor = 0;
  SPARSERING_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  SPARSERING_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major != 9 || minor != 0) {
    return "the device has compute capability " + std::to_string(major) + "." + std::to_string(minor) +
           " (sm_90a code runs on 9.0 only)";
  }
  if (!sparse_attn_bwd_sm90_supports(params)) {
    return "it needs head dim 64 or 128 and fewer than 2^31 rows per tensor (head dim " +
           std::to_string(params.shape.head_dim) + ")";
  }
  return "";
}

BackwardKernel select_backward_kernel(const SparseAttnBwdParams& params) {
  if (const char* forced = std::getenv("SPARSERING_BACKWARD_KERNEL"); forced != nullptr && *forced != '\0') {
    const std::string value = forced;
    if (value == "mma_sync") return BackwardKernel::mma_sync;
    if (value == "wgmma") return BackwardKernel::wgmma;
    if (value != "automatic") {
      throw InputError("SPARSERING_BACKWARD_KERNEL='" + value + "': expected automatic, mma_sync or wgmma");
    }
  }
  return backward_kernel_unavailable(BackwardKernel::wgmma, params).empty() ? BackwardKernel::wgmma
                                                                            : BackwardKernel::mma_sync;
}

void launch_sparse_attn_bwd(const SparseAttnBwdParams& params, cudaStream_t stream, BackwardKernel kernel) {
  check_sparse_attn_bwd(params);
  if (params.index.rows == 0 || params.index.q_blocks == 0 || params.shape.kv_len == 0) return;
  if (kernel == BackwardKernel::automatic) kernel = select_backward_kernel(params);
  if (kernel == BackwardKernel::wgmma) {
    if (const std::string why = backward_kernel_unavailable(BackwardKernel::wgmma, params); !why.empty()) {
      throw InputError("the wgmma backward kernel cannot run here: " + why);
    }
  }
  if (params.shape.head_dim == 64) {
    launch_bwd_instance<64>(params, kernel, stream);
  } else {
    launch_bwd_instance<128>(params, kernel, stream);
  }
}

}  // namespace sparsering
