// Sparse attention backward, Hopper path (sm_90a): the vertical-column pass. Same semantics as the
// mma.sync column kernel (sparse_attn_bwd.cu); what differs is the unit of work. Design
// (docs/kernels.md, "Hopper backward"): one CTA of three warpgroups per (row, 128 queries of a
// query block), walking the list's gathered columns 64 at a time:
//   producer (warpgroup 0): Q and dO of the 128 queries once (TMA), then every chunk's columns
//     (slot: local and global positions) and its K and V rows gathered with cp.async into a
//     kColumnStages-deep ring of swizzled tiles; "full" / "empty" mbarriers.
//   consumers (warpgroups 1 and 2, 64 queries each), per chunk:
//       S = Q K^T, dP = dO V^T          wgmma from shared memory (queries are M)
//       P = exp(scale S - lse), dS = P (dP - delta)
//       dQ += dS K                       wgmma, dS from registers: dQ stays in registers for the
//                                        whole list and goes out once (bulk tensor adds)
//       P and dS (bf16) to shared memory; both consumers meet; then the first computes
//       dV = P^T dO and the second dK = dS^T Q over all 128 queries (wgmma, P^T and dS^T read
//       transposed), 64 head-dim columns at a time, and add them into the chunk's rows with
//       fp32 atomics.
// Per 64 columns and 128 queries that is 2 x 64 x D atomics (dK, dV) where the mma.sync pass, per
// 64 queries, issues those and 64 x D more for dQ: a third of the atomic traffic. Needs query
// blocks of a multiple of 128 tokens. Tested against sparse_attn_bwd_ref in
// tests/kernels_gpu/sparse_attn_bwd_test.cpp (every case on both kernels).
#include <cuda.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/hopper_async.cuh"
#include "kernels/cuda/key_items.cuh"
#include "kernels/cuda/sparse_attn_bwd_sm90.hpp"
#include "kernels/cuda/tensor_map.hpp"

namespace sparsering {
namespace {

using cuda::kTileRows;

constexpr int kConsumers = 2;
constexpr int kColumnThreads = (kConsumers + 1) * 128;
constexpr int kProducerThreads = 128;
constexpr int kCtaRows = kConsumers * kTileRows;  ///< queries of a CTA
/// Column chunks in flight (each 64 columns of K and V and their slot).
constexpr int kColumnStages = 2;
/// Registers after reallocation: a consumer holds dQ (D/2), S, dP, a 64-column panel of dK or dV
/// and the packed dS. Within the 168 x 384 registers the CTA was launched with.
constexpr int kProducerRegisters = 40;
constexpr int kConsumerRegisters = 232;
static_assert((kProducerRegisters + kConsumers * kConsumerRegisters) * 128 <= 168 * kColumnThreads,
              "register reallocation must stay within the registers the CTA was launched with");

/// The tensor maps of Q and dO (bf16, 64 x 64 boxes) and dQ (fp32, 64 x 32 boxes), 128-byte swizzle.
struct ColumnTensorMaps {
  CUtensorMap q;
  CUtensorMap dout;
  CUtensorMap dq;
};

/// Dynamic shared memory: Q and dO (128 rows), the K and V ring, P and dS (128 queries x 64
/// columns, bf16, two buffers each so a chunk's tiles are written while the other consumer may
/// still read the previous chunk's), the slots and mbarriers, 1 KiB of alignment slack. After the
/// loop the P / dS buffers stage dQ (128 x D fp32).
template <int kHeadDim>
struct ColumnSmem {
  static constexpr int kRowsTileBytes = kCtaRows * kHeadDim * 2;
  static constexpr int kKvTileBytes = kTileRows * kHeadDim * 2;
  static constexpr int kPdsBytes = kCtaRows * kTileRows * 2;
  static constexpr int kQ = 0;
  static constexpr int kDout = kQ + kRowsTileBytes;
  static constexpr int kK = kDout + kRowsTileBytes;
  static constexpr int kV = kK + kColumnStages * kKvTileBytes;
  static constexpr int kP = kV + kColumnStages * kKvTileBytes;  // [2]
  static constexpr int kDs = kP + 2 * kPdsBytes;                // [2]
  static constexpr int kSlots = kDs + 2 * kPdsBytes;
  static constexpr int kBarriers = kSlots + kColumnStages * static_cast<int>(sizeof(cuda::ItemSlot));
  // full[kColumnStages], empty[kColumnStages], q_full: 8 bytes each
  static constexpr int kBytes = kBarriers + (2 * kColumnStages + 1) * 8 + 1024;
  static_assert(4 * kPdsBytes >= kCtaRows * kHeadDim * 4, "the P / dS buffers must stage dQ");
  static_assert(kBytes <= 227 * 1024, "more shared memory than an SM has");
};

#if defined(SPARSERING_SM90A_DEVICE_CODE)
using namespace cuda::sm90;
constexpr float kLog2e = 1.4426950408889634f;
constexpr uint32_t kPanel64 = kTileRows * kSwizzleRowBytes;   ///< a 64-row panel
constexpr uint32_t kPanel128 = kCtaRows * kSwizzleRowBytes;   ///< a 128-row panel

/// acc (64 queries x 64 columns) = A B^T over the head dimension: A the consumer's 64 rows of a
/// 128-row tile (Q or dO), B a 64-row chunk tile (K or V), both K-major. Committed, not waited for.
template <int kHeadDim>
__device__ __forceinline__ void issue_scores(float (&acc)[32], uint32_t a_rows, uint32_t b_tile) {
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    const uint32_t panel = static_cast<uint32_t>(kk / 4);
    const uint32_t column_bytes = static_cast<uint32_t>(kk % 4) * 32;
    wgmma_m64n64k16_ss<0, 0>(acc, swizzled_descriptor(a_rows + panel * kPanel128 + column_bytes, 0),
                             swizzled_descriptor(b_tile + panel * kPanel64 + column_bytes, 0), kk > 0 ? 1 : 0);
  }
  wgmma_commit();
}

/// dQ (64 queries x D) += dS K: dS from registers, K the chunk tile read MN-major.
template <int kHeadDim>
__device__ __forceinline__ void issue_dq(float (&dq)[kHeadDim / 2], const uint32_t (&a)[4][4], uint32_t k_tile) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint64_t b = swizzled_descriptor(k_tile + static_cast<uint32_t>(kk) * 2 * kSwizzleAtomBytes, kPanel64);
    if constexpr (kHeadDim == 128) {
      wgmma_m64n128k16_rs(dq, a[kk], b, 1);
    } else {
      wgmma_m64n64k16_rs(dq, a[kk], b, 1);
    }
  }
  wgmma_commit();
}

/// acc (64 columns x 64 head-dim columns of `panel`) = T^T R over the 128 queries: T (P or dS,
/// 128 queries x 64 columns) and R (dO or Q, 128 rows x D) read MN-major. Committed, not waited for.
__device__ __forceinline__ void issue_column_gradient(float (&acc)[32], uint32_t t_tile, uint32_t r_tile, int panel) {
#pragma unroll
  for (int kk = 0; kk < kCtaRows / 16; ++kk) {
    const uint32_t queries = static_cast<uint32_t>(kk) * 2 * kSwizzleAtomBytes;
    wgmma_m64n64k16_ss<1, 1>(acc, swizzled_descriptor(t_tile + queries, kPanel64),
                             swizzled_descriptor(r_tile + static_cast<uint32_t>(panel) * kPanel128 + queries, kPanel128),
                             kk > 0 ? 1 : 0);
  }
  wgmma_commit();
}

/// Writes a consumer's bf16 A fragments (64 queries x 64 columns; rows offset by `row0`) into a
/// 128-row swizzled tile: row = query, 16-byte chunk = 8 columns.
__device__ __forceinline__ void store_fragments(uint32_t tile, const uint32_t (&a)[4][4], int row0) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = (static_cast<int>(threadIdx.x) % 128) / 32;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = row0 + warp * 16 + lane / 4 + (e % 2) * 8;
      const int chunk = 2 * kk + e / 2;
      const uint32_t address = tile + swizzled_offset(kCtaRows, row, chunk) + static_cast<uint32_t>(lane % 4) * 4;
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(address), "r"(a[kk][e]) : "memory");
    }
  }
}

/// Where one CTA's shared memory is.
template <int kHeadDim>
struct ColumnCta {
  uint32_t q_tile;
  uint32_t dout_tile;
  uint32_t k_tiles;
  uint32_t v_tiles;
  uint32_t p_tiles;
  uint32_t ds_tiles;
  uint32_t full;
  uint32_t empty;
  uint32_t q_full;
  cuda::ItemSlot* slots;

  __device__ uint32_t k_stage(int s) const { return k_tiles + static_cast<uint32_t>(s * ColumnSmem<kHeadDim>::kKvTileBytes); }
  __device__ uint32_t v_stage(int s) const { return v_tiles + static_cast<uint32_t>(s * ColumnSmem<kHeadDim>::kKvTileBytes); }
  __device__ uint32_t p_buffer(int t) const { return p_tiles + static_cast<uint32_t>((t & 1) * ColumnSmem<kHeadDim>::kPdsBytes); }
  __device__ uint32_t ds_buffer(int t) const { return ds_tiles + static_cast<uint32_t>((t & 1) * ColumnSmem<kHeadDim>::kPdsBytes); }
};

/// The CTA's list and rows.
struct ColumnWork {
  int column_begin;
  int column_end;
  int n_chunks;
  int64_t q0;        ///< first query of the CTA
  int64_t q_row0;    ///< (B, Hq, Sq) row of q0
  int64_t kv_row0;   ///< (B, Hkv, Skv) row of key 0 of the head
};

/// The producer warpgroup: Q and dO once, then every chunk's slot, K and V.
template <int kHeadDim>
__device__ __forceinline__ void produce_columns(const SparseAttnBwdParams& p, const ColumnTensorMaps& maps,
                                                const ColumnCta<kHeadDim>& cta, const ColumnWork& work) {
  const int tid = static_cast<int>(threadIdx.x);  // 0 .. 127 in the producer warpgroup
  if (tid == 0) {
    mbarrier_arrive_expect_tx(cta.q_full, static_cast<uint32_t>(2 * ColumnSmem<kHeadDim>::kRowsTileBytes));
#pragma unroll
    for (int panel = 0; panel < kHeadDim / 64; ++panel) {
#pragma unroll
      for (int half = 0; half < kConsumers; ++half) {
        const uint32_t offset = static_cast<uint32_t>(panel) * kPanel128 + static_cast<uint32_t>(half) * kPanel64;
        const int32_t row = static_cast<int32_t>(work.q_row0 + half * kTileRows);
        tma_load_2d(cta.q_tile + offset, &maps.q, panel * 64, row, cta.q_full);
        tma_load_2d(cta.dout_tile + offset, &maps.dout, panel * 64, row, cta.q_full);
      }
    }
  }
  const uint16_t* k_gmem = p.k + work.kv_row0 * kHeadDim;
  const uint16_t* v_gmem = p.v + work.kv_row0 * kHeadDim;
  for (int t = 0; t < work.n_chunks; ++t) {
    const int s = t % kColumnStages;
    if (t >= kColumnStages) mbarrier_wait(cta.empty + 8 * s, static_cast<uint32_t>((t / kColumnStages - 1) & 1));
    cuda::ItemSlot& slot = cta.slots[s];
    if (tid < kTileRows) {
      const int position = work.column_begin + t * kTileRows + tid;
      const int32_t column = position < work.column_end ? p.index.column_index[position] : -1;
      slot.row[tid] = column;
      slot.global[tid] =
          column >= 0 ? static_cast<int32_t>(p.position.layout.global_token(p.position.kv_rank, column)) : cuda::kNoKeyGlobal;
    }
    named_barrier_sync(1, kProducerThreads);  // the slot's rows, for the loads below
    auto rows = [&slot](const uint16_t* base) {
      return [&slot, base](int r) -> const uint16_t* {
        const int32_t row = slot.row[r];
        return row >= 0 ? base + int64_t{row} * kHeadDim : nullptr;
      };
    };
    load_swizzled_tile_async<kHeadDim, kTileRows, kProducerThreads>(cta.k_stage(s), k_gmem, rows(k_gmem));
    load_swizzled_tile_async<kHeadDim, kTileRows, kProducerThreads>(cta.v_stage(s), v_gmem, rows(v_gmem));
    const uint32_t full = cta.full + 8 * s;
    mbarrier_arrive_on_cp_async(full);
    mbarrier_arrive(full);
  }
}

/// One consumer's walk over the chunks (see the file comment); returns with dQ in `dq`.
template <int kHeadDim>
__device__ __forceinline__ void consume_columns(const SparseAttnBwdParams& p, const ColumnCta<kHeadDim>& cta,
                                                const ColumnWork& work, int consumer, float (&dq)[kHeadDim / 2]) {
  const int tid = static_cast<int>(threadIdx.x) % 128;
  const int lane = tid % 32;
  const int warp = tid / 32;
  const float scale_log2 = p.softmax_scale * kLog2e;
  // The statistics of this thread's two query rows, once.
  float lse2[2];
  float delta[2];
  int32_t q_global[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int local = consumer * kTileRows + warp * 16 + lane / 4 + rr * 8;
    const int64_t q = work.q0 + local;
    const bool present = q < p.shape.q_len;
    const float lse = present ? p.lse[work.q_row0 + local] : -INFINITY;
    lse2[rr] = lse == -INFINITY ? INFINITY : lse * kLog2e;
    delta[rr] = present ? p.delta[work.q_row0 + local] : 0.0f;
    q_global[rr] = present ? static_cast<int32_t>(p.position.layout.global_token(p.position.q_rank, q)) : -1;
  }
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) dq[i] = 0.0f;
  const uint32_t q_rows = cta.q_tile + static_cast<uint32_t>(consumer) * kPanel64;
  const uint32_t dout_rows = cta.dout_tile + static_cast<uint32_t>(consumer) * kPanel64;
  mbarrier_wait(cta.q_full, 0);

  for (int t = 0; t < work.n_chunks; ++t) {
    const int s = t % kColumnStages;
    mbarrier_wait(cta.full + 8 * s, static_cast<uint32_t>((t / kColumnStages) & 1));
    fence_proxy_async_shared();  // cp.async-gathered tiles, for wgmma
    float sc[32];  // S, then P
    float dp[32];  // dP, then dS
    wgmma_fence();
    issue_scores<kHeadDim>(sc, q_rows, cta.k_stage(s));
    issue_scores<kHeadDim>(dp, dout_rows, cta.v_stage(s));
    wgmma_wait<1>();
    fence_registers(sc);
    // Accumulator row = query (warp*16 + lane/4, + 8), column = chunk slot 8nt + 2(lane%4) + j.
    const cuda::ItemSlot& slot = cta.slots[s];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int2 key = *reinterpret_cast<const int2*>(slot.global + nt * 8 + (lane % 4) * 2);
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        float& x0 = sc[4 * nt + 2 * rr];
        float& x1 = sc[4 * nt + 2 * rr + 1];
        x0 = q_global[rr] < key.x ? 0.0f : cuda::fast_exp2(fmaf(x0, scale_log2, -lse2[rr]));
        x1 = q_global[rr] < key.y ? 0.0f : cuda::fast_exp2(fmaf(x1, scale_log2, -lse2[rr]));
      }
    }
    wgmma_wait<0>();
    fence_registers(dp);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        dp[4 * nt + 2 * rr] = sc[4 * nt + 2 * rr] * (dp[4 * nt + 2 * rr] - delta[rr]);
        dp[4 * nt + 2 * rr + 1] = sc[4 * nt + 2 * rr + 1] * (dp[4 * nt + 2 * rr + 1] - delta[rr]);
      }
    }
    uint32_t pa[4][4];
    uint32_t da[4][4];
    pack_a_fragments(pa, sc);
    pack_a_fragments(da, dp);
    wgmma_fence();
    issue_dq<kHeadDim>(dq, da, cta.k_stage(s));
    store_fragments(cta.p_buffer(t), pa, consumer * kTileRows);
    store_fragments(cta.ds_buffer(t), da, consumer * kTileRows);
    fence_proxy_async_shared();
    named_barrier_sync(2, kConsumers * 128);  // both consumers' P and dS of this chunk

    // The first consumer: dV = P^T dO; the second: dK = scale dS^T Q. Row = chunk slot
    // warp*16 + lane/4 (+ 8), column = head dim 64 panel + 8nt + 2(lane%4).
    const uint32_t t_tile = consumer == 0 ? cta.p_buffer(t) : cta.ds_buffer(t);
    const uint32_t r_tile = consumer == 0 ? cta.dout_tile : cta.q_tile;
    float* target = consumer == 0 ? p.dv : p.dk;
    const float factor = consumer == 0 ? 1.0f : p.softmax_scale;
#pragma unroll 1
    for (int panel = 0; panel < kHeadDim / 64; ++panel) {
      float acc[32];
      wgmma_fence();
      issue_column_gradient(acc, t_tile, r_tile, panel);
      wgmma_wait<0>();
      fence_registers(acc);
      fence_registers(dq);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) fence_registers(da[kk]);
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        const int32_t column = slot.row[warp * 16 + lane / 4 + rr * 8];
        if (column < 0) continue;
        float* dst = target + (work.kv_row0 + column) * kHeadDim + panel * 64 + (lane % 4) * 2;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          cuda::atomic_add_float2(dst + nt * 8, acc[4 * nt + 2 * rr] * factor, acc[4 * nt + 2 * rr + 1] * factor);
        }
      }
    }
    mbarrier_arrive(cta.empty + 8 * s);  // K, V and the slot of this chunk are no longer read
  }
}

/// Stages a consumer's dQ (64 x D fp32, scaled) into 32-column swizzled boxes at `staging` for
/// the bulk tensor adds.
template <int kHeadDim>
__device__ __forceinline__ void stage_dq(uint32_t staging, const float (&dq)[kHeadDim / 2], float scale) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = (static_cast<int>(threadIdx.x) % 128) / 32;
#pragma unroll
  for (int nt = 0; nt < kHeadDim / 8; ++nt) {
    const uint32_t box = staging + static_cast<uint32_t>((nt / 4) * kTileRows * kSwizzleRowBytes);
    const int chunk = (nt % 4) * 2 + (lane % 4) / 2;
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int row = warp * 16 + lane / 4 + rr * 8;
      const uint32_t address =
          box + static_cast<uint32_t>(row * kSwizzleRowBytes + ((chunk ^ (row % 8)) * 16) + (lane % 2) * 8);
      asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(address), "f"(dq[4 * nt + 2 * rr] * scale),
                   "f"(dq[4 * nt + 2 * rr + 1] * scale)
                   : "memory");
    }
  }
}
#endif

template <int kHeadDim>
__global__ void __launch_bounds__(kColumnThreads, 1)
    sparse_attn_bwd_sm90_column_kernel(const SparseAttnBwdParams p, const __grid_constant__ ColumnTensorMaps maps) {
#if defined(SPARSERING_SM90A_DEVICE_CODE)
  using Smem = ColumnSmem<kHeadDim>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t raw = cuda::smem_address(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  unsigned char* base_ptr = smem_raw + (base - raw);

  const SparseIndexView& index = p.index;
  const int row = static_cast<int>(blockIdx.x);
  const int q_subs = index.block_q / kCtaRows;
  const int q_block = static_cast<int>(blockIdx.y) / q_subs;
  ColumnWork work;
  work.q0 = int64_t{q_block} * index.block_q + int64_t{static_cast<int>(blockIdx.y) % q_subs} * kCtaRows;
  if (work.q0 >= p.shape.q_len) return;
  const int64_t list = int64_t{row} * index.q_blocks + q_block;
  work.column_begin = index.column_offsets[list];
  work.column_end = index.column_offsets[list + 1];
  work.n_chunks = (work.column_end - work.column_begin + kTileRows - 1) / kTileRows;
  if (work.n_chunks == 0) return;
  const int b = row / p.shape.q_heads;
  const int hk = (row % p.shape.q_heads) / (p.shape.q_heads / p.shape.kv_heads);
  work.q_row0 = int64_t{row} * p.shape.q_len + work.q0;
  work.kv_row0 = (int64_t{b} * p.shape.kv_heads + hk) * p.shape.kv_len;

  ColumnCta<kHeadDim> cta;
  cta.q_tile = base + Smem::kQ;
  cta.dout_tile = base + Smem::kDout;
  cta.k_tiles = base + Smem::kK;
  cta.v_tiles = base + Smem::kV;
  cta.p_tiles = base + Smem::kP;
  cta.ds_tiles = base + Smem::kDs;
  cta.slots = reinterpret_cast<cuda::ItemSlot*>(base_ptr + Smem::kSlots);
  cta.full = base + Smem::kBarriers;
  cta.empty = cta.full + 8 * kColumnStages;
  cta.q_full = cta.empty + 8 * kColumnStages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kColumnStages; ++s) {
      mbarrier_init(cta.full + 8 * s, kProducerThreads);
      mbarrier_init(cta.empty + 8 * s, kConsumers * 128);
    }
    mbarrier_init(cta.q_full, 1);
    mbarrier_init_fence();
  }
  __syncthreads();

  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  if (warpgroup == 0) {
    registers_decrease<kProducerRegisters>();
    produce_columns<kHeadDim>(p, maps, cta, work);
    return;
  }
  registers_increase<kConsumerRegisters>();
  const int consumer = warpgroup - 1;
  float dq[kHeadDim / 2];
  consume_columns<kHeadDim>(p, cta, work, consumer, dq);

  // dQ out once: both consumers are past their last wgmma reading P / dS (the barrier), so those
  // buffers stage it. Rows past q_len are 0 (their P is 0): adding them to the next head's rows
  // changes nothing; rows past the tensor are clipped.
  named_barrier_sync(2, kConsumers * 128);
  const uint32_t staging = cta.p_tiles + static_cast<uint32_t>(consumer * kTileRows * kHeadDim * 4);
  stage_dq<kHeadDim>(staging, dq, p.softmax_scale);
  fence_proxy_async_shared();
  named_barrier_sync(3 + consumer, 128);
  if (threadIdx.x % 128 == 0) {
#pragma unroll
    for (int box = 0; box < kHeadDim / 32; ++box) {
      tma_reduce_add_2d(&maps.dq, staging + static_cast<uint32_t>(box * kTileRows * kSwizzleRowBytes), box * 32,
                        static_cast<int32_t>(work.q_row0 + consumer * kTileRows));
    }
    bulk_commit_group();
    bulk_wait_group();
  }
#else
  (void)p;
  (void)maps;
#endif
}

template <int kHeadDim>
void launch_columns(const SparseAttnBwdParams& params, cudaStream_t stream) {
  constexpr int smem = ColumnSmem<kHeadDim>::kBytes;
  SPARSERING_CUDA_CHECK(
      cudaFuncSetAttribute(sparse_attn_bwd_sm90_column_kernel<kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const AttentionShape& shape = params.shape;
  const int64_t q_rows = int64_t{shape.batch} * shape.q_heads * shape.q_len;
  ColumnTensorMaps maps;
  maps.q = make_swizzled_tensor_map(params.q, q_rows, kHeadDim);
  maps.dout = make_swizzled_tensor_map(params.dout, q_rows, kHeadDim);
  maps.dq = make_swizzled_tensor_map(params.dq, q_rows, kHeadDim);
  const dim3 grid(static_cast<unsigned>(params.index.rows),
                  static_cast<unsigned>(params.index.q_blocks * (params.index.block_q / kCtaRows)));
  sparse_attn_bwd_sm90_column_kernel<kHeadDim><<<grid, kColumnThreads, smem, stream>>>(params, maps);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

bool sparse_attn_bwd_columns_sm90_supports(const SparseAttnBwdParams& params) {
  return sparse_attn_bwd_sm90_supports(params) && params.index.block_q % kCtaRows == 0;
}

void launch_sparse_attn_bwd_columns_sm90(const SparseAttnBwdParams& params, cudaStream_t stream) {
  if (params.shape.head_dim == 64) {
    launch_columns<64>(params, stream);
  } else {
    launch_columns<128>(params, stream);
  }
}

}  // namespace sparsering
