// Sparse attention forward: device code, launcher and its four instances (head dim 64 / 128 x
// 64- / 128-query CTAs). Design (docs/kernels.md, "forward"): one CTA of 4 warps per (row, 64- or
// 128-query tile of a query block); each warp owns 16 or 32 query rows. The CTA walks the key
// items of its index list (tile sub-tiles, then gathered vertical chunks), double-buffering K and
// V through cp.async (K and V of the next item in flight while the current one computes, one
// barrier per item) and describing the item after that in a shared-memory slot (key rows, global
// positions, mask flag) while the current one computes. S = Q K^T and O += P V with mma.sync
// m16n8k16 (ldmatrix from padded shared tiles), FlashAttention-2 online softmax in fp32 with
// ex2.approx.ftz (the output rescale skipped when no row maximum of the warp grew), and the
// per-pair causal mask only on items that need it. At the end the step's (O, lse) merges into
// the running fp32 (out, lse).
// Tested against sparse_attn_fwd_ref in tests/kernels_gpu/sparse_attn_fwd_test.cpp.
#include "kernels/cuda/sparse_attn_fwd.hpp"

#include <cmath>
#include <cstdlib>
#include <string>

#include "common/error.hpp"
#include "kernels/cuda/attention_checks.hpp"
#include "kernels/cuda/sparse_attn_fwd_sm90.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/key_items.cuh"
#include "kernels/cuda/warp_mma.cuh"

namespace sparsering {
namespace {

using cuda::kTileRows;

constexpr int kFwdWarps = 4;
constexpr int kFwdThreads = kFwdWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

/// Item slots in flight: item t computes, t+1 loads, t+2 is being described.
constexpr int kFwdSlots = 3;

/// Dynamic shared memory of the forward kernel: Q tile (kMTiles x 64 rows), 2 stages of K and V,
/// kFwdSlots item slots. Two CTAs fit one SM at D = 128 with 128-query CTAs (2 x 104 KiB).
template <int kHeadDim, int kMTiles>
constexpr int fwd_smem_bytes() {
  return (kMTiles + 2 * 2) * cuda::kTileBytes<kHeadDim> + kFwdSlots * static_cast<int>(sizeof(cuda::ItemSlot));
}

/// kMTiles = rows of 16 each warp owns: 1 gives 64-query CTAs (block_q = 64), 2 gives 128-query
/// CTAs whose warps reuse every K and V fragment for two row tiles (half the shared-memory and
/// L2 traffic per flop; used when block_q is a multiple of 128).
template <int kHeadDim, int kMTiles>
__global__ void __launch_bounds__(kFwdThreads, 2) sparse_attn_fwd_kernel(const SparseAttnFwdParams p) {
  constexpr int kDTiles = kHeadDim / 8;    // n-tiles of the output (8 columns each)
  constexpr int kDSteps = kHeadDim / 16;   // k-steps of Q K^T
  constexpr uint32_t kTileBytes = cuda::kTileBytes<kHeadDim>;
  constexpr int kCtaRows = kTileRows * kMTiles;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  // Q tiles [kMTiles] | K [2 stages] | V [2 stages] | item slots [kFwdSlots]
  cuda::ItemSlot* slots = reinterpret_cast<cuda::ItemSlot*>(smem_raw + (kMTiles + 4) * kTileBytes);

  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
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

  const int b = row / p.shape.q_heads;
  const int h = row % p.shape.q_heads;
  const int hk = h / (p.shape.q_heads / p.shape.kv_heads);
  const int64_t q_row_base = (int64_t{b} * p.shape.q_heads + h) * p.shape.q_len;  // (B, Hq, Sq) row of token 0
  const uint16_t* q_gmem = p.q + (q_row_base + q0) * kHeadDim;
  const int64_t kv_offset = (int64_t{b} * p.shape.kv_heads + hk) * p.shape.kv_len * kHeadDim;
  const uint16_t* k_gmem = p.k + kv_offset;
  const uint16_t* v_gmem = p.v + kv_offset;
  const int64_t q_valid = p.shape.q_len - q0;

  const uint32_t q_tile = cuda::smem_address(smem_raw);
  const uint32_t k_tiles = q_tile + kMTiles * kTileBytes;
  const uint32_t v_tiles = k_tiles + 2 * kTileBytes;

  // Slot of this thread: key slot r of an item; threads r and r + 64 share it (one writes the
  // local row, the other the global position and the mask flag).
  const int slot_r = static_cast<int>(threadIdx.x) % kTileRows;
  const bool slot_global = static_cast<int>(threadIdx.x) >= kTileRows;

  // Prologue: describe items 0 (threads 0-63) and 1 (threads 64-127) completely, then issue Q
  // and K, V of item 0 as one group.
  {
    const int t = static_cast<int>(threadIdx.x) / kTileRows;
    if (t < n_items) {
      const cuda::ItemSlotFetch fetch = cuda::fetch_item_slot(index, items, t, slot_r);
      cuda::finish_item_slot(slots[t], fetch, index, items, t, slot_r, p.shape.kv_len, p.position, false);
      cuda::finish_item_slot(slots[t], fetch, index, items, t, slot_r, p.shape.kv_len, p.position, true);
    }
  }
#pragma unroll
  for (int m = 0; m < kMTiles; ++m) {
    cuda::load_tile_async<kHeadDim, kFwdThreads>(q_tile + m * kTileBytes, q_gmem, [&](int r) -> const uint16_t* {
      const int64_t local = int64_t{m} * kTileRows + r;
      return local < q_valid ? q_gmem + local * kHeadDim : nullptr;
    });
  }
  __syncthreads();  // slots 0 and 1 written
  cuda::load_slot_async<kHeadDim, kFwdThreads>(k_tiles, k_gmem, slots[0]);
  cuda::load_slot_async<kHeadDim, kFwdThreads>(v_tiles, v_gmem, slots[0]);
  cuda::cp_async_commit();

  // Global positions of this thread's query rows (-1 for rows past q_len: every key masked).
  // Row tile m of warp w covers local rows m*64 + w*16 .. +15; this thread holds lane/4 and +8.
  int32_t q_global[kMTiles][2];
#pragma unroll
  for (int m = 0; m < kMTiles; ++m) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int local = m * kTileRows + warp * 16 + lane / 4 + rr * 8;
      q_global[m][rr] =
          local < q_valid ? static_cast<int32_t>(p.position.layout.global_token(p.position.q_rank, q0 + local)) : -1;
    }
  }

  const float scale_log2 = p.softmax_scale * kLog2e;
  float o[kMTiles][kDTiles][4];
#pragma unroll
  for (int m = 0; m < kMTiles; ++m) {
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt) o[m][dt][0] = o[m][dt][1] = o[m][dt][2] = o[m][dt][3] = 0.0f;
  }
  float row_max[kMTiles][2];
  float row_sum[kMTiles][2];
#pragma unroll
  for (int m = 0; m < kMTiles; ++m) {
    row_max[m][0] = row_max[m][1] = -INFINITY;
    row_sum[m][0] = row_sum[m][1] = 0.0f;
  }

  for (int t = 0; t < n_items; ++t) {
    const int stage = t & 1;
    const int slot_now = t % kFwdSlots;             // item t
    const int slot_next = (t + 1) % kFwdSlots;      // item t + 1
    const int slot_new = (t + 2) % kFwdSlots;       // item t + 2
    cuda::cp_async_wait<0>();  // K(t), V(t) (and Q) landed for this thread
    __syncthreads();           // ... for all threads; everyone is done with item t-1 and its slot;
                               // slot t+1 is complete
    if (t + 1 < n_items) {
      cuda::load_slot_async<kHeadDim, kFwdThreads>(k_tiles + (stage ^ 1) * kTileBytes, k_gmem, slots[slot_next]);
      cuda::load_slot_async<kHeadDim, kFwdThreads>(v_tiles + (stage ^ 1) * kTileBytes, v_gmem, slots[slot_next]);
      cuda::cp_async_commit();
    }
    // Item t+2's index entries: loaded now, written to its slot after Q K^T (latency hidden).
    const bool describe = t + 2 < n_items;
    cuda::ItemSlotFetch fetch;
    if (describe) fetch = cuda::fetch_item_slot(index, items, t + 2, slot_r);

    // S = Q K^T: each K fragment feeds every row tile of the warp.
    float s[kMTiles][8][4];
#pragma unroll
    for (int m = 0; m < kMTiles; ++m) {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) s[m][nt][0] = s[m][nt][1] = s[m][nt][2] = s[m][nt][3] = 0.0f;
    }
    const uint32_t k_tile = k_tiles + static_cast<uint32_t>(stage) * kTileBytes;
#pragma unroll
    for (int kk = 0; kk < kDSteps; ++kk) {
      uint32_t qa[kMTiles][4];
#pragma unroll
      for (int m = 0; m < kMTiles; ++m) {
        cuda::ldmatrix_x4(qa[m], q_tile + m * kTileBytes +
                                     static_cast<uint32_t>(cuda::tile_offset<kHeadDim>(warp * 16 + lane % 16, kk * 2 + lane / 16) * 2));
      }
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t kf[4];
        const int r = np * 16 + (lane % 8) + (lane / 16) * 8;
        cuda::ldmatrix_x4(kf, k_tile + static_cast<uint32_t>(cuda::tile_offset<kHeadDim>(r, kk * 2 + (lane / 8) % 2) * 2));
#pragma unroll
        for (int m = 0; m < kMTiles; ++m) {
          cuda::mma_bf16_16816(s[m][2 * np], qa[m], kf[0], kf[1]);
          cuda::mma_bf16_16816(s[m][2 * np + 1], qa[m], kf[2], kf[3]);
        }
      }
    }

    const cuda::ItemSlot& now = slots[slot_now];
    if (now.masked != 0) {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int2 key = *reinterpret_cast<const int2*>(now.global + nt * 8 + (lane % 4) * 2);
#pragma unroll
        for (int m = 0; m < kMTiles; ++m) {
          if (q_global[m][0] < key.x) s[m][nt][0] = -INFINITY;
          if (q_global[m][0] < key.y) s[m][nt][1] = -INFINITY;
          if (q_global[m][1] < key.x) s[m][nt][2] = -INFINITY;
          if (q_global[m][1] < key.y) s[m][nt][3] = -INFINITY;
        }
      }
    }
    if (describe) {
      cuda::finish_item_slot(slots[slot_new], fetch, index, items, t + 2, slot_r, p.shape.kv_len, p.position,
                             slot_global);
    }

    // Online softmax (base-2, scaled): turn S into P in place. The running output is rescaled only
    // when some row maximum of the warp grew (alpha == 1 exactly for every other row).
    float tile_max[kMTiles][2];
    bool grew = false;
#pragma unroll
    for (int m = 0; m < kMTiles; ++m) {
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        float value = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) value = fmaxf(value, fmaxf(s[m][nt][2 * rr], s[m][nt][2 * rr + 1]));
        tile_max[m][rr] = cuda::quad_max(value) * scale_log2;
        grew = grew || tile_max[m][rr] > row_max[m][rr];
      }
    }
    const bool rescale = __any_sync(0xffffffffu, grew);
#pragma unroll
    for (int m = 0; m < kMTiles; ++m) {
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        const float new_max = fmaxf(row_max[m][rr], tile_max[m][rr]);
        const float base = new_max == -INFINITY ? 0.0f : new_max;
        const float alpha = new_max == row_max[m][rr] ? 1.0f : cuda::fast_exp2(row_max[m][rr] - base);
        row_max[m][rr] = new_max;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          s[m][nt][2 * rr] = cuda::fast_exp2(fmaf(s[m][nt][2 * rr], scale_log2, -base));
          s[m][nt][2 * rr + 1] = cuda::fast_exp2(fmaf(s[m][nt][2 * rr + 1], scale_log2, -base));
          sum += s[m][nt][2 * rr] + s[m][nt][2 * rr + 1];
        }
        row_sum[m][rr] = row_sum[m][rr] * alpha + sum;
        if (rescale) {
#pragma unroll
          for (int dt = 0; dt < kDTiles; ++dt) {
            o[m][dt][2 * rr] *= alpha;
            o[m][dt][2 * rr + 1] *= alpha;
          }
        }
      }
    }

    // O += P V: P from the S accumulators (C layout == A layout), V through ldmatrix.trans.
    const uint32_t v_tile = v_tiles + static_cast<uint32_t>(stage) * kTileBytes;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      uint32_t pa[kMTiles][4];
#pragma unroll
      for (int m = 0; m < kMTiles; ++m) {
        pa[m][0] = cuda::pack_bf16x2(s[m][2 * kk][0], s[m][2 * kk][1]);
        pa[m][1] = cuda::pack_bf16x2(s[m][2 * kk][2], s[m][2 * kk][3]);
        pa[m][2] = cuda::pack_bf16x2(s[m][2 * kk + 1][0], s[m][2 * kk + 1][1]);
        pa[m][3] = cuda::pack_bf16x2(s[m][2 * kk + 1][2], s[m][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < kHeadDim / 16; ++dp) {
        uint32_t vf[4];
        const int r = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
        cuda::ldmatrix_x4_trans(vf, v_tile + static_cast<uint32_t>(cuda::tile_offset<kHeadDim>(r, dp * 2 + lane / 16) * 2));
#pragma unroll
        for (int m = 0; m < kMTiles; ++m) {
          cuda::mma_bf16_16816(o[m][2 * dp], pa[m], vf[0], vf[1]);
          cuda::mma_bf16_16816(o[m][2 * dp + 1], pa[m], vf[2], vf[3]);
        }
      }
    }
  }
  cuda::cp_async_wait<0>();

  // Merge the step into the running (out, lse). Each quad owns one row; read lse before any
  // lane of the warp writes it.
  float lse_old[kMTiles][2];
  float sums[kMTiles][2];
  bool writes[kMTiles][2];
#pragma unroll
  for (int m = 0; m < kMTiles; ++m) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int local = m * kTileRows + warp * 16 + lane / 4 + rr * 8;
      sums[m][rr] = cuda::quad_sum(row_sum[m][rr]);
      writes[m][rr] = local < q_valid && sums[m][rr] > 0.0f;
      lse_old[m][rr] = writes[m][rr] ? p.lse[q_row_base + q0 + local] : 0.0f;
    }
  }
  __syncwarp();
#pragma unroll
  for (int m = 0; m < kMTiles; ++m) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      if (!writes[m][rr]) continue;
      const int64_t token = q_row_base + q0 + m * kTileRows + warp * 16 + lane / 4 + rr * 8;
      const float lse_step = (row_max[m][rr] + log2f(sums[m][rr])) * kLn2;
      float lse_new = lse_step;
      float w_old = 0.0f;
      float w_step = 1.0f / sums[m][rr];
      if (lse_old[m][rr] != -INFINITY) {
        const float hi = fmaxf(lse_old[m][rr], lse_step);
        lse_new = hi + log1pf(expf(-fabsf(lse_old[m][rr] - lse_step)));
        w_old = expf(lse_old[m][rr] - lse_new);
        w_step *= expf(lse_step - lse_new);
      }
      float* out_row = p.out + token * kHeadDim + (lane % 4) * 2;
#pragma unroll
      for (int dt = 0; dt < kDTiles; ++dt) {
        float2 value = make_float2(o[m][dt][2 * rr] * w_step, o[m][dt][2 * rr + 1] * w_step);
        if (w_old != 0.0f) {
          const float2 old = *reinterpret_cast<const float2*>(out_row + dt * 8);
          value.x = fmaf(old.x, w_old, value.x);
          value.y = fmaf(old.y, w_old, value.y);
        }
        *reinterpret_cast<float2*>(out_row + dt * 8) = value;
      }
      if (lane % 4 == 0) p.lse[token] = lse_new;
    }
  }
}

template <int kHeadDim, int kMTiles>
void launch_fwd_instance(const SparseAttnFwdParams& params, cudaStream_t stream) {
  constexpr int smem = fwd_smem_bytes<kHeadDim, kMTiles>();
  SPARSERING_CUDA_CHECK(cudaFuncSetAttribute(sparse_attn_fwd_kernel<kHeadDim, kMTiles>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(static_cast<unsigned>(params.index.rows),
                  static_cast<unsigned>(params.index.q_blocks * (params.index.block_q / (kTileRows * kMTiles))));
  sparse_attn_fwd_kernel<kHeadDim, kMTiles><<<grid, kFwdThreads, smem, stream>>>(params);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

std::string forward_kernel_unavailable(ForwardKernel kernel, const SparseAttnFwdParams& params) {
  if (kernel != ForwardKernel::wgmma) return "";
  if (!sparse_attn_fwd_sm90_built()) return "this build has no sm_90a code (CMAKE_CUDA_ARCHITECTURES lacks 90a)";
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
  if (!sparse_attn_fwd_sm90_supports(params)) {
    return "it needs query blocks of a multiple of 128 tokens and head dim 64 or 128 (block_q " +
           std::to_string(params.index.block_q) + ", head dim " + std::to_string(params.shape.head_dim) + ")";
  }
  return "";
}

const char* forward_kernel_name(ForwardKernel kernel) {
  switch (kernel) {
    case ForwardKernel::automatic: return "automatic";
    case ForwardKernel::mma_sync: return "mma_sync";
    case ForwardKernel::wgmma: return "wgmma";
  }
  return "unknown";
}

ForwardKernel select_forward_kernel(const SparseAttnFwdParams& params) {
  if (const char* forced = std::getenv("SPARSERING_FORWARD_KERNEL"); forced != nullptr && *forced != '\0') {
    const std::string value = forced;
    if (value == "mma_sync") return ForwardKernel::mma_sync;
    if (value == "wgmma") return ForwardKernel::wgmma;
    if (value != "automatic") {
      throw InputError("SPARSERING_FORWARD_KERNEL='" + value + "': expected automatic, mma_sync or wgmma");
    }
  }
  return forward_kernel_unavailable(ForwardKernel::wgmma, params).empty() ? ForwardKernel::wgmma : ForwardKernel::mma_sync;
}

void launch_sparse_attn_fwd(const SparseAttnFwdParams& params, cudaStream_t stream, ForwardKernel kernel) {
  check_sparse_attn_fwd(params);
  if (params.index.rows == 0 || params.index.q_blocks == 0) return;
  if (kernel == ForwardKernel::automatic) kernel = select_forward_kernel(params);
  if (kernel == ForwardKernel::wgmma) {
    if (const std::string why = forward_kernel_unavailable(ForwardKernel::wgmma, params); !why.empty()) {
      throw InputError("the wgmma forward kernel cannot run here: " + why);
    }
    launch_sparse_attn_fwd_sm90(params, stream);
    return;
  }
  // 128-query CTAs whenever the query block allows them (they halve K/V traffic per flop).
  const bool wide = params.index.block_q % (2 * kTileRows) == 0;
  if (params.shape.head_dim == 64) {
    wide ? launch_fwd_instance<64, 2>(params, stream) : launch_fwd_instance<64, 1>(params, stream);
  } else {
    wide ? launch_fwd_instance<128, 2>(params, stream) : launch_fwd_instance<128, 1>(params, stream);
  }
}

}  // namespace sparsering
