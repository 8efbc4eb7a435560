// Sparse attention backward, Hopper path (sm_90a): the key-block pass. Same semantics and walk of
// the transposed index as the mma.sync key-block kernel (sparse_attn_bwd.cu); what differs is how
// a CTA computes. Design (docs/kernels.md, "Hopper backward"): one CTA of three warpgroups per
// (batch, K/V head, key block, 128 keys) when key blocks are a multiple of 128 and the head dim
// is 128 ("paired": each consumer owns 64 of the keys and both take every item), per 64 keys
// otherwise (the consumers own the same keys and take alternate items), specialised:
//   producer (warpgroup 0, registers given away): loads the CTA's K and V once, then, for every
//     item (transposed-index entry x 64-query sub-tile), the item's statistics (lse, delta, query
//     positions) into its stage's slot and its Q and dO tiles with the bulk tensor copy engine
//     (TMA) into a ring of 128-byte-swizzled stages; "full" / "empty" mbarriers.
//   consumers (warpgroups 1 and 2), each holding dK and dV of 64 keys in registers (keys are the
//     M dimension of every product but dQ, so no transposes in registers):
//       S^T = K Q^T, dP^T = V dO^T          wgmma, both operands in shared memory
//       P^T = exp(scale S^T - lse), dS^T = P^T (dP^T - delta)
//       dV += P^T dO, dK += dS^T Q          wgmma, P^T / dS^T from registers
//       dQ += scale dS K                    wgmma from shared memory: dS^T is stored once, read
//                                           transposed; the fp32 tile goes through a swizzled
//                                           staging tile into dq by bulk tensor adds (one TMA
//                                           reduction per 32 columns instead of thread atomics,
//                                           which took 40% of the kernel). Paired, consumer c
//                                           computes head-dim half c over all 128 keys: half the
//                                           dQ traffic per key.
//     Unpaired, while one consumer exponentiates, the other's MMAs run.
// At the end each consumer adds its dK / dV into dk / dv (the CTA owns those rows in this launch);
// unpaired, the second hands its partial sums to the first through shared memory first. The vertical-column pass is in
// sparse_attn_bwd_columns_sm90.cu. Tested against sparse_attn_bwd_ref in tests/kernels_gpu/sparse_attn_bwd_test.cpp
// (every case on both kernels).
#include "kernels/cuda/sparse_attn_bwd_sm90.hpp"

#include <cuda.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/hopper_async.cuh"
#include "kernels/cuda/key_items.cuh"
#include "kernels/cuda/tensor_map.hpp"

namespace sparsering {
namespace {

using cuda::kTileRows;

constexpr int kConsumers = 2;
constexpr int kBwdThreads = (kConsumers + 1) * 128;
constexpr int kProducerThreads = 128;
/// Registers per thread after reallocation: the consumers hold dK, dV (D/2 each), S^T, dP^T and
/// the packed P^T / dS^T. The CTA keeps the registers it was launched with (168 per thread, the
/// most 384 threads get), so a consumer can only grow by what the producer gives up: an increase
/// beyond that pool waits forever.
constexpr int kProducerRegisters = 40;
constexpr int kConsumerRegisters = 232;
static_assert((kProducerRegisters + kConsumers * kConsumerRegisters) * 128 <= 168 * kBwdThreads,
              "register reallocation must stay within the registers the CTA was launched with");

/// The tensor maps of Q, dO, K and V (2-D: rows of all heads x head dim, 64 x 64 boxes, 128-byte
/// swizzle) and of dQ (fp32, 64 x 32 boxes), passed by value as a __grid_constant__ kernel parameter.
struct BwdTensorMaps {
  CUtensorMap q;
  CUtensorMap dout;
  CUtensorMap k;
  CUtensorMap v;
  CUtensorMap dq;
};

/// What the consumers need of an item besides its tiles, written by the producer.
struct BwdItemSlot {
  float lse2[kTileRows];      ///< lse x log2(e) of the item's queries, +inf for absent rows (P = 0)
  float delta[kTileRows];     ///< rowsum(dO x O)
  int32_t q_global[kTileRows];  ///< global positions, -1 for absent rows
  int64_t q_row0;             ///< (B, Hq, Sq) row of the item's first query
  int32_t q_valid;            ///< queries of the item inside q_len (1..64)
  int32_t masked;             ///< nonzero when the per-pair causal / bounds mask applies
};

/// Dynamic shared memory: K and V (64 or 128 rows), kStages Q and dO tiles, a dS^T tile and an
/// fp32 dQ staging tile per consumer, the slots and mbarriers, and 1 KiB of slack to align the
/// swizzled tiles to 1024 bytes. Unpaired, after the loop the Q and dO ring holds the second
/// consumer's dK / dV (2 x 64 x D fp32).
template <int kHeadDim, bool kPaired>
struct BwdSmem {
  static constexpr int kTileBytes = kTileRows * kHeadDim * 2;
  static constexpr int kKeyTiles = kPaired ? 2 : 1;  ///< 64-key tiles of K (and V) of the CTA
  /// Items in flight: each stage holds one item's Q and dO tiles (64 queries) and its slot.
  /// Unpaired, the consumers take alternate items, so the count is even: a stage's previous item
  /// is then the waiting consumer's own, and the "full" parity it waits for cannot be a phase
  /// older than the one it needs (with an odd count it may be the other consumer's, still
  /// loading, and the wait would pass on the phase before).
  static constexpr int kStages = kPaired ? 3 : 2;
  static constexpr int kK = 0;
  static constexpr int kV = kK + kKeyTiles * kTileBytes;
  static constexpr int kQ = kV + kKeyTiles * kTileBytes;
  static constexpr int kDout = kQ + kStages * kTileBytes;
  static constexpr int kDs = kDout + kStages * kTileBytes;
  static constexpr int kDqColumns = kPaired ? kHeadDim / kConsumers : kHeadDim;  ///< dQ columns per consumer
  static constexpr int kDqBytes = kTileRows * kDqColumns * 4;
  static constexpr int kDq = kDs + kConsumers * kTileRows * kTileRows * 2;
  static constexpr int kSlots = kDq + kConsumers * kDqBytes;
  static constexpr int kBarriers = kSlots + kStages * static_cast<int>(sizeof(BwdItemSlot));
  // full[kStages], empty[kStages], kv_full: 8 bytes each
  static constexpr int kBytes = kBarriers + (2 * kStages + 1) * 8 + 1024;
  static_assert(kPaired || 2 * kStages * kTileBytes >= 2 * kTileRows * kHeadDim * 4, "the ring must hold dK and dV");
  static_assert(!kPaired || kHeadDim == 128, "paired consumers split dQ into two 64-column halves");
  static_assert(kBytes <= 227 * 1024, "more shared memory than an SM has");
};

#if defined(SPARSERING_SM90A_DEVICE_CODE)
using namespace cuda::sm90;
constexpr float kLog2e = 1.4426950408889634f;
constexpr uint32_t kPanelBytes = kTileRows * kSwizzleRowBytes;  ///< 64 rows x 64 columns of a swizzled tile

/// acc (64 x 64) = A B^T over the head dimension with A, B two 64-row swizzled tiles (K-major):
/// S^T = K Q^T and dP^T = V dO^T. Committed as one group, not waited for.
template <int kHeadDim>
__device__ __forceinline__ void issue_rows_product(float (&acc)[32], uint32_t a_tile, uint32_t b_tile) {
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    const uint32_t offset = static_cast<uint32_t>(kk / 4) * kPanelBytes + static_cast<uint32_t>(kk % 4) * 32;
    wgmma_m64n64k16_ss<0, 0>(acc, swizzled_descriptor(a_tile + offset, 0), swizzled_descriptor(b_tile + offset, 0),
                             kk > 0 ? 1 : 0);
  }
  wgmma_commit();
}

/// acc (64 keys x D) += A T with A (64 keys x 64 queries, bf16) in registers and T a 64-query
/// swizzled tile (MN-major B): dV += P^T dO, dK += dS^T Q. Committed, not waited for.
template <int kHeadDim>
__device__ __forceinline__ void issue_key_gradient(float (&acc)[kHeadDim / 2], const uint32_t (&a)[4][4], uint32_t tile) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint64_t b = swizzled_descriptor(tile + static_cast<uint32_t>(kk) * 2 * kSwizzleAtomBytes, kPanelBytes);
    if constexpr (kHeadDim == 128) {
      wgmma_m64n128k16_rs(acc, a[kk], b, 1);
    } else {
      wgmma_m64n64k16_rs(acc, a[kk], b, 1);
    }
  }
  wgmma_commit();
}

/// acc (64 queries x 64 head-dim columns of `panel`) = dS K over kKeyTiles x 64 keys, with dS^T
/// (64-key tiles x 64 queries, consecutive) and K (64-key tiles x D, `k_tile_bytes` apart)
/// swizzled in shared memory, both read MN-major. Committed, not waited for.
template <int kKeyTiles>
__device__ __forceinline__ void issue_query_gradient(float (&acc)[32], uint32_t ds_tiles, uint32_t k_tiles,
                                                     uint32_t k_tile_bytes, int panel) {
#pragma unroll
  for (int kk = 0; kk < 4 * kKeyTiles; ++kk) {
    const uint32_t keys = static_cast<uint32_t>(kk % 4) * 2 * kSwizzleAtomBytes;
    const uint32_t tile = static_cast<uint32_t>(kk / 4);
    wgmma_m64n64k16_ss<1, 1>(acc, swizzled_descriptor(ds_tiles + tile * kTileRows * kSwizzleRowBytes + keys, kPanelBytes),
                             swizzled_descriptor(k_tiles + tile * k_tile_bytes +
                                                     static_cast<uint32_t>(panel) * kPanelBytes + keys,
                                                 kPanelBytes),
                             kk > 0 ? 1 : 0);
  }
  wgmma_commit();
}

/// Where one CTA's shared memory is.
template <int kHeadDim, bool kPaired>
struct CtaLayout {
  uint32_t k_tile;
  uint32_t v_tile;
  uint32_t q_tiles;
  uint32_t dout_tiles;
  uint32_t ds_tiles;
  uint32_t dq_tiles;
  uint32_t full;   ///< mbarrier of stage s at full + 8 s
  uint32_t empty;  ///< mbarrier of stage s at empty + 8 s
  uint32_t kv_full;
  BwdItemSlot* slots;
  float* handoff;  ///< the second consumer's dK / dV after the loop (over the Q and dO ring)

  __device__ uint32_t q_stage(int s) const {
    return q_tiles + static_cast<uint32_t>(s * BwdSmem<kHeadDim, kPaired>::kTileBytes);
  }
  __device__ uint32_t dout_stage(int s) const {
    return dout_tiles + static_cast<uint32_t>(s * BwdSmem<kHeadDim, kPaired>::kTileBytes);
  }
};

/// The CTA's place in the transposed index.
struct KeyBlockWork {
  int entry_begin;
  int n_items;  ///< entries x 64-query sub-tiles
  int q_subs;   ///< 64-query sub-tiles per query block
  int b;
  int hk;
  int64_t k0;        ///< first key of the CTA in the chunk
  int key_count;     ///< keys of the CTA inside kv_len (1 .. 64 or 128)
  int64_t kv_row0;   ///< (B, Hkv, Skv) row of key 0 of the head
};

/// Loads a 64-row tile (all head-dim panels) of the tensor `map` at `row` into `tile`.
template <int kHeadDim>
__device__ __forceinline__ void tma_load_tile(uint32_t tile, const void* map, int64_t row, uint32_t bar) {
#pragma unroll
  for (int panel = 0; panel < kHeadDim / 64; ++panel) {
    tma_load_2d(tile + static_cast<uint32_t>(panel) * kPanelBytes, map, panel * 64, static_cast<int32_t>(row), bar);
  }
}

/// The producer warpgroup: K and V once, then every item's slot, Q and dO, kStages ahead.
template <int kHeadDim, bool kPaired>
__device__ __forceinline__ void produce(const SparseAttnBwdParams& p, const TransposedIndexView& transposed,
                                        const BwdTensorMaps& maps, const CtaLayout<kHeadDim, kPaired>& cta,
                                        const KeyBlockWork& work) {
  using Smem = BwdSmem<kHeadDim, kPaired>;
  constexpr uint32_t kTileBytes = Smem::kTileBytes;
  const int tid = static_cast<int>(threadIdx.x);  // 0 .. 127 in the producer warpgroup
  if (tid == 0) {
    mbarrier_arrive_expect_tx(cta.kv_full, 2 * Smem::kKeyTiles * kTileBytes);
#pragma unroll
    for (int tile = 0; tile < Smem::kKeyTiles; ++tile) {
      const int64_t row = work.kv_row0 + work.k0 + tile * kTileRows;
      tma_load_tile<kHeadDim>(cta.k_tile + tile * kTileBytes, &maps.k, row, cta.kv_full);
      tma_load_tile<kHeadDim>(cta.v_tile + tile * kTileBytes, &maps.v, row, cta.kv_full);
    }
  }
  for (int t = 0; t < work.n_items; ++t) {
    const int s = t % Smem::kStages;
    if (t >= Smem::kStages) mbarrier_wait(cta.empty + 8 * s, static_cast<uint32_t>((t / Smem::kStages - 1) & 1));
    const int code = transposed.entries[work.entry_begin + t / work.q_subs];
    const int g_i = code >> 1;
    const int h = work.hk * transposed.group + g_i / transposed.q_blocks;
    const int64_t q0 = int64_t{g_i % transposed.q_blocks} * p.index.block_q + int64_t{t % work.q_subs} * kTileRows;
    const int64_t token_base = (int64_t{work.b} * p.shape.q_heads + h) * p.shape.q_len;
    BwdItemSlot& slot = cta.slots[s];
    if (tid < kTileRows) {
      const int64_t q = q0 + tid;
      const bool present = q < p.shape.q_len;
      const float lse = present ? p.lse[token_base + q] : -INFINITY;
      slot.lse2[tid] = lse == -INFINITY ? INFINITY : lse * kLog2e;
      slot.delta[tid] = present ? p.delta[token_base + q] : 0.0f;
      slot.q_global[tid] = present ? static_cast<int32_t>(p.position.layout.global_token(p.position.q_rank, q)) : -1;
    }
    const uint32_t full = cta.full + 8 * s;
    if (tid == 0) {
      slot.q_row0 = token_base + q0;
      slot.q_valid = static_cast<int32_t>(p.shape.q_len - q0 < kTileRows ? p.shape.q_len - q0 : kTileRows);
      slot.masked = (code & 1) != 0 || work.key_count < Smem::kKeyTiles * kTileRows ? 1 : 0;
      mbarrier_arrive_expect_tx(full, 2 * kTileBytes);
      // Rows past q_len belong to the next head (or lie outside the tensor: zero-filled); their
      // P is 0 through lse2 = +inf.
      tma_load_tile<kHeadDim>(cta.q_stage(s), &maps.q, token_base + q0, full);
      tma_load_tile<kHeadDim>(cta.dout_stage(s), &maps.dout, token_base + q0, full);
    } else {
      mbarrier_arrive(full);
    }
  }
}

/// Per-thread state of a consumer: dK and dV of its 2 key rows per n8 column group (rows
/// warp*16 + lane/4 and + 8), and the keys' global positions.
template <int kHeadDim>
struct KeyGradients {
  float dk[kHeadDim / 2];
  float dv[kHeadDim / 2];
  int32_t k_global[2];
};

/// One item of a consumer (see the file comment).
template <int kHeadDim, bool kPaired>
__device__ __forceinline__ void consume_item(const SparseAttnBwdParams& p, const BwdTensorMaps& maps,
                                             const CtaLayout<kHeadDim, kPaired>& cta, int t, uint32_t ds_tile,
                                             uint32_t dq_tile, int consumer, float scale_log2,
                                             KeyGradients<kHeadDim>& g) {
  using Smem = BwdSmem<kHeadDim, kPaired>;
  // Paired, consumer 1's keys are the second 64-key tile of the CTA's K and V.
  const uint32_t key_offset = kPaired ? static_cast<uint32_t>(consumer * Smem::kTileBytes) : 0u;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = (static_cast<int>(threadIdx.x) % 128) / 32;
  const int s = t % Smem::kStages;
  mbarrier_wait(cta.full + 8 * s, static_cast<uint32_t>((t / Smem::kStages) & 1));
  const uint32_t q_tile = cta.q_stage(s);
  const uint32_t dout_tile = cta.dout_stage(s);

  float st[32];  // S^T, then P^T
  float dp[32];  // dP^T, then dS^T
  wgmma_fence();
  issue_rows_product<kHeadDim>(st, cta.k_tile + key_offset, q_tile);
  issue_rows_product<kHeadDim>(dp, cta.v_tile + key_offset, dout_tile);
  wgmma_wait<1>();
  fence_registers(st);

  // P^T = exp2(scale log2(e) S^T - lse log2(e)); column c of the accumulator is query 8nt + 2(lane%4) + j.
  const BwdItemSlot& slot = cta.slots[s];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    const float2 lse2 = *reinterpret_cast<const float2*>(slot.lse2 + nt * 8 + (lane % 4) * 2);
    st[4 * nt + 0] = cuda::fast_exp2(fmaf(st[4 * nt + 0], scale_log2, -lse2.x));
    st[4 * nt + 1] = cuda::fast_exp2(fmaf(st[4 * nt + 1], scale_log2, -lse2.y));
    st[4 * nt + 2] = cuda::fast_exp2(fmaf(st[4 * nt + 2], scale_log2, -lse2.x));
    st[4 * nt + 3] = cuda::fast_exp2(fmaf(st[4 * nt + 3], scale_log2, -lse2.y));
  }
  if (slot.masked != 0) {
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int2 q_global = *reinterpret_cast<const int2*>(slot.q_global + nt * 8 + (lane % 4) * 2);
      if (q_global.x < g.k_global[0]) st[4 * nt + 0] = 0.0f;
      if (q_global.y < g.k_global[0]) st[4 * nt + 1] = 0.0f;
      if (q_global.x < g.k_global[1]) st[4 * nt + 2] = 0.0f;
      if (q_global.y < g.k_global[1]) st[4 * nt + 3] = 0.0f;
    }
  }
  wgmma_wait<0>();  // dP^T
  fence_registers(dp);
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    const float2 delta = *reinterpret_cast<const float2*>(slot.delta + nt * 8 + (lane % 4) * 2);
    dp[4 * nt + 0] = st[4 * nt + 0] * (dp[4 * nt + 0] - delta.x);
    dp[4 * nt + 1] = st[4 * nt + 1] * (dp[4 * nt + 1] - delta.y);
    dp[4 * nt + 2] = st[4 * nt + 2] * (dp[4 * nt + 2] - delta.x);
    dp[4 * nt + 3] = st[4 * nt + 3] * (dp[4 * nt + 3] - delta.y);
  }
  // Both products from registers go out together; P^T and dS^T are bf16 from here on, which keeps
  // dK, dV and the two fragments within the consumer's registers.
  uint32_t pa[4][4];
  uint32_t da[4][4];
  pack_a_fragments(pa, st);
  pack_a_fragments(da, dp);
  wgmma_fence();
  issue_key_gradient<kHeadDim>(g.dv, pa, dout_tile);
  issue_key_gradient<kHeadDim>(g.dk, da, q_tile);

  // dS^T to this consumer's swizzled tile: row = key, 16-byte chunk nt = queries 8nt .. 8nt+7.
  // da[kk] holds (row r0, chunk 2kk), (r0 + 8, 2kk), (r0, 2kk + 1), (r0 + 8, 2kk + 1).
  const int key_row = warp * 16 + lane / 4;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = key_row + (e % 2) * 8;
      const int chunk = 2 * kk + e / 2;
      const uint32_t address = ds_tile + swizzled_offset(kTileRows, row, chunk) + static_cast<uint32_t>(lane % 4) * 4;
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(address), "r"(da[kk][e]) : "memory");
    }
  }
  // dV and dK (issued before the stores above) done: the fragments, Q, dO and the slot are free.
  wgmma_wait<0>();
  fence_registers(g.dk);
  fence_registers(g.dv);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    fence_registers(pa[kk]);
    fence_registers(da[kk]);
  }
  const int64_t q_row0 = slot.q_row0;
  mbarrier_arrive(cta.empty + 8 * s);
  fence_proxy_async_shared();
  // The previous item's dQ reduction has read the staging tile before it is rewritten below.
  if (threadIdx.x % 128 == 0) bulk_wait_group_read();
  // The dS^T tile(s) the dQ wgmma reads: paired, both consumers'.
  if constexpr (kPaired) {
    named_barrier_sync(2, kConsumers * 128);
  } else {
    named_barrier_sync(2 + consumer, 128);
  }

  const float scale = p.softmax_scale;
  // Paired: head-dim panel `consumer` over both consumers' keys; else every panel over own keys.
  constexpr int kPanels = Smem::kDqColumns / 64;
#pragma unroll 1
  for (int i = 0; i < kPanels; ++i) {
    const int panel = kPaired ? consumer : i;
    float dq[32];
    wgmma_fence();
    issue_query_gradient<Smem::kKeyTiles>(dq, kPaired ? cta.ds_tiles : ds_tile, cta.k_tile, Smem::kTileBytes, panel);
    wgmma_wait<0>();
    fence_registers(dq);
    // Accumulator row = query warp*16 + lane/4 (+ 8), column = 8nt + 2(lane%4) of the panel, into
    // the staging tile: 32-column boxes of 64 rows x 128 bytes, 16-byte chunk c of row r at c ^ (r % 8).
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const uint32_t box = dq_tile + static_cast<uint32_t>((i * 2 + nt / 4) * kTileRows * kSwizzleRowBytes);
      const int chunk = (nt % 4) * 2 + (lane % 4) / 2;
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        const int row = warp * 16 + lane / 4 + rr * 8;
        const uint32_t address = box + static_cast<uint32_t>(row * kSwizzleRowBytes + ((chunk ^ (row % 8)) * 16) +
                                                             (lane % 2) * 8);
        asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(address), "f"(dq[4 * nt + 2 * rr] * scale),
                     "f"(dq[4 * nt + 2 * rr + 1] * scale)
                     : "memory");
      }
    }
  }
  // Rows past q_len hold zeros (their dS is 0): adding them to the next head's rows changes
  // nothing, and rows past the tensor are clipped.
  fence_proxy_async_shared();
  // The staging tile, for the reduction; paired, also both consumers' dQ wgmmas are done with the
  // dS^T tiles before either writes the next item's.
  if constexpr (kPaired) {
    named_barrier_sync(3, kConsumers * 128);
  } else {
    named_barrier_sync(2 + consumer, 128);
  }
  if (threadIdx.x % 128 == 0) {
    const int column0 = kPaired ? consumer * Smem::kDqColumns : 0;
#pragma unroll
    for (int box = 0; box < Smem::kDqColumns / 32; ++box) {
      tma_reduce_add_2d(&maps.dq, dq_tile + static_cast<uint32_t>(box * kTileRows * kSwizzleRowBytes),
                        column0 + box * 32, static_cast<int32_t>(q_row0));
    }
    bulk_commit_group();
  }
}
#endif

template <int kHeadDim, bool kPaired>
__global__ void __launch_bounds__(kBwdThreads, 1)
    sparse_attn_bwd_sm90_key_block_kernel(const SparseAttnBwdParams p, const TransposedIndexView transposed,
                                          const __grid_constant__ BwdTensorMaps maps) {
#if defined(SPARSERING_SM90A_DEVICE_CODE)
  using Smem = BwdSmem<kHeadDim, kPaired>;
  constexpr int kCtaKeys = Smem::kKeyTiles * kTileRows;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t raw = cuda::smem_address(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  unsigned char* base_ptr = smem_raw + (base - raw);

  const int k_subs = p.index.block_k / kCtaKeys;
  const int segment = transposed.order[blockIdx.x / k_subs];  // longest first
  const int k_sub = static_cast<int>(blockIdx.x) % k_subs;
  KeyBlockWork work;
  work.entry_begin = transposed.offsets[segment];
  work.q_subs = p.index.block_q / kTileRows;
  work.n_items = (transposed.offsets[segment + 1] - work.entry_begin) * work.q_subs;
  const int key_block = segment % transposed.key_blocks;
  const int bhk = segment / transposed.key_blocks;  // b * Hkv + hk
  work.k0 = int64_t{key_block} * p.index.block_k + int64_t{k_sub} * kCtaKeys;
  if (work.n_items == 0 || work.k0 >= p.shape.kv_len) return;
  work.b = bhk / p.shape.kv_heads;
  work.hk = bhk % p.shape.kv_heads;
  work.key_count = static_cast<int>(p.shape.kv_len - work.k0 < kCtaKeys ? p.shape.kv_len - work.k0 : kCtaKeys);
  work.kv_row0 = int64_t{bhk} * p.shape.kv_len;

  CtaLayout<kHeadDim, kPaired> cta;
  cta.k_tile = base + Smem::kK;
  cta.v_tile = base + Smem::kV;
  cta.q_tiles = base + Smem::kQ;
  cta.dout_tiles = base + Smem::kDout;
  cta.ds_tiles = base + Smem::kDs;
  cta.dq_tiles = base + Smem::kDq;
  cta.slots = reinterpret_cast<BwdItemSlot*>(base_ptr + Smem::kSlots);
  cta.handoff = reinterpret_cast<float*>(base_ptr + Smem::kQ);
  cta.full = base + Smem::kBarriers;
  cta.empty = cta.full + 8 * Smem::kStages;
  cta.kv_full = cta.empty + 8 * Smem::kStages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < Smem::kStages; ++s) {
      mbarrier_init(cta.full + 8 * s, kProducerThreads);
      mbarrier_init(cta.empty + 8 * s, kPaired ? kConsumers * 128 : 128);  // who takes an item
    }
    mbarrier_init(cta.kv_full, 1);
    mbarrier_init_fence();
  }
  __syncthreads();

  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  if (warpgroup == 0) {
    registers_decrease<kProducerRegisters>();
    produce<kHeadDim, kPaired>(p, transposed, maps, cta, work);
    return;
  }
  registers_increase<kConsumerRegisters>();

  const int consumer = warpgroup - 1;
  const int tid = static_cast<int>(threadIdx.x) % 128;
  const int warp = tid / 32;
  const int lane = tid % 32;
  KeyGradients<kHeadDim> g;
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) g.dk[i] = g.dv[i] = 0.0f;
  const int key0 = kPaired ? consumer * kTileRows : 0;  // this consumer's first key in the CTA
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int key = key0 + warp * 16 + lane / 4 + rr * 8;
    g.k_global[rr] = key < work.key_count
                         ? static_cast<int32_t>(p.position.layout.global_token(p.position.kv_rank, work.k0 + key))
                         : cuda::kNoKeyGlobal;
  }
  const uint32_t ds_tile = cta.ds_tiles + static_cast<uint32_t>(consumer * kTileRows * kTileRows * 2);
  const uint32_t dq_tile = cta.dq_tiles + static_cast<uint32_t>(consumer * Smem::kDqBytes);
  const float scale_log2 = p.softmax_scale * kLog2e;
  mbarrier_wait(cta.kv_full, 0);
  for (int t = kPaired ? 0 : consumer; t < work.n_items; t += kPaired ? 1 : kConsumers) {
    consume_item<kHeadDim, kPaired>(p, maps, cta, t, ds_tile, dq_tile, consumer, scale_log2, g);
  }
  if (tid == 0) bulk_wait_group();  // the last dQ reductions are done before the CTA's memory goes

  if constexpr (!kPaired) {
    // Both consumers are done with the ring; the second hands its dK / dV over through it
    // (element-major: thread i's element e at [e][i], conflict free).
    named_barrier_sync(4, kConsumers * 128);
    if (consumer == 1) {
#pragma unroll
      for (int i = 0; i < kHeadDim / 2; ++i) {
        cta.handoff[i * 128 + tid] = g.dk[i];
        cta.handoff[(kHeadDim / 2 + i) * 128 + tid] = g.dv[i];
      }
    }
    named_barrier_sync(4, kConsumers * 128);
    if (consumer == 1) return;
#pragma unroll
    for (int i = 0; i < kHeadDim / 2; ++i) {
      g.dk[i] += cta.handoff[i * 128 + tid];
      g.dv[i] += cta.handoff[(kHeadDim / 2 + i) * 128 + tid];
    }
  }
  // The CTA owns these dK/dV rows in this launch: plain read-add-write. Accumulator row = key
  // warp*16 + lane/4 (+ 8), column = 8nt + 2(lane%4).
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int key = key0 + warp * 16 + lane / 4 + rr * 8;
    if (key >= work.key_count) continue;
    const int64_t offset = (work.kv_row0 + work.k0 + key) * kHeadDim + (lane % 4) * 2;
#pragma unroll
    for (int nt = 0; nt < kHeadDim / 8; ++nt) {
      float2* dk = reinterpret_cast<float2*>(p.dk + offset + nt * 8);
      float2* dv = reinterpret_cast<float2*>(p.dv + offset + nt * 8);
      const float2 dk_old = *dk;
      const float2 dv_old = *dv;
      *dk = make_float2(fmaf(g.dk[4 * nt + 2 * rr], p.softmax_scale, dk_old.x),
                        fmaf(g.dk[4 * nt + 2 * rr + 1], p.softmax_scale, dk_old.y));
      *dv = make_float2(dv_old.x + g.dv[4 * nt + 2 * rr], dv_old.y + g.dv[4 * nt + 2 * rr + 1]);
    }
  }
#else
  (void)p;
  (void)transposed;
  (void)maps;
#endif
}

template <int kHeadDim, bool kPaired>
void launch_instance(const SparseAttnBwdParams& params, const TransposedIndexView& transposed, cudaStream_t stream) {
  constexpr int smem = BwdSmem<kHeadDim, kPaired>::kBytes;
  SPARSERING_CUDA_CHECK(cudaFuncSetAttribute(sparse_attn_bwd_sm90_key_block_kernel<kHeadDim, kPaired>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const AttentionShape& shape = params.shape;
  BwdTensorMaps maps;
  const int64_t q_rows = int64_t{shape.batch} * shape.q_heads * shape.q_len;
  const int64_t kv_rows = int64_t{shape.batch} * shape.kv_heads * shape.kv_len;
  maps.q = make_swizzled_tensor_map(params.q, q_rows, kHeadDim);
  maps.dout = make_swizzled_tensor_map(params.dout, q_rows, kHeadDim);
  maps.k = make_swizzled_tensor_map(params.k, kv_rows, kHeadDim);
  maps.v = make_swizzled_tensor_map(params.v, kv_rows, kHeadDim);
  maps.dq = make_swizzled_tensor_map(params.dq, q_rows, kHeadDim);
  const int64_t blocks = int64_t{transposed.segments} * (params.index.block_k / (kPaired ? 2 * kTileRows : kTileRows));
  sparse_attn_bwd_sm90_key_block_kernel<kHeadDim, kPaired>
      <<<static_cast<unsigned>(blocks), kBwdThreads, smem, stream>>>(params, transposed, maps);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

bool sparse_attn_bwd_sm90_built() {
#if defined(SPARSERING_HAVE_SM90A)
  return true;
#else
  return false;
#endif
}

bool sparse_attn_bwd_sm90_supports(const SparseAttnBwdParams& params) {
  // TMA coordinates are int32 rows of all heads.
  const AttentionShape& shape = params.shape;
  const int64_t rows = std::max(int64_t{shape.batch} * shape.q_heads * shape.q_len,
                                int64_t{shape.batch} * shape.kv_heads * shape.kv_len);
  return (shape.head_dim == 64 || shape.head_dim == 128) && rows < (int64_t{1} << 31) - kTileRows;
}

void launch_sparse_attn_bwd_key_blocks_sm90(const SparseAttnBwdParams& params, const TransposedIndexView& transposed,
                                            cudaStream_t stream) {
  if (params.shape.head_dim == 64) {
    launch_instance<64, false>(params, transposed, stream);
  } else if (params.index.block_k % (2 * kTileRows) == 0) {
    launch_instance<128, true>(params, transposed, stream);
  } else {
    launch_instance<128, false>(params, transposed, stream);
  }
}

}  // namespace sparsering
