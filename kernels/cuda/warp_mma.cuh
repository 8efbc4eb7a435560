// Device primitives shared by the attention kernels (sm_80 and newer): tensor-core MMA
// m16n8k16 bf16 -> fp32, ldmatrix (plain and transposed), cp.async 16-byte copies with zero fill,
// the padded shared-memory tile layout, quad reductions and the softmax's fast exp2. Fragment
// layouts follow the PTX ISA "mma.m16n8k16" figures; design notes are in docs/kernels.md.
// Exercised through every attention kernel test in tests/kernels_gpu/.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace sparsering::cuda {

/// Tile rows (query or key tokens) that one CTA of the attention kernels handles at a time.
inline constexpr int kTileRows = 64;

/// bf16 elements per shared-memory tile row holding `kCols` columns: padded by one 16-byte chunk,
/// so the 8 rows an ldmatrix phase reads at one chunk land in 8 different bank groups (row pitch
/// = 16 mod 128 bytes). Padding, unlike an XOR swizzle, keeps every fragment address a per-thread
/// base plus a compile-time offset, which saves the registers the backward kernel needs.
template <int kCols>
inline constexpr int kPaddedRow = kCols + 8;

/// Offset in bf16 elements of 16-byte chunk `chunk` of row `row` in a padded tile of `kCols`.
template <int kCols>
__device__ __forceinline__ int tile_offset(int row, int chunk) {
  return row * kPaddedRow<kCols> + chunk * 8;
}

/// Bytes of a padded tile of kTileRows rows of `kCols` bf16 columns.
template <int kCols>
inline constexpr int kTileBytes = kTileRows * kPaddedRow<kCols> * 2;

/// Shared-memory address (32-bit, .shared window) of a generic pointer to shared memory.
__device__ __forceinline__ uint32_t smem_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

/// 16-byte asynchronous copy global -> shared; when `valid` is false the 16 bytes are zero-filled
/// and `source` is not read (it must still be a valid address expression, not dereferenced).
__device__ __forceinline__ void cp_async_16(uint32_t destination, const void* source, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(destination), "l"(source), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
/// Waits until at most `kPending` committed groups of this thread are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

/// ldmatrix .x4: lanes 8m..8m+7 give the row addresses of 8x8 matrix m; register m receives it.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
/// ldmatrix .x4 .trans: as ldmatrix_x4, each 8x8 matrix transposed.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

/// D = A * B + D for one m16n8k16 tile: A 16x16 bf16 (4 regs), B 16x8 bf16 (2 regs), D 16x8 fp32.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// Packs two floats into a bf16x2 register (round to nearest even), `low` in the low half.
__device__ __forceinline__ uint32_t pack_bf16x2(float low, float high) {
  const __nv_bfloat162 packed = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<const uint32_t*>(&packed);
}

/// 2^x through the MUFU unit with subnormal results flushed to zero (ex2.approx.ftz.f32): one
/// instruction, where exp2f without fast math adds a range fix-up of three more around it. For
/// softmax probabilities, whose subnormal range (< 2^-126) is irrelevant. fast_exp2(-inf) = +0.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/// Max over the 4 lanes of a quad (lanes sharing lane/4), the owners of one accumulator row.
__device__ __forceinline__ float quad_max(float value) {
  value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 1));
  return fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 2));
}
/// Sum over the 4 lanes of a quad.
__device__ __forceinline__ float quad_sum(float value) {
  value += __shfl_xor_sync(0xffffffffu, value, 1);
  return value + __shfl_xor_sync(0xffffffffu, value, 2);
}

/// fp32 atomic add of two adjacent floats (one vector atomic on sm_90, two scalar ones before).
__device__ __forceinline__ void atomic_add_float2(float* address, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(address), make_float2(x, y));
#else
  atomicAdd(address, x);
  atomicAdd(address + 1, y);
#endif
}

/// Asynchronously copies `kTileRows` rows of `kHeadDim` bf16 into a padded shared tile, with
/// all `kThreads` threads of the CTA cooperating (16-byte chunks, consecutive threads on
/// consecutive chunks of a row: coalesced). `row_source(r)` returns the global row pointer or
/// nullptr for a row to zero-fill; `fallback` is any valid global address (never read).
template <int kHeadDim, int kThreads, typename RowSource>
__device__ __forceinline__ void load_tile_async(uint32_t tile_smem, const uint16_t* fallback, RowSource row_source) {
  constexpr int kChunksPerRow = kHeadDim / 8;
  constexpr int kChunks = kTileRows * kChunksPerRow;
  static_assert(kChunks % kThreads == 0, "tile chunks must divide evenly among threads");
#pragma unroll
  for (int n = 0; n < kChunks / kThreads; ++n) {
    const int linear = n * kThreads + static_cast<int>(threadIdx.x);
    const int row = linear / kChunksPerRow;
    const int chunk = linear % kChunksPerRow;
    const uint16_t* source = row_source(row);
    const bool valid = source != nullptr;
    const void* address = valid ? static_cast<const void*>(source + chunk * 8) : static_cast<const void*>(fallback);
    cp_async_16(tile_smem + static_cast<uint32_t>(tile_offset<kHeadDim>(row, chunk) * 2), address, valid);
  }
}

}  // namespace sparsering::cuda
