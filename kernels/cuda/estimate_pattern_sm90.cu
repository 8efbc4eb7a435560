// Vertical-slash pattern estimation, pass 1 (row statistics), Hopper path (sm_90a): the partials
// of the mma.sync kernel (estimate_pattern.cu) from the same grid, one CTA per (GQA group,
// 2048-key chunk, 256-row round), computed with warpgroup MMAs.
//   Each of the CTA's two warpgroups owns two m64 query tiles, held as A fragments in registers
//   (loaded once); both read each 64-key K tile from a 128-byte-swizzled shared stage (cp.async
//   by all threads, three tiles ahead of the next one computed). A wgmma runs asynchronously, so
//   one query tile's scores are computed while the threads fold the other's into their online
//   (max, sum): S1(t) overlaps the exponentials of S0(t), S0(t+1) those of S1(t). The mma.sync
//   kernel issues its MMAs and exponentials in turn and, at 8 warps per SM, waits on fixed
//   latencies most of the time (docs/PERF.md, "Index preparation: where the estimation's time
//   goes").
// Tested against estimate_pattern_pass1_ref in tests/kernels_gpu/estimate_pattern_test.cpp.
#include "kernels/cuda/estimate_pattern_sm90.hpp"

#include <cmath>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/estimate_row_statistics.cuh"
#include "kernels/cuda/hopper_async.cuh"
#include "kernels/cuda/wgmma_tile_scores.cuh"

namespace sparsering {
namespace {

using cuda::kTileRows;

constexpr int kThreads = 256;  // two warpgroups
constexpr int kMTiles = 2;     // m64 query tiles per warpgroup
static_assert(kThreads / 128 * kMTiles * 64 == kEstimatePass1RowsPerCta, "a round is the CTA's query rows");
/// K tiles in shared memory. When tile t + 4 is issued (after every warp has waited for tile t's
/// wgmmas) the stages hold tiles t + 1 (computed next) to t + 4, and tile t's stage is idle: the
/// kernel was measured with this schedule, three tiles in flight beyond the next.
constexpr int kStages = 5;

template <int kHeadDim>
struct Pass1Sm90Smem {
  static constexpr int kTileBytes = kTileRows * kHeadDim * 2;    // 64 keys, swizzled panels
  static constexpr int kK = 0;                                    // [kStages] tiles, 1024-byte aligned
  static constexpr int kKeyGlobal = kK + kStages * kTileBytes;    // [chunk keys] int32
  static constexpr int kBytes = kKeyGlobal + kEstimatePass1ChunkKeys * 4 + 1024;  // + alignment slack
};

#if defined(SPARSERING_SM90A_DEVICE_CODE)
using namespace cuda::sm90;
constexpr float kLog2e = 1.4426950408889634f;

/// Folds this thread's scores of one query tile (its two rows, 16 keys each) into their
/// statistics, masking in place first where the tile reaches the queries.
__device__ __forceinline__ void fold_scores(float (&s)[32], const int32_t (&q_global)[2], const int32_t* kg,
                                            bool masked, float scale2, cuda::RowStatistics (&stats)[2]) {
  if (masked) cuda::mask_tile_scores(s, q_global, kg);
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float v[16];
    cuda::row_scores(s, rr, v);
    stats[rr].fold(v, scale2);
  }
}
#endif

template <int kHeadDim>
__global__ void __launch_bounds__(kThreads, 1)
    estimate_pattern_pass1_sm90_kernel(const EstimateParams p, int chunks, int m_tiles_per_head, float* partial_max,
                                       float* partial_sum) {
#if defined(SPARSERING_SM90A_DEVICE_CODE)
  using Smem = Pass1Sm90Smem<kHeadDim>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t raw = cuda::smem_address(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  int32_t* key_global = reinterpret_cast<int32_t*>(smem_raw + (base - raw) + Smem::kKeyGlobal);

  const int chunk = static_cast<int>(blockIdx.x);
  const int kv_row = static_cast<int>(blockIdx.y);
  const int b = kv_row / p.shape.kv_heads;
  const int hk = kv_row % p.shape.kv_heads;
  const int heads = p.shape.q_heads / p.shape.kv_heads;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t last_q = p.shape.q_len;
  const int64_t kv_len = p.shape.kv_len;
  const int64_t first_query = p.position.layout.seq_len_tokens() - last_q;  // global position of query 0
  const int64_t key_begin = int64_t{chunk} * kEstimatePass1ChunkKeys;
  const int tiles = static_cast<int>(
      min(int64_t{kEstimatePass1ChunkKeys / kTileRows}, (kv_len - key_begin + kTileRows - 1) / kTileRows));
  const uint16_t* k_rows = p.k + (int64_t{b} * p.shape.kv_heads + hk) * kv_len * kHeadDim;

  // The global positions of the chunk's keys, all at once (INT32_MAX past kv_len): the layout's
  // divisions then stay out of the tile loop, where the CTA's barrier would wait on them.
  for (int r = static_cast<int>(threadIdx.x); r < kEstimatePass1ChunkKeys; r += kThreads) {
    key_global[r] = key_begin + r < kv_len
                        ? static_cast<int32_t>(p.position.layout.global_token(p.position.kv_rank, key_begin + r))
                        : INT32_MAX;
  }
  // Issues key tile `tile` (if it exists) into stage tile % kStages and commits one cp.async
  // group either way, so that group i always holds tile i.
  auto issue = [&](int tile) {
    if (tile < tiles) {
      const int64_t k0 = key_begin + int64_t{tile} * kTileRows;
      load_swizzled_tile_async<kHeadDim, kTileRows, kThreads>(
          base + Smem::kK + (tile % kStages) * Smem::kTileBytes, k_rows,
          [&](int r) -> const uint16_t* { return k0 + r < kv_len ? k_rows + (k0 + r) * kHeadDim : nullptr; });
    }
    cuda::cp_async_commit();
  };
  // Waits until the next tile to compute has landed and is visible to the tensor cores, for every
  // thread: with one group committed per issue(), and tile + kStages - 3 issued before the wait
  // for tile, at most kStages - 3 groups may still be pending. Every warp has then also waited
  // for the previous tile's wgmmas, so the stage issue(tile + kStages - 2) fills is free; the
  // wgmma of the tile is issued before that load, so the copy's address arithmetic runs beside
  // the tensor cores, not ahead of them.
  auto next_tile_ready = [&]() {
    cuda::cp_async_wait<kStages - 3>();
    fence_proxy_async_shared();
    __syncthreads();
  };
#pragma unroll
  for (int tile = 0; tile < kStages - 2; ++tile) issue(tile);

  // Query tile i of this warp's warpgroup: its warp w (of 4) holds group m16-tile gm = round * 16
  // + (warpgroup * 2 + i) * 4 + w, head gm / m_tiles_per_head, queries (gm % m_tiles_per_head) * 16
  // + 0..15.
  uint32_t q_frag[kMTiles][kHeadDim / 16][4];
  int32_t q_global[kMTiles][2];
  int out_row[kMTiles];
  int64_t out_t[kMTiles];
  cuda::RowStatistics stats[kMTiles][2];
#pragma unroll
  for (int i = 0; i < kMTiles; ++i) {
    const int gm = static_cast<int>(blockIdx.z) * (kEstimatePass1RowsPerCta / 16) + ((warp / 4) * kMTiles + i) * 4 +
                   warp % 4;
    cuda::load_group_query_tile<kHeadDim>(gm, heads * m_tiles_per_head, m_tiles_per_head,
                                          b * p.shape.q_heads + hk * heads, p.q_last, last_q, first_query, q_frag[i],
                                          q_global[i], out_row[i], out_t[i]);
    stats[i][0].reset();
    stats[i][1].reset();
  }
  const float scale2 = p.softmax_scale * kLog2e;

  // Stage descriptors: the start address field counts 16-byte units and shared addresses stay
  // below 2^18 bytes, so a stage's is the first's plus its offset / 16.
  const uint64_t k_stages = swizzled_descriptor(base + Smem::kK, 0);
  constexpr uint64_t kStageUnits = Smem::kTileBytes >> 4;
  // Every iteration starts with S0(tile) complete and ends with S0(tile + 1) complete: no wgmma
  // is in flight across the loop's back edge (ptxas would serialize them otherwise).
  float s0[32];
  float s1[32];
  next_tile_ready();
  issue_tile_scores<kHeadDim>(s0, q_frag[0], k_stages);
  issue(kStages - 2);
  wgmma_wait<0>();
  fence_registers(s0);
  for (int tile = 0; tile < tiles; ++tile) {
    const int stage = tile % kStages;
    issue_tile_scores<kHeadDim>(s1, q_frag[1], k_stages + stage * kStageUnits);
    const int32_t* kg = key_global + tile * kTileRows;
    // Keys ascend in global order inside a tile, so the last one decides whether any query of
    // the sequence's end can miss one: a uniform branch, and most tiles skip the mask.
    const bool masked = static_cast<int64_t>(kg[kTileRows - 1]) > first_query;
    fold_scores(s0, q_global[0], kg, masked, scale2, stats[0]);  // while S1(tile) runs
    wgmma_wait<0>();
    fence_registers(s1);
    // One branch holds both the issue of S0(tile + 1) and its wait, so that ptxas sees no path
    // with S0 in flight at the loop's end.
    if (tile + 1 < tiles) {
      next_tile_ready();
      issue_tile_scores<kHeadDim>(s0, q_frag[0], k_stages + ((tile + 1) % kStages) * kStageUnits);
      issue(tile + kStages - 1);
      fold_scores(s1, q_global[1], kg, masked, scale2, stats[1]);  // while S0(tile + 1) runs
      wgmma_wait<0>();
      fence_registers(s0);
    } else {
      fold_scores(s1, q_global[1], kg, masked, scale2, stats[1]);
    }
  }
  cuda::cp_async_wait<0>();

  cuda::write_row_partials(stats, q_global, out_row, out_t, last_q, chunks, chunk, partial_max, partial_sum);
#else
  (void)p;
  (void)chunks;
  (void)m_tiles_per_head;
  (void)partial_max;
  (void)partial_sum;
  __trap();  // launched only where sm_90a code runs (sm90a_code_unavailable)
#endif
}

template <int kHeadDim>
void launch_instance(const EstimateParams& p, int chunks, int m_tiles_per_head, int rounds, float* partial_max,
                     float* partial_sum, cudaStream_t stream) {
  constexpr int smem = Pass1Sm90Smem<kHeadDim>::kBytes;
  SPARSERING_CUDA_CHECK(cudaFuncSetAttribute(estimate_pattern_pass1_sm90_kernel<kHeadDim>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(p.shape.batch * p.shape.kv_heads),
                  static_cast<unsigned>(rounds));
  estimate_pattern_pass1_sm90_kernel<kHeadDim>
      <<<grid, kThreads, smem, stream>>>(p, chunks, m_tiles_per_head, partial_max, partial_sum);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void launch_estimate_pattern_pass1_sm90(const EstimateParams& params, int chunks, int m_tiles_per_head, int rounds,
                                        float* partial_max, float* partial_sum, cudaStream_t stream) {
  if (params.shape.head_dim == 64) {
    launch_instance<64>(params, chunks, m_tiles_per_head, rounds, partial_max, partial_sum, stream);
  } else {
    launch_instance<128>(params, chunks, m_tiles_per_head, rounds, partial_max, partial_sum, stream);
  }
}

}  // namespace sparsering
