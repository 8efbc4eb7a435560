// S = A B^T of one 64-row tile per warpgroup over the head dimension with warpgroup MMAs, A from
// registers (each warp its 16 rows, the m16n8k16 A-fragment layout) and B a 64-row tile in
// shared memory, 128-byte swizzled and K-major (kernels/cuda/hopper_async.cuh). The estimation's
// two Hopper paths compute their scores this way: pass 1 (estimate_pattern_sm90.cu) with queries
// as A and a key tile as B, pass 2 (estimate_pattern.cu) with keys as A and a query tile as B.
// (The Hopper forward's issue_qk is the same walk; its source is part of the kernel build
// identity, docs/calibration.md.) sm_90a device code only.
#pragma once

#include "kernels/cuda/hopper_async.cuh"

namespace sparsering::cuda::sm90 {

#if defined(SPARSERING_SM90A_DEVICE_CODE)
/// Issues s (64 x 64 fp32 per warpgroup) = A B^T, 16 head-dimension columns per wgmma, as one
/// commit group, not waited for. `b_tile` is the descriptor of the B tile (swizzled_descriptor):
/// a k16 step's is a constant number of 16-byte units past it (the start address field), so no
/// step rebuilds one.
template <int kHeadDim>
__device__ __forceinline__ void issue_tile_scores(float (&s)[32], const uint32_t (&a)[kHeadDim / 16][4],
                                                  uint64_t b_tile) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    const uint32_t panel_bytes = static_cast<uint32_t>(kk / 4) * (kTileRows * kSwizzleRowBytes);
    const uint32_t column_bytes = static_cast<uint32_t>(kk % 4) * 32;
    wgmma_m64n64k16_rs<0>(s, a[kk], b_tile + ((panel_bytes + column_bytes) >> 4), kk > 0 ? 1 : 0);
  }
  wgmma_commit();
}
#endif  // SPARSERING_SM90A_DEVICE_CODE

}  // namespace sparsering::cuda::sm90
