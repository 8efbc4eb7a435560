// delta = rowsum(dout * out): device code, launcher, instantiations. One warp per token row;
// each lane reads 16-byte vectors (8 bf16 of dout, 2 x 4 fp32 of out) so the pass runs at memory
// bandwidth. Tested against attn_bwd_delta_ref in tests/kernels_gpu/sparse_attn_bwd_test.cpp.
#include "kernels/cuda/attn_bwd_delta.hpp"

#include "common/error.hpp"
#include "kernels/cuda/attention_checks.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/warp_mma.cuh"

namespace sparsering {
namespace {

constexpr int kDeltaThreads = 256;

template <int kHeadDim>
__global__ void __launch_bounds__(kDeltaThreads)
    attn_bwd_delta_kernel(const bf16_bits* dout, const float* out, float* delta, int64_t tokens) {
  constexpr int kLanesPerRow = kHeadDim / 8;  // 8 elements per lane
  constexpr int kRowsPerWarp = 32 / kLanesPerRow;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t warp_global = (int64_t{blockIdx.x} * kDeltaThreads + threadIdx.x) / 32;
  const int64_t token = warp_global * kRowsPerWarp + lane / kLanesPerRow;
  float sum = 0.0f;
  if (token < tokens) {
    const int col = (lane % kLanesPerRow) * 8;
    const uint4 packed = *reinterpret_cast<const uint4*>(dout + token * kHeadDim + col);
    const float4 o0 = *reinterpret_cast<const float4*>(out + token * kHeadDim + col);
    const float4 o1 = *reinterpret_cast<const float4*>(out + token * kHeadDim + col + 4);
    const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
    const float outs[8] = {o0.x, o0.y, o0.z, o0.w, o1.x, o1.y, o1.z, o1.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      sum = fmaf(__uint_as_float(words[w] << 16), outs[2 * w], sum);
      sum = fmaf(__uint_as_float(words[w] & 0xffff0000u), outs[2 * w + 1], sum);
    }
  }
#pragma unroll
  for (int width = kLanesPerRow / 2; width >= 1; width /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, width);
  if (token < tokens && lane % kLanesPerRow == 0) delta[token] = sum;
}

template <int kHeadDim>
void launch_delta_instance(const AttnBwdDeltaParams& params, int64_t tokens, cudaStream_t stream) {
  constexpr int kRowsPerBlock = kDeltaThreads / 32 * (32 / (kHeadDim / 8));
  const int64_t blocks = (tokens + kRowsPerBlock - 1) / kRowsPerBlock;
  attn_bwd_delta_kernel<kHeadDim>
      <<<static_cast<unsigned>(blocks), kDeltaThreads, 0, stream>>>(params.dout, params.out, params.delta, tokens);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void launch_attn_bwd_delta(const AttnBwdDeltaParams& params, cudaStream_t stream) {
  const AttentionShape& shape = params.shape;
  require(shape.head_dim == 64 || shape.head_dim == 128, "shape.head_dim must be 64 or 128, got ", shape.head_dim);
  require(shape.batch >= 0 && shape.q_heads >= 0 && shape.q_len >= 0, "shape.batch, q_heads and q_len must be >= 0");
  const int64_t tokens = int64_t{shape.batch} * shape.q_heads * shape.q_len;
  if (tokens == 0) return;
  require(tokens < (int64_t{1} << 34), "too many token rows for one launch: ", tokens);
  check_device_pointer(params.dout, 16, "dout");
  check_device_pointer(params.out, 16, "out");
  check_device_pointer(params.delta, 4, "delta");
  if (shape.head_dim == 64) {
    launch_delta_instance<64>(params, tokens, stream);
  } else {
    launch_delta_instance<128>(params, tokens, stream);
  }
}

}  // namespace sparsering
