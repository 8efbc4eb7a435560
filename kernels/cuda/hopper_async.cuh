// Hopper (sm_90a) device primitives of the attention kernels: warpgroup MMA (wgmma) with operands
// in shared memory addressed by matrix descriptors, the 128-byte-swizzled tile layout those
// descriptors describe, the bulk tensor copy engine (TMA) and cp.async loads into it, mbarriers
// that track both, register reallocation between warpgroups, and the proxy fence that makes
// cp.async writes visible to wgmma. Layouts follow the PTX ISA sections "Asynchronous Warpgroup
// Level Matrix Multiply-Accumulate" (matrix descriptor, canonical swizzled layouts, register
// fragments) and "Tensor Copy" (loads and reductions); design notes in docs/kernels.md ("Hopper
// forward", "Hopper backward"). The device instructions exist only in sm_90a code (callers guard
// with SPARSERING_SM90A_DEVICE_CODE).
// Exercised through tests/kernels_gpu/.
#pragma once

#include <cstdint>

#include "kernels/cuda/warp_mma.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SPARSERING_SM90A_DEVICE_CODE 1
#endif

namespace sparsering::cuda::sm90 {

/// Bytes of one swizzled row: 64 bf16 columns. A tile of R rows x D columns is stored as D / 64
/// "panels" of R x 128 bytes; 16-byte chunk c of row r of a panel sits at chunk c ^ (r % 8)
/// (the hardware's 128-byte swizzle, which XORs address bits 4-6 with bits 7-9, so every panel
/// starts 1024-byte aligned). ldmatrix-free: wgmma reads the layout directly, conflict free.
inline constexpr int kSwizzleRowBytes = 128;
inline constexpr int kSwizzleAtomBytes = 8 * kSwizzleRowBytes;  ///< 8 rows: one swizzle pattern

/// Byte offset of 16-byte chunk `chunk` (0 .. D/8-1) of row `row` in a swizzled tile of `rows` rows.
__device__ __forceinline__ uint32_t swizzled_offset(int rows, int row, int chunk) {
  const int panel = chunk / 8;
  const int c = (chunk % 8) ^ (row % 8);
  return static_cast<uint32_t>(panel * rows * kSwizzleRowBytes + row * kSwizzleRowBytes + c * 16);
}

/// Asynchronously copies `kRows` rows of `kHeadDim` bf16 into a swizzled tile at `tile_smem`
/// (1024-byte aligned), all `kThreads` threads cooperating (consecutive threads on consecutive
/// chunks of a row: coalesced). `row_source(r)` returns the global row or nullptr to zero-fill;
/// `fallback` is any valid global address (never read).
template <int kHeadDim, int kRows, int kThreads, typename RowSource>
__device__ __forceinline__ void load_swizzled_tile_async(uint32_t tile_smem, const uint16_t* fallback,
                                                         RowSource row_source) {
  constexpr int kChunksPerRow = kHeadDim / 8;
  constexpr int kChunks = kRows * kChunksPerRow;
  static_assert(kChunks % kThreads == 0, "tile chunks must divide evenly among threads");
#pragma unroll
  for (int n = 0; n < kChunks / kThreads; ++n) {
    const int linear = n * kThreads + static_cast<int>(threadIdx.x);
    const int row = linear / kChunksPerRow;
    const int chunk = linear % kChunksPerRow;
    const uint16_t* source = row_source(row);
    const bool valid = source != nullptr;
    const void* address = valid ? static_cast<const void*>(source + chunk * 8) : static_cast<const void*>(fallback);
    cp_async_16(tile_smem + swizzled_offset(kRows, row, chunk), address, valid);
  }
}

/// Shared-memory matrix descriptor of a swizzled (128-byte) operand starting at `smem`: the
/// start address, the stride between 8-row groups (one swizzle atom, 1024 bytes) and, for
/// MN-major operands spanning several panels, the panel stride as the leading byte offset.
__device__ __forceinline__ uint64_t swizzled_descriptor(uint32_t smem, uint32_t leading_bytes) {
  uint64_t desc = 0;
  desc |= static_cast<uint64_t>((smem & 0x3FFFF) >> 4);
  desc |= static_cast<uint64_t>((leading_bytes & 0x3FFFF) >> 4) << 16;
  desc |= static_cast<uint64_t>(kSwizzleAtomBytes >> 4) << 32;
  desc |= uint64_t{1} << 62;  // 128-byte swizzle
  return desc;
}

/// Orders this thread's completed generic-proxy shared-memory writes (cp.async, st.shared) before
/// later async-proxy reads (wgmma operands); issue after cp.async.wait and before the barrier.
__device__ __forceinline__ void fence_proxy_async_shared() {
#if defined(SPARSERING_SM90A_DEVICE_CODE)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

#if defined(SPARSERING_SM90A_DEVICE_CODE)
// ---- mbarriers -------------------------------------------------------------------------------

__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}
/// Makes initialised mbarriers visible to the async proxy (TMA) and the other threads (with a
/// barrier after it).
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/// Arrives and expects `bytes` more of transactions (TMA copies) in the current phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
/// One more arrival, made when this thread's cp.async copies issued so far have landed.
__device__ __forceinline__ void mbarrier_arrive_on_cp_async(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
/// Waits until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}

// ---- TMA, named barriers, register reallocation ----------------------------------------------

/// Copies the box at (`column`, `row`) of the 2-D tensor map `map` (a __grid_constant__ kernel
/// parameter) into shared memory at `smem`, completing `bytes` of transactions on `bar`.
__device__ __forceinline__ void tma_load_2d(uint32_t smem, const void* map, int32_t column, int32_t row, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          smem),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(column), "r"(row), "r"(bar)
      : "memory");
}
/// Adds the box at `smem` into the 2-D tensor map `map` at (`column`, `row`) (fp32 add in L2, atomic
/// per element), as part of this thread's current bulk group. The shared data must be visible to
/// the async proxy (fence_proxy_async_shared by its writers, then a barrier).
__device__ __forceinline__ void tma_reduce_add_2d(const void* map, uint32_t smem, int32_t column, int32_t row) {
  asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem), "r"(column), "r"(row)
               : "memory");
}
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
/// Waits until this thread's committed bulk groups have read their shared memory (it may be reused).
__device__ __forceinline__ void bulk_wait_group_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
/// Waits until this thread's committed bulk groups are complete.
__device__ __forceinline__ void bulk_wait_group() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
/// Barrier `id` (1..15; 0 is __syncthreads) among `threads` threads (a multiple of 32).
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
/// Arrives at barrier `id` without waiting: one side of a producer / consumer hand-over between
/// named barriers (the `threads` count includes the threads that bar.sync on it).
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
template <int kRegisters>
__device__ __forceinline__ void registers_decrease() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void registers_increase() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// ---- wgmma -----------------------------------------------------------------------------------

/// Must precede the first wgmma of a batch whose accumulator or A registers other instructions
/// wrote since the last wgmma.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
/// Waits until at most `kPending` committed wgmma groups of this warpgroup are in flight.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

/// Keeps the compiler from touching registers a wgmma in flight reads or writes (moving their
/// reads or writes across the wait): call on the accumulators and A fragments after the wait.
template <int kRegs>
__device__ __forceinline__ void fence_registers(float (&d)[kRegs]) {
#pragma unroll
  for (int i = 0; i < kRegs; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int kRegs>
__device__ __forceinline__ void fence_registers(uint32_t (&d)[kRegs]) {
#pragma unroll
  for (int i = 0; i < kRegs; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

/// d (64 x 64 fp32) = A * B (+ d when `accumulate`): A 64 x 16 and B 16 x 64 in shared memory.
/// kTransA / kTransB = 0: the operand is K-major (Q K^T: rows of Q and K are contiguous along the
/// head dimension); 1: MN-major (dS K: dS^T stored with queries contiguous, K with the head
/// dimension contiguous).
template <int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], uint64_t a_desc, uint64_t b_desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, %35, %36;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a_desc), "l"(b_desc), "r"(accumulate), "n"(kTransA), "n"(kTransB));
}

/// d (64 x 64 fp32) = A * B (+ d when `accumulate`): A 64 x 16 bf16 in registers (the m16n8k16
/// A-fragment layout per warp), B 16 x 64 in shared memory: kTransB = 1 MN-major (P V: rows of V
/// are contiguous along the head dimension, which is B's N), 0 K-major (Q K^T with Q in registers).
template <int kTransB = 1>
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t b_desc,
                                                  int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, %38;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(accumulate), "n"(kTransB));
}

/// d (64 x 128 fp32) = A * B (+ d when `accumulate`): A 64 x 16 bf16 in registers (the m16n8k16
/// A-fragment layout per warp), B 16 x 128 in shared memory, MN-major (P V: rows of V are contiguous
/// along the head dimension, which is B's N).
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t b_desc,
                                                  int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(accumulate));
}
/// Packs a 64 x 64 fp32 accumulator into the bf16 A fragments of four k16 steps over its columns
/// (the accumulator layout is the A-fragment layout), e.g. P^T for dV += P^T dO.
__device__ __forceinline__ void pack_a_fragments(uint32_t (&a)[4][4], const float (&x)[32]) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    a[kk][0] = pack_bf16x2(x[8 * kk + 0], x[8 * kk + 1]);
    a[kk][1] = pack_bf16x2(x[8 * kk + 2], x[8 * kk + 3]);
    a[kk][2] = pack_bf16x2(x[8 * kk + 4], x[8 * kk + 5]);
    a[kk][3] = pack_bf16x2(x[8 * kk + 6], x[8 * kk + 7]);
  }
}
#endif  // SPARSERING_SM90A_DEVICE_CODE

}  // namespace sparsering::cuda::sm90
