#include "kernels/nccl/ring_kernels.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/ring/ring_input_values.hpp"

namespace sparsering {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t work) {
  return static_cast<unsigned>(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, int64_t{1} << 20));
}

__global__ void generate_ring_inputs_kernel(bf16_bits* dst, uint64_t seed, uint32_t tensor, int32_t heads,
                                            int64_t tokens, int32_t head_dim, int64_t first_token, int64_t total) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total; e += int64_t{gridDim.x} * blockDim.x) {
    const auto d = static_cast<int32_t>(e % head_dim);
    const int64_t row = e / head_dim;
    const int64_t i = row % tokens;
    const int64_t bh = row / tokens;
    dst[e] = ring_input_bits(seed, tensor, static_cast<int32_t>(bh / heads), static_cast<int32_t>(bh % heads),
                             first_token + i, d);
  }
}

__global__ void copy_rows_kernel(uint4* dst, const int64_t* dst_map, const uint4* src, const int64_t* src_map,
                                 int64_t rows, int32_t vectors_per_row) {
  const int64_t total = rows * vectors_per_row;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = e / vectors_per_row;
    const int64_t v = e % vectors_per_row;
    const int64_t from = src_map != nullptr ? src_map[r] : r;
    const int64_t to = dst_map != nullptr ? dst_map[r] : r;
    dst[to * vectors_per_row + v] = src[from * vectors_per_row + v];
  }
}

__global__ void fill_floats_kernel(float* dst, int64_t count, float value) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < count; e += int64_t{gridDim.x} * blockDim.x) {
    dst[e] = value;
  }
}

__global__ void add_floats_kernel(float* dst, const float* src, int64_t count) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < count; e += int64_t{gridDim.x} * blockDim.x) {
    dst[e] += src[e];
  }
}

}  // namespace

void launch_generate_ring_inputs(bf16_bits* dst, uint64_t seed, uint32_t tensor, int32_t batch, int32_t heads,
                                 int64_t tokens, int32_t head_dim, int64_t first_token, cudaStream_t stream) {
  const int64_t total = int64_t{batch} * heads * tokens * head_dim;
  if (total == 0) return;
  generate_ring_inputs_kernel<<<grid_for(total), kThreads, 0, stream>>>(dst, seed, tensor, heads, tokens, head_dim,
                                                                       first_token, total);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

void launch_copy_rows(bf16_bits* dst, const int64_t* dst_map, const bf16_bits* src, const int64_t* src_map,
                      int64_t rows, int32_t row_elems, cudaStream_t stream) {
  require(row_elems % 8 == 0, "row of ", row_elems, " bf16 values is not a multiple of 16 bytes");
  if (rows == 0) return;
  const int32_t vectors = row_elems / 8;
  copy_rows_kernel<<<grid_for(rows * vectors), kThreads, 0, stream>>>(
      reinterpret_cast<uint4*>(dst), dst_map, reinterpret_cast<const uint4*>(src), src_map, rows, vectors);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

void launch_fill_floats(float* dst, int64_t count, float value, cudaStream_t stream) {
  if (count == 0) return;
  fill_floats_kernel<<<grid_for(count), kThreads, 0, stream>>>(dst, count, value);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

void launch_add_floats(float* dst, const float* src, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  add_floats_kernel<<<grid_for(count), kThreads, 0, stream>>>(dst, src, count);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparsering
