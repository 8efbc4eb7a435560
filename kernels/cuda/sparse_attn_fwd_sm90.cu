// Sparse attention forward, Hopper path (sm_90a): device code and launcher. Same semantics, params
// and item walk as the mma.sync kernel (sparse_attn_fwd.cu); what differs is how a CTA computes.
// Design (docs/kernels.md, "Hopper forward"): one CTA of three warpgroups per (row, 128-query tile
// of a query block), specialised:
//   producer (warpgroup 0, registers given away): describes each key item in its stage's slot
//     (key rows, global positions, mask flag) and loads its K and V into a kFwdStages-deep ring of
//     128-byte-swizzled shared tiles: tile sub-tiles (contiguous keys) with the bulk tensor copy
//     engine (TMA, four copies per item issued by one thread), gathered vertical columns with
//     cp.async by all 128 threads. A "full" mbarrier per stage counts the arrivals, the TMA bytes
//     and the cp.async completions; an "empty" one tells the producer the consumers are done.
//   consumers (warpgroups 1 and 2, 64 query rows each): S = Q K^T with wgmma m64n64k16 (Q from
//     registers, loaded once from the Q tile; K from shared memory), online softmax, O += P V
//     with wgmma m64nDk16 (P from registers: the S accumulator layout is the A-fragment layout; V
//     from shared memory, MN-major). The consumers take turns at the tensor cores: in its turn
//     one issues S of item t+1 and P V of item t, waits for S, then computes the softmax of item
//     t+1 while P V and the other consumer's MMAs run (named barriers hand the turn over).
// At the end the step's (O, lse) merges into the running fp32 (out, lse) as in the sm_80 kernel.
// Tested against sparse_attn_fwd_ref in tests/kernels_gpu/sparse_attn_fwd_test.cpp (both kernels).
#include "kernels/cuda/sparse_attn_fwd_sm90.hpp"

#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/hopper_async.cuh"
#include "kernels/cuda/key_items.cuh"
#include "kernels/cuda/tensor_map.hpp"

namespace sparsering {
namespace {

using cuda::kTileRows;

constexpr int kConsumers = 2;
constexpr int kFwdThreads = (kConsumers + 1) * 128;
constexpr int kCtaRows = kConsumers * kTileRows;
constexpr int kProducerThreads = 128;
/// K/V stages in flight (each one item: 64 keys of K and V, and its slot).
constexpr int kFwdStages = 4;
/// Registers per thread after reallocation: the producer needs few, the consumers hold Q, S, two
/// P buffers and O. (56 + 2 x 224) x 128 <= 64K.
constexpr int kProducerRegisters = 56;
constexpr int kConsumerRegisters = 224;

/// The tensor maps of Q, K and V (2-D: rows of all heads x head dim, 64 x 64 boxes, 128-byte
/// swizzle), passed by value as a __grid_constant__ kernel parameter.
struct FwdTensorMaps {
  CUtensorMap q;
  CUtensorMap k;
  CUtensorMap v;
};

/// Dynamic shared memory: Q (128 rows), kFwdStages K and V tiles (64 rows), the stages' item
/// slots and mbarriers, and 1 KiB of slack to align the swizzled tiles to 1024 bytes.
template <int kHeadDim>
struct FwdSmem {
  static constexpr int kQ = 0;
  static constexpr int kKvTileBytes = kTileRows * kHeadDim * 2;
  static constexpr int kK = kQ + kCtaRows * kHeadDim * 2;
  static constexpr int kV = kK + kFwdStages * kKvTileBytes;
  static constexpr int kSlots = kV + kFwdStages * kKvTileBytes;
  static constexpr int kBarriers = kSlots + kFwdStages * static_cast<int>(sizeof(cuda::ItemSlot));
  // full[kFwdStages], empty[kFwdStages], q_full: 8 bytes each
  static constexpr int kBytes = kBarriers + (2 * kFwdStages + 1) * 8 + 1024;
};

#if defined(SPARSERING_SM90A_DEVICE_CODE)
using namespace cuda::sm90;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

/// A consumer's 64 query rows as the bf16 A fragments of the head dimension's k16 steps (the
/// m16n8k16 A layout per warp), held in registers for the whole list: S = Q K^T then reads only
/// K from shared memory (a quarter less shared-memory traffic per item than Q and K from there).
template <int kHeadDim>
struct QFragments {
  uint32_t a[kHeadDim / 16][4];
};

/// Loads this thread's Q fragments from the consumer's rows `q_wg` of the swizzled Q tile.
template <int kHeadDim>
__device__ __forceinline__ void load_q_fragments(QFragments<kHeadDim>& q, uint32_t q_wg) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int row = ((static_cast<int>(threadIdx.x) % 128) / 32) * 16 + lane / 4;  // and row + 8
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // columns 16 kk + 8 half + 2 (lane % 4), + 1
      const uint32_t within = static_cast<uint32_t>((lane % 4) * 4);
      const uint32_t top = q_wg + swizzled_offset(kCtaRows, row, 2 * kk + half) + within;
      const uint32_t bottom = q_wg + swizzled_offset(kCtaRows, row + 8, 2 * kk + half) + within;
      asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(q.a[kk][2 * half + 0]) : "r"(top));
      asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(q.a[kk][2 * half + 1]) : "r"(bottom));
    }
  }
}

/// S (64 x 64 per warpgroup) = Q K^T over the head dimension, 16 columns per wgmma (Q from
/// registers, K from shared memory, K-major); committed as one group, not waited for.
template <int kHeadDim>
__device__ __forceinline__ void issue_qk(float (&s)[32], const QFragments<kHeadDim>& q, uint32_t k_tile) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    const uint32_t panel = static_cast<uint32_t>(kk / 4);
    const uint32_t column_bytes = static_cast<uint32_t>(kk % 4) * 32;
    const uint64_t b = swizzled_descriptor(k_tile + panel * (kTileRows * kSwizzleRowBytes) + column_bytes, 0);
    wgmma_m64n64k16_rs<0>(s, q.a[kk], b, kk > 0 ? 1 : 0);
  }
  wgmma_commit();
}

/// O (64 x D per warpgroup) += P V, 16 keys per wgmma; committed, not waited for.
template <int kHeadDim>
__device__ __forceinline__ void issue_pv(float (&o)[kHeadDim / 2], const uint32_t (&pa)[4][4], uint32_t v_tile) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    // 16 keys = two 8-row swizzle atoms; panels of 64 head-dim columns kTileRows rows apart.
    const uint64_t b = swizzled_descriptor(v_tile + static_cast<uint32_t>(kk) * 2 * kSwizzleAtomBytes,
                                           kTileRows * kSwizzleRowBytes);
    if constexpr (kHeadDim == 128) {
      wgmma_m64n128k16_rs(o, pa[kk], b, 1);
    } else {
      wgmma_m64n64k16_rs(o, pa[kk], b, 1);
    }
  }
  wgmma_commit();
}

/// Where one CTA's shared memory and global tensors are.
template <int kHeadDim>
struct CtaLayout {
  uint32_t q_tile;
  uint32_t k_tiles;
  uint32_t v_tiles;
  uint32_t full;   ///< mbarrier of stage s at full + 8 s
  uint32_t empty;  ///< mbarrier of stage s at empty + 8 s
  uint32_t q_full;
  cuda::ItemSlot* slots;

  __device__ uint32_t k_stage(int s) const { return k_tiles + static_cast<uint32_t>(s * FwdSmem<kHeadDim>::kKvTileBytes); }
  __device__ uint32_t v_stage(int s) const { return v_tiles + static_cast<uint32_t>(s * FwdSmem<kHeadDim>::kKvTileBytes); }
};

/// The producer warpgroup: Q once, then every item's slot, K and V, kFwdStages ahead of the
/// consumers.
template <int kHeadDim>
__device__ __forceinline__ void produce(const SparseAttnFwdParams& p, const FwdTensorMaps& maps,
                                        const CtaLayout<kHeadDim>& cta, const cuda::KeyItemList& items, int n_items,
                                        int64_t q_tensor_row, int64_t kv_tensor_row) {
  constexpr int kPanels = kHeadDim / 64;
  constexpr uint32_t kPanelBytes = kTileRows * kSwizzleRowBytes;
  const int tid = static_cast<int>(threadIdx.x);  // 0 .. 127 in the producer warpgroup
  if (tid == 0) {
    mbarrier_arrive_expect_tx(cta.q_full, static_cast<uint32_t>(kCtaRows * kHeadDim * 2));
#pragma unroll
    for (int panel = 0; panel < kPanels; ++panel) {
#pragma unroll
      for (int half = 0; half < kConsumers; ++half) {
        tma_load_2d(cta.q_tile + static_cast<uint32_t>(panel * kCtaRows + half * kTileRows) * kSwizzleRowBytes, &maps.q,
                    panel * 64, static_cast<int32_t>(q_tensor_row + half * kTileRows), cta.q_full);
      }
    }
  }
  const uint16_t* k_gmem = p.k + kv_tensor_row * kHeadDim;
  const uint16_t* v_gmem = p.v + kv_tensor_row * kHeadDim;
  const int slot_r = tid % kTileRows;
  const bool slot_global = tid >= kTileRows;
  for (int t = 0; t < n_items; ++t) {
    const int s = t % kFwdStages;
    if (t >= kFwdStages) mbarrier_wait(cta.empty + 8 * s, static_cast<uint32_t>((t / kFwdStages - 1) & 1));
    cuda::ItemSlot& slot = cta.slots[s];
    const cuda::ItemSlotFetch fetch = cuda::fetch_item_slot(p.index, items, t, slot_r);
    cuda::finish_item_slot(slot, fetch, p.index, items, t, slot_r, p.shape.kv_len, p.position, slot_global);
    named_barrier_sync(1, kProducerThreads);  // the slot's rows, for the loads below
    const uint32_t full = cta.full + 8 * s;
    const int32_t key0 = slot.row[0];
    if (t < items.tile_items && key0 >= 0) {
      // Contiguous keys key0 .. key0+63 (rows past kv_len belong to the next head or lie outside
      // the tensor, which TMA zero-fills; the slot masks them either way).
      if (tid == 0) {
        mbarrier_arrive_expect_tx(full, static_cast<uint32_t>(2 * FwdSmem<kHeadDim>::kKvTileBytes));
#pragma unroll
        for (int panel = 0; panel < kPanels; ++panel) {
          const int32_t row = static_cast<int32_t>(kv_tensor_row + key0);
          tma_load_2d(cta.k_stage(s) + panel * kPanelBytes, &maps.k, panel * 64, row, full);
          tma_load_2d(cta.v_stage(s) + panel * kPanelBytes, &maps.v, panel * 64, row, full);
        }
      } else {
        mbarrier_arrive(full);
      }
    } else {
      // Gathered columns: cp.async with zero fill for empty slots.
      auto rows = [&slot](const uint16_t* base) {
        return [&slot, base](int r) -> const uint16_t* {
          const int32_t row = slot.row[r];
          return row >= 0 ? base + int64_t{row} * kHeadDim : nullptr;
        };
      };
      load_swizzled_tile_async<kHeadDim, kTileRows, kProducerThreads>(cta.k_stage(s), k_gmem, rows(k_gmem));
      load_swizzled_tile_async<kHeadDim, kTileRows, kProducerThreads>(cta.v_stage(s), v_gmem, rows(v_gmem));
      mbarrier_arrive_on_cp_async(full);
      mbarrier_arrive(full);
    }
  }
}

/// Per-thread state of a consumer's online softmax: 2 query rows per thread (lane / 4 and + 8 of
/// its warp's 16), the running output accumulators and the row statistics.
template <int kHeadDim>
struct SoftmaxState {
  float o[kHeadDim / 2];
  float row_max[2];
  float row_sum[2];
  int32_t q_global[2];
};

/// The consumers take turns at the tensor cores (named barriers 2 and 3): in its turn a consumer
/// issues its MMAs, then passes the turn and runs its softmax while the other's MMAs run.
__device__ __forceinline__ void take_turn(int consumer) { named_barrier_sync(2 + consumer, kConsumers * 128); }
__device__ __forceinline__ void pass_turn(int consumer) { named_barrier_arrive(2 + (1 - consumer), kConsumers * 128); }

/// The online softmax of one item, in place: S (complete, no MMA in flight on it) becomes the
/// item's probabilities, packed as bf16 A fragments into `pa`; the row maxima and sums move on to
/// the item. The running output must then be scaled by `alpha` before the item's P V is added;
/// returns whether any row of the warp needs that (the caller applies it once the previous P V
/// has completed).
template <int kHeadDim>
__device__ __forceinline__ bool item_softmax(const cuda::ItemSlot& slot, float scale_log2, float (&s)[32],
                                             uint32_t (&pa)[4][4], SoftmaxState<kHeadDim>& st, float (&alpha)[2]) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (slot.masked != 0) {
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int2 key = *reinterpret_cast<const int2*>(slot.global + nt * 8 + (lane % 4) * 2);
      if (st.q_global[0] < key.x) s[4 * nt + 0] = -INFINITY;
      if (st.q_global[0] < key.y) s[4 * nt + 1] = -INFINITY;
      if (st.q_global[1] < key.x) s[4 * nt + 2] = -INFINITY;
      if (st.q_global[1] < key.y) s[4 * nt + 3] = -INFINITY;
    }
  }
  float tile_max[2];
  bool grew = false;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float value = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) value = fmaxf(value, fmaxf(s[4 * nt + 2 * rr], s[4 * nt + 2 * rr + 1]));
    tile_max[rr] = cuda::quad_max(value) * scale_log2;
    grew = grew || tile_max[rr] > st.row_max[rr];
  }
  const bool rescale = __any_sync(0xffffffffu, grew);
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const float new_max = fmaxf(st.row_max[rr], tile_max[rr]);
    const float base = new_max == -INFINITY ? 0.0f : new_max;
    alpha[rr] = new_max == st.row_max[rr] ? 1.0f : cuda::fast_exp2(st.row_max[rr] - base);
    st.row_max[rr] = new_max;
    float sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      s[4 * nt + 2 * rr] = cuda::fast_exp2(fmaf(s[4 * nt + 2 * rr], scale_log2, -base));
      s[4 * nt + 2 * rr + 1] = cuda::fast_exp2(fmaf(s[4 * nt + 2 * rr + 1], scale_log2, -base));
      sum += s[4 * nt + 2 * rr] + s[4 * nt + 2 * rr + 1];
    }
    st.row_sum[rr] = st.row_sum[rr] * alpha[rr] + sum;
  }
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    pa[kk][0] = cuda::pack_bf16x2(s[8 * kk + 0], s[8 * kk + 1]);
    pa[kk][1] = cuda::pack_bf16x2(s[8 * kk + 2], s[8 * kk + 3]);
    pa[kk][2] = cuda::pack_bf16x2(s[8 * kk + 4], s[8 * kk + 5]);
    pa[kk][3] = cuda::pack_bf16x2(s[8 * kk + 6], s[8 * kk + 7]);
  }
  return rescale;
}

/// Scales the running output's two rows of this thread (before an item's P V is added).
template <int kHeadDim>
__device__ __forceinline__ void rescale_output(SoftmaxState<kHeadDim>& st, const float (&alpha)[2]) {
#pragma unroll
  for (int dt = 0; dt < kHeadDim / 8; ++dt) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      st.o[4 * dt + 2 * rr] *= alpha[rr];
      st.o[4 * dt + 2 * rr + 1] *= alpha[rr];
    }
  }
}

/// One step of a consumer for item t, whose probabilities are in `p_cur` (and O already scaled
/// for it): in its turn, issues S of item t+1 (when there is one) and O += P V of item t; after
/// passing the turn it waits for S, and the softmax of item t+1 into `p_next` runs while P V (and
/// the other consumer's MMAs) do; then it waits for P V, releases item t's stage and scales O for
/// item t+1.
/// The last step of consumer 1 keeps the turn (consumer 0 takes no further one).
template <int kHeadDim>
__device__ __forceinline__ void consume_step(const CtaLayout<kHeadDim>& cta, int t, int n_items, int consumer,
                                             const QFragments<kHeadDim>& q, float scale_log2, float (&s)[32],
                                             uint32_t (&p_cur)[4][4], uint32_t (&p_next)[4][4],
                                             SoftmaxState<kHeadDim>& st) {
  const int stage = t % kFwdStages;
  float alpha[2] = {1.0f, 1.0f};
  bool rescale = false;
  if (t + 1 < n_items) {
    const int next_stage = (t + 1) % kFwdStages;
    mbarrier_wait(cta.full + 8 * next_stage, static_cast<uint32_t>(((t + 1) / kFwdStages) & 1));
    fence_proxy_async_shared();  // cp.async-gathered tiles, for wgmma
    take_turn(consumer);
    issue_qk<kHeadDim>(s, q, cta.k_stage(next_stage));
    issue_pv<kHeadDim>(st.o, p_cur, cta.v_stage(stage));
    pass_turn(consumer);
    wgmma_wait<1>();  // S of item t+1; P V of item t may still run
    fence_registers(s);
    rescale = item_softmax<kHeadDim>(cta.slots[next_stage], scale_log2, s, p_next, st, alpha);
  } else {
    take_turn(consumer);
    issue_pv<kHeadDim>(st.o, p_cur, cta.v_stage(stage));
    if (consumer == 0) pass_turn(consumer);
  }
  wgmma_wait<0>();
  fence_registers(st.o);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) fence_registers(p_cur[kk]);
  mbarrier_arrive(cta.empty + 8 * stage);  // this thread is done with the stage and its slot
  if (rescale) rescale_output<kHeadDim>(st, alpha);
}
#endif

template <int kHeadDim>
__global__ void __launch_bounds__(kFwdThreads, 1)
    sparse_attn_fwd_sm90_kernel(const SparseAttnFwdParams p, const __grid_constant__ FwdTensorMaps maps) {
#if defined(SPARSERING_SM90A_DEVICE_CODE)
  using Smem = FwdSmem<kHeadDim>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t raw = cuda::smem_address(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  unsigned char* base_ptr = smem_raw + (base - raw);

  const SparseIndexView& index = p.index;
  const int row = static_cast<int>(blockIdx.x);
  // Heaviest query blocks (latest, most keys under causality) first.
  const int q_subs = index.block_q / kCtaRows;
  const int sub_linear = static_cast<int>(gridDim.y - 1 - blockIdx.y);
  const int q_block = sub_linear / q_subs;
  const int64_t q0 = int64_t{q_block} * index.block_q + int64_t{sub_linear % q_subs} * kCtaRows;
  if (q0 >= p.shape.q_len) return;
  const cuda::KeyItemList items = cuda::key_item_list(index, int64_t{row} * index.q_blocks + q_block);
  const int n_items = items.size();
  if (n_items == 0) return;

  CtaLayout<kHeadDim> cta;
  cta.q_tile = base + Smem::kQ;
  cta.k_tiles = base + Smem::kK;
  cta.v_tiles = base + Smem::kV;
  cta.slots = reinterpret_cast<cuda::ItemSlot*>(base_ptr + Smem::kSlots);
  cta.full = base + Smem::kBarriers;
  cta.empty = cta.full + 8 * kFwdStages;
  cta.q_full = cta.empty + 8 * kFwdStages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kFwdStages; ++s) {
      mbarrier_init(cta.full + 8 * s, kProducerThreads);
      mbarrier_init(cta.empty + 8 * s, kConsumers * 128);
    }
    mbarrier_init(cta.q_full, 1);
    mbarrier_init_fence();
  }
  __syncthreads();

  const int b = row / p.shape.q_heads;
  const int h = row % p.shape.q_heads;
  const int hk = h / (p.shape.q_heads / p.shape.kv_heads);
  const int64_t q_row_base = (int64_t{b} * p.shape.q_heads + h) * p.shape.q_len;  // (B, Hq, Sq) row of token 0
  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  if (warpgroup == 0) {
    registers_decrease<kProducerRegisters>();
    produce<kHeadDim>(p, maps, cta, items, n_items, q_row_base + q0,
                      (int64_t{b} * p.shape.kv_heads + hk) * p.shape.kv_len);
    return;
  }
  registers_increase<kConsumerRegisters>();

  const int consumer = warpgroup - 1;
  const int warp = (static_cast<int>(threadIdx.x) % 128) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const uint32_t q_wg = cta.q_tile + static_cast<uint32_t>(consumer * kTileRows * kSwizzleRowBytes);
  const float scale_log2 = p.softmax_scale * kLog2e;
  const int64_t q_valid = p.shape.q_len - q0;

  SoftmaxState<kHeadDim> st;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int local = consumer * kTileRows + warp * 16 + lane / 4 + rr * 8;
    st.q_global[rr] =
        local < q_valid ? static_cast<int32_t>(p.position.layout.global_token(p.position.q_rank, q0 + local)) : -1;
    st.row_max[rr] = -INFINITY;
    st.row_sum[rr] = 0.0f;
  }
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) st.o[i] = 0.0f;

  // Consumer 1 lets consumer 0 take the first turn. S and P of item 0, then two items per
  // iteration so the P buffers swap roles at compile time.
  if (consumer == 1) pass_turn(consumer);
  float s[32];
  uint32_t p_a[4][4];
  uint32_t p_b[4][4];
  mbarrier_wait(cta.q_full, 0);
  QFragments<kHeadDim> q;
  load_q_fragments<kHeadDim>(q, q_wg);
  mbarrier_wait(cta.full, 0);
  fence_proxy_async_shared();
  take_turn(consumer);
  issue_qk<kHeadDim>(s, q, cta.k_stage(0));
  pass_turn(consumer);
  wgmma_wait<0>();
  fence_registers(s);
  float alpha0[2];
  item_softmax<kHeadDim>(cta.slots[0], scale_log2, s, p_a, st, alpha0);  // O is still 0: nothing to scale
  for (int t = 0; t < n_items; t += 2) {
    consume_step<kHeadDim>(cta, t, n_items, consumer, q, scale_log2, s, p_a, p_b, st);
    if (t + 1 < n_items) consume_step<kHeadDim>(cta, t + 1, n_items, consumer, q, scale_log2, s, p_b, p_a, st);
  }

  // Merge the step into the running (out, lse). Each quad owns one row; read lse before any lane
  // of the warp writes it.
  float lse_old[2];
  float sums[2];
  bool writes[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int local = consumer * kTileRows + warp * 16 + lane / 4 + rr * 8;
    sums[rr] = cuda::quad_sum(st.row_sum[rr]);
    writes[rr] = local < q_valid && sums[rr] > 0.0f;
    lse_old[rr] = writes[rr] ? p.lse[q_row_base + q0 + local] : 0.0f;
  }
  __syncwarp();
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    if (!writes[rr]) continue;
    const int64_t token = q_row_base + q0 + consumer * kTileRows + warp * 16 + lane / 4 + rr * 8;
    const float lse_step = (st.row_max[rr] + log2f(sums[rr])) * kLn2;
    float lse_new = lse_step;
    float w_old = 0.0f;
    float w_step = 1.0f / sums[rr];
    if (lse_old[rr] != -INFINITY) {
      const float hi = fmaxf(lse_old[rr], lse_step);
      lse_new = hi + log1pf(expf(-fabsf(lse_old[rr] - lse_step)));
      w_old = expf(lse_old[rr] - lse_new);
      w_step *= expf(lse_step - lse_new);
    }
    float* out_row = p.out + token * kHeadDim + (lane % 4) * 2;
#pragma unroll
    for (int dt = 0; dt < kHeadDim / 8; ++dt) {
      float2 value = make_float2(st.o[4 * dt + 2 * rr] * w_step, st.o[4 * dt + 2 * rr + 1] * w_step);
      if (w_old != 0.0f) {
        const float2 old = *reinterpret_cast<const float2*>(out_row + dt * 8);
        value.x = fmaf(old.x, w_old, value.x);
        value.y = fmaf(old.y, w_old, value.y);
      }
      *reinterpret_cast<float2*>(out_row + dt * 8) = value;
    }
    if (lane % 4 == 0) p.lse[token] = lse_new;
  }
#else
  (void)p;
  (void)maps;
#endif
}

template <int kHeadDim>
void launch_instance(const SparseAttnFwdParams& params, cudaStream_t stream) {
  constexpr int smem = FwdSmem<kHeadDim>::kBytes;
  SPARSERING_CUDA_CHECK(
      cudaFuncSetAttribute(sparse_attn_fwd_sm90_kernel<kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  FwdTensorMaps maps;
  const AttentionShape& shape = params.shape;
  maps.q = make_swizzled_tensor_map(params.q, int64_t{shape.batch} * shape.q_heads * shape.q_len, kHeadDim);
  maps.k = make_swizzled_tensor_map(params.k, int64_t{shape.batch} * shape.kv_heads * shape.kv_len, kHeadDim);
  maps.v = make_swizzled_tensor_map(params.v, int64_t{shape.batch} * shape.kv_heads * shape.kv_len, kHeadDim);
  const dim3 grid(static_cast<unsigned>(params.index.rows),
                  static_cast<unsigned>(params.index.q_blocks * (params.index.block_q / kCtaRows)));
  sparse_attn_fwd_sm90_kernel<kHeadDim><<<grid, kFwdThreads, smem, stream>>>(params, maps);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

bool sparse_attn_fwd_sm90_built() {
#if defined(SPARSERING_HAVE_SM90A)
  return true;
#else
  return false;
#endif
}

bool sparse_attn_fwd_sm90_supports(const SparseAttnFwdParams& params) {
  // TMA coordinates are int32 rows of all heads.
  const AttentionShape& shape = params.shape;
  const int64_t rows = std::max(int64_t{shape.batch} * shape.q_heads * shape.q_len,
                                int64_t{shape.batch} * shape.kv_heads * shape.kv_len);
  return params.index.block_q % kCtaRows == 0 && (shape.head_dim == 64 || shape.head_dim == 128) &&
         rows < (int64_t{1} << 31) - kCtaRows;
}

void launch_sparse_attn_fwd_sm90(const SparseAttnFwdParams& params, cudaStream_t stream) {
  if (params.shape.head_dim == 64) {
    launch_instance<64>(params, stream);
  } else {
    launch_instance<128>(params, stream);
  }
}

}  // namespace sparsering
