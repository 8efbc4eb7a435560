// Vertical-slash pattern estimation: device code and launchers (see estimate_pattern.hpp).
// Both passes run one CTA of 8 warps per (GQA group = batch x K/V head, key range), so K is read
// from global memory once per group and pass, whatever the GQA ratio; the group's query heads
// share it. Scores use mma.sync m16n8k16 (bf16 in, fp32 accumulate) in base 2, or on Hopper
// warpgroup MMAs (pass 1: estimate_pattern_sm90.cu; pass 2: this kernel's kWgmma path): maxima
// over raw scores (the scale is > 0), so a probability is one fused multiply-add and one exp2;
// the causal mask (from the token layout) is a uniform branch taken only by tiles that reach the
// queries.
//   Pass 1 (row statistics), S = Q K^T: each warp holds the Q fragments of 32 query rows of the
//     group in registers and streams the CTA's 2048 keys through three shared-memory stages of 64
//     keys (cp.async); every thread keeps an online (max, sum) per row over the keys it holds, so
//     lanes are combined only once, at the end; a fold kernel (one warp per query) combines the
//     key ranges.
//   Pass 2 (masses), S^T = K Q^T: each warp holds the K fragments of 32 keys in registers and
//     streams the group's query tiles (64 queries of one head) through two shared-memory stages.
//     In this orientation a key is an accumulator row, so its vertical mass is a sum over the
//     thread's own columns plus two shuffles, written once per (head, key), no atomics. A slash
//     is a diagonal of the tile: when the warp's keys are consecutive global positions each
//     thread folds its 64 probabilities into 22 diagonal partials and stages them by diagonal
//     (one zero-margined row per accumulator row), so each of the warp's 95 diagonals is 8
//     loads and adds with no bounds test or branch; when the CTA's 256 keys are consecutive too
//     each warp writes its diagonal totals, and after one barrier a thread per CTA diagonal (319)
//     adds the at most 3 warps' totals and issues one global atomic if nonzero (no shared
//     atomics: a float atomic in shared memory is a compare-and-swap loop); other keys (stripes
//     shorter than 32 tokens) add per pair.
// Tested against the CPU references in tests/kernels_gpu/estimate_pattern_test.cpp.
#include "kernels/cuda/estimate_pattern.hpp"

#include <cfloat>
#include <cmath>
#include <string>
#include <type_traits>

#include "common/error.hpp"
#include "kernels/cuda/attention_checks.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/estimate_pattern_sm90.hpp"
#include "kernels/cuda/estimate_row_statistics.cuh"
#include "kernels/cuda/hopper_async.cuh"
#include "kernels/cuda/sm90a_availability.hpp"
#include "kernels/cuda/warp_mma.cuh"
#include "kernels/cuda/wgmma_tile_scores.cuh"

namespace sparsering {
namespace {

using cuda::kTileRows;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Pass 1: 2 m-tiles (32 query rows) per warp, 256 rows of the group per CTA ("round"), 2048 keys.
constexpr int kP1TilesPerWarp = 2;
constexpr int kP1MTilesPerCta = kWarps * kP1TilesPerWarp;
constexpr int kP1ChunkKeys = kEstimatePass1ChunkKeys;
static_assert(kP1MTilesPerCta * 16 == kEstimatePass1RowsPerCta, "a round is the CTA's query rows");
constexpr int kP1Stages = 3;  // key tiles in flight: one CTA per SM hides the loads alone
// Pass 2: kP2MTiles x 16 keys per warp, 8 warps per chunk, 4 chunks per CTA (the next chunk's K
// loads while the current one computes), query tiles of 64. One m-tile per warp (128 registers,
// two CTAs per SM) measured 5% slower than two.
constexpr int kP2MTiles = 2;
constexpr int kP2ChunksPerCta = 4;
template <int kMTiles>
struct Pass2Shape {
  static constexpr int kKeysPerWarp = kMTiles * 16;
  static constexpr int kChunkKeys = kWarps * kKeysPerWarp;
  static constexpr int kDiagonals = kKeysPerWarp + kTileRows - 1;  // of a warp tile
  static constexpr int kBins = kChunkKeys + kTileRows - 1;         // diagonals of a CTA tile
  static constexpr int kGroupLow = 2 * kMTiles - 1;                // diagonal groups u from -kGroupLow to 7
  static constexpr int kGroups = 8 + kGroupLow;
  // A warp's diagonal partials, one row per accumulator row a (lane / 4): partial (u, j) of lane
  // (a, b) at position 8 + 8 (u + kGroupLow) + 2b + j, between 8 zero floats on each side, so
  // that diagonal e reads row a at e + a + 8 kGroupLow + 8 without a bounds test. A pitch of 8
  // modulo 32 floats makes the lanes' 8-byte stores conflict-free.
  static constexpr int kStageRow = 8 * kGroups + 16;
  static constexpr int kStagePitch = kStageRow + (8 - kStageRow % 32 + 32) % 32;
  static constexpr int kDiagonalPitch = (kDiagonals + 3) / 4 * 4;  // a warp's diagonal totals
};

void check_estimate(const EstimateParams& p, bool pass2) {
  const AttentionShape& shape = p.shape;
  require(shape.batch >= 1 && shape.q_heads >= 1 && shape.kv_heads >= 1 && shape.q_heads % shape.kv_heads == 0,
          "shape: batch, q_heads >= 1 and kv_heads dividing q_heads required, got ", shape.batch, ", ", shape.q_heads,
          ", ", shape.kv_heads);
  require(shape.head_dim == 64 || shape.head_dim == 128, "shape.head_dim must be 64 or 128, got ", shape.head_dim);
  const TokenLayout& layout = p.position.layout;
  require(layout.seq_len_tokens() < (int64_t{1} << 31), "position.layout.seq_len_tokens must be < 2^31, got ",
          layout.seq_len_tokens());
  require(p.position.kv_rank >= 0 && p.position.kv_rank < layout.ranks(), "position.kv_rank = ", p.position.kv_rank,
          " is outside [0, ", layout.ranks(), ")");
  require(shape.q_len >= 1 && shape.q_len <= layout.seq_len_tokens(), "last_q (shape.q_len) = ", shape.q_len,
          " must be in [1, ", layout.seq_len_tokens(), "]");
  require(shape.kv_len == layout.local_len(), "shape.kv_len = ", shape.kv_len, " must equal the layout's local length ",
          layout.local_len());
  // > 0: the passes take a row's maximum of raw scores as the maximum of scaled ones; normal, so
  // that the scale does not flush to 0 on the GPU (0 x -inf would be NaN).
  require(std::isfinite(p.softmax_scale) && p.softmax_scale >= FLT_MIN,
          "softmax_scale must be finite and >= FLT_MIN (a positive normal float), got ", p.softmax_scale);
  require(int64_t{shape.batch} * shape.q_heads <= 65535, "batch x q_heads must be <= 65535, got ",
          int64_t{shape.batch} * shape.q_heads);
  check_device_pointer(p.q_last, 16, "q_last");
  check_device_pointer(p.k, 16, "k");
  check_device_pointer(p.row_max, 4, "row_max");
  check_device_pointer(p.row_sum, 4, "row_sum");
  if (pass2) {
    check_device_pointer(p.vertical_mass, 4, "vertical_mass");
    check_device_pointer(p.slash_mass, 4, "slash_mass");
  }
}

/// The GQA group of a CTA: batch b, K/V head hk, its query heads hk * group .. + group - 1.
struct Group {
  int b;
  int hk;
  int heads;  // query heads per K/V head
  __device__ Group(const AttentionShape& shape, int kv_row)
      : b(kv_row / shape.kv_heads), hk(kv_row % shape.kv_heads), heads(shape.q_heads / shape.kv_heads) {}
  /// Row (batch x query head) of the group's g-th head.
  __device__ int q_row(const AttentionShape& shape, int g) const { return b * shape.q_heads + hk * heads + g; }
};

// ---------------------------------------------------------------------------------------------
// Pass 1

template <int kHeadDim>
struct Pass1Smem {
  static constexpr int kTile = cuda::kTileBytes<kHeadDim>;
  static constexpr int kK = 0;                             // kP1Stages stages of 64 keys
  static constexpr int kKeyGlobal = kP1Stages * kTile;     // [kP1Stages][64] int32
  static constexpr int kBytes = kKeyGlobal + kP1Stages * kTileRows * 4;
};

/// Partial statistics (base-2 max, sum) per (row, query, key chunk) of one shard.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads, 1)
    estimate_pattern_pass1_kernel(const EstimateParams p, int chunks, int m_tiles_per_head, float* partial_max,
                                  float* partial_sum) {
  using Smem = Pass1Smem<kHeadDim>;
  constexpr int kSteps = kHeadDim / 16;
  extern __shared__ __align__(128) unsigned char smem[];
  const int chunk = static_cast<int>(blockIdx.x);
  const Group group(p.shape, static_cast<int>(blockIdx.y));
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t last_q = p.shape.q_len;
  const int64_t kv_len = p.shape.kv_len;
  const int64_t n = p.position.layout.seq_len_tokens();
  const int64_t first_query = n - last_q;  // global position of query 0
  const int64_t key_begin = int64_t{chunk} * kP1ChunkKeys;
  const int tiles = static_cast<int>(min(int64_t{kP1ChunkKeys / kTileRows}, (kv_len - key_begin + kTileRows - 1) / kTileRows));
  const uint16_t* k_rows = p.k + (int64_t{group.b} * p.shape.kv_heads + group.hk) * kv_len * kHeadDim;
  const uint32_t base = cuda::smem_address(smem);
  int32_t* key_global = reinterpret_cast<int32_t*>(smem + Smem::kKeyGlobal);

  // Issues key tile `tile` (if it exists) into stage tile % kP1Stages and commits one cp.async
  // group either way, so that group i always holds tile i.
  auto issue = [&](int tile) {
    if (tile < tiles) {
      const int stage = tile % kP1Stages;
      const int64_t k0 = key_begin + int64_t{tile} * kTileRows;
      cuda::load_tile_async<kHeadDim, kThreads>(base + Smem::kK + stage * Smem::kTile, k_rows,
                                                [&](int r) -> const uint16_t* {
                                                  return k0 + r < kv_len ? k_rows + (k0 + r) * kHeadDim : nullptr;
                                                });
      const int r = static_cast<int>(threadIdx.x);
      if (r < kTileRows) {
        key_global[stage * kTileRows + r] =
            k0 + r < kv_len ? static_cast<int32_t>(p.position.layout.global_token(p.position.kv_rank, k0 + r)) : INT32_MAX;
      }
    }
    cuda::cp_async_commit();
  };
#pragma unroll
  for (int tile = 0; tile < kP1Stages - 1; ++tile) issue(tile);

  // This warp's query rows: group m-tile gm = round * 16 + warp * 2 + i is head gm / m_tiles_per_head,
  // queries (gm % m_tiles_per_head) * 16 + 0..15.
  uint32_t q_frag[kP1TilesPerWarp][kSteps][4];
  int32_t q_global[kP1TilesPerWarp][2];
  int out_row[kP1TilesPerWarp];
  int64_t out_t[kP1TilesPerWarp];
  cuda::RowStatistics stats[kP1TilesPerWarp][2];
#pragma unroll
  for (int i = 0; i < kP1TilesPerWarp; ++i) {
    const int gm = static_cast<int>(blockIdx.z) * kP1MTilesPerCta + warp * kP1TilesPerWarp + i;
    cuda::load_group_query_tile<kHeadDim>(gm, group.heads * m_tiles_per_head, m_tiles_per_head,
                                          group.q_row(p.shape, 0), p.q_last, last_q, first_query, q_frag[i],
                                          q_global[i], out_row[i], out_t[i]);
    stats[i][0].reset();
    stats[i][1].reset();
  }
  const float scale2 = p.softmax_scale * kLog2e;

  for (int tile = 0; tile < tiles; ++tile) {
    const int stage = tile % kP1Stages;
    cuda::cp_async_wait<kP1Stages - 2>();  // groups 0..tile complete: K(tile) landed
    __syncthreads();  // ... for every thread; every warp is done with tile - 1's stage
    issue(tile + kP1Stages - 1);  // into tile - 1's stage
    float s[kP1TilesPerWarp][32];  // the m16n8 accumulators of n-tile nt at s[i][4 nt ..]
#pragma unroll
    for (int i = 0; i < kP1TilesPerWarp; ++i) {
#pragma unroll
      for (int c = 0; c < 32; ++c) s[i][c] = 0.0f;
    }
    auto accumulator = [&s](int i, int nt) -> float (&)[4] { return *reinterpret_cast<float(*)[4]>(&s[i][4 * nt]); };
    const uint32_t k_tile = base + Smem::kK + stage * Smem::kTile;
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) {
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t kf[4];
        const int r = np * 16 + (lane % 8) + (lane / 16) * 8;
        cuda::ldmatrix_x4(kf, k_tile + static_cast<uint32_t>(cuda::tile_offset<kHeadDim>(r, kk * 2 + (lane / 8) % 2) * 2));
#pragma unroll
        for (int i = 0; i < kP1TilesPerWarp; ++i) {
          cuda::mma_bf16_16816(accumulator(i, 2 * np), q_frag[i][kk], kf[0], kf[1]);
          cuda::mma_bf16_16816(accumulator(i, 2 * np + 1), q_frag[i][kk], kf[2], kf[3]);
        }
      }
    }
    const int32_t* kg = key_global + stage * kTileRows;
    // Keys ascend in global order inside a tile, so the last one decides whether any query of
    // the sequence's end can miss one (past kv_len the sentinel INT32_MAX always masks): a
    // uniform branch, and most tiles skip the mask.
    const bool masked = static_cast<int64_t>(kg[kTileRows - 1]) > first_query;
#pragma unroll
    for (int i = 0; i < kP1TilesPerWarp; ++i) {
      if (masked) cuda::mask_tile_scores(s[i], q_global[i], kg);
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        float v[16];
        cuda::row_scores(s[i], rr, v);
        stats[i][rr].fold(v, scale2);
      }
    }
  }
  cuda::cp_async_wait<0>();

  cuda::write_row_partials(stats, q_global, out_row, out_t, last_q, chunks, chunk, partial_max, partial_sum);
}

/// Folds the key chunks' partials of one (row, query) into row_max / row_sum: one warp each.
__global__ void estimate_pattern_fold_kernel(int64_t entries, int chunks, const float* partial_max,
                                             const float* partial_sum, float* row_max, float* row_sum) {
  const int64_t e = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (e >= entries) return;
  float m = -INFINITY;
  for (int c = lane; c < chunks; c += 32) m = fmaxf(m, partial_max[e * chunks + c]);
#pragma unroll
  for (int mask = 16; mask >= 1; mask >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, mask));
  float s = 0.0f;
  if (m != -INFINITY) {
    for (int c = lane; c < chunks; c += 32) {
      const float mc = partial_max[e * chunks + c];
      if (mc != -INFINITY) s += partial_sum[e * chunks + c] * exp2f(mc - m);
    }
  }
#pragma unroll
  for (int mask = 16; mask >= 1; mask >>= 1) s += __shfl_xor_sync(0xffffffffu, s, mask);
  if (lane == 0) {
    row_max[e] = m == -INFINITY ? m : m * kLn2;  // partials are in base 2
    row_sum[e] = s;
  }
}

__global__ void estimate_pattern_combine_kernel(int64_t rows, const float* shard_max, const float* shard_sum,
                                                float* row_max, float* row_sum) {
  const int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (e >= rows) return;
  const float ma = row_max[e];
  const float mb = shard_max[e];
  const float m = fmaxf(ma, mb);
  if (m == -INFINITY) return;
  const float sa = ma == -INFINITY ? 0.0f : row_sum[e] * expf(ma - m);
  const float sb = mb == -INFINITY ? 0.0f : shard_sum[e] * expf(mb - m);
  row_max[e] = m;
  row_sum[e] = sa + sb;
}

// ---------------------------------------------------------------------------------------------
// Pass 2

template <int kHeadDim, int kMTiles, bool kWgmma>
struct Pass2Smem {
  using Shape = Pass2Shape<kMTiles>;
  static constexpr int kTile = cuda::kTileBytes<kHeadDim>;                // 64 rows, padded
  // A query tile: padded for ldmatrix, or 128-byte swizzled (1024-byte aligned) for wgmma.
  static constexpr int kQTile = kWgmma ? kTileRows * kHeadDim * 2 : kTile;
  static constexpr int kK = 0;                                            // the chunk's key rows
  static constexpr int kQ = kK + (Shape::kChunkKeys / kTileRows) * kTile;  // 2 stages of 64 queries
  static_assert(!kWgmma || kQ % 1024 == 0, "swizzled query tiles must be 1024-byte aligned");
  static constexpr int kStats = kQ + 2 * kQTile;                          // [2][64] floats: max2 + log2 sum
  static constexpr int kKeyGlobal = kStats + 2 * kTileRows * 4;           // [chunk keys] int32
  static constexpr int kStage = kKeyGlobal + Shape::kChunkKeys * 4;       // [warps][8][stage pitch] floats
  static constexpr int kDiagonalTotals = kStage + kWarps * 8 * Shape::kStagePitch * 4;  // [warps][pitch]
  static constexpr int kBytes = kDiagonalTotals + kWarps * Shape::kDiagonalPitch * 4 + (kWgmma ? 1024 : 0);
};

/// Pass 2: CTA per (GQA group, 4 chunks of 256 keys); iterates (chunk, head, query tile). With
/// kWgmma (sm_90a) S^T comes from warpgroup MMAs: each warp's K fragments are the A operand of
/// its 16 rows, the query tile the B operand in shared memory, so the accumulators hold what the
/// mma.sync path's do, and the second m-tile's MMAs run while the first one's probabilities are
/// computed.
template <int kHeadDim, int kMTiles, bool kWgmma>
__global__ void __launch_bounds__(kThreads, 3 - kMTiles)
    estimate_pattern_pass2_kernel(const EstimateParams p, int chunks, int q_tiles) {
#if !defined(SPARSERING_SM90A_DEVICE_CODE)
  if constexpr (kWgmma) __trap();  // launched only on compute capability 9.0 (estimate_kernel_unavailable)
#endif
  using Smem = Pass2Smem<kHeadDim, kMTiles, kWgmma>;
  using Shape = Pass2Shape<kMTiles>;
  constexpr int kSteps = kHeadDim / 16;
  constexpr int kP2KeysPerWarp = Shape::kKeysPerWarp;
  constexpr int kP2ChunkKeys = Shape::kChunkKeys;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  // Swizzled tiles need 1024-byte alignment (the slack is in kBytes).
  unsigned char* smem = kWgmma ? smem_raw + ((1024u - cuda::smem_address(smem_raw) % 1024u) % 1024u) : smem_raw;
  const Group group(p.shape, static_cast<int>(blockIdx.y));
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int quad_row = lane / 4;  // a: accumulator row within an 8-row half
  const int quad_col = lane % 4;  // b: column pair
  const int64_t last_q = p.shape.q_len;
  const int64_t kv_len = p.shape.kv_len;
  const int64_t n = p.position.layout.seq_len_tokens();
  const int64_t first_query = n - last_q;
  const uint16_t* k_rows = p.k + (int64_t{group.b} * p.shape.kv_heads + group.hk) * kv_len * kHeadDim;
  const uint32_t base = cuda::smem_address(smem);
  float* stats = reinterpret_cast<float*>(smem + Smem::kStats);
  int32_t* key_global = reinterpret_cast<int32_t*>(smem + Smem::kKeyGlobal);
  float* stage = reinterpret_cast<float*>(smem + Smem::kStage) + warp * 8 * Shape::kStagePitch;
  float* diagonal_totals = reinterpret_cast<float*>(smem + Smem::kDiagonalTotals);
  const float scale2 = p.softmax_scale * kLog2e;

  const int chunk_first = static_cast<int>(blockIdx.x) * kP2ChunksPerCta;
  const int chunk_count = min(kP2ChunksPerCta, chunks - chunk_first);
  const int per_chunk = group.heads * q_tiles;  // iterations (head, query tile) per chunk
  const int iterations = chunk_count * per_chunk;

  // The stage's zero margins (never written again).
  for (int i = lane; i < 8 * 16; i += 32) {
    const int row = i / 16;
    const int at = i % 16;
    stage[row * Shape::kStagePitch + (at < 8 ? at : Shape::kStageRow - 16 + at)] = 0.0f;
  }

  auto issue_keys = [&](int chunk) {
    const int64_t k0 = int64_t{chunk} * kP2ChunkKeys;
#pragma unroll
    for (int part = 0; part < kP2ChunkKeys / kTileRows; ++part) {
      const int64_t p0 = k0 + part * kTileRows;
      cuda::load_tile_async<kHeadDim, kThreads>(base + Smem::kK + part * Smem::kTile, k_rows,
                                                [&](int r) -> const uint16_t* {
                                                  return p0 + r < kv_len ? k_rows + (p0 + r) * kHeadDim : nullptr;
                                                });
    }
    const int r = static_cast<int>(threadIdx.x);
    if (r < kP2ChunkKeys) {
      key_global[r] = k0 + r < kv_len ? static_cast<int32_t>(p.position.layout.global_token(p.position.kv_rank, k0 + r))
                                      : INT32_MAX;
    }
  };
  // Query tile qt of head g into stage `buffer` (cp.async).
  auto issue_queries = [&](int g, int qt, int buffer) {
    const int64_t t0 = int64_t{qt} * kTileRows;
    const uint16_t* q_rows = p.q_last + int64_t{group.q_row(p.shape, g)} * last_q * kHeadDim;
    auto row = [&](int r) -> const uint16_t* { return t0 + r < last_q ? q_rows + (t0 + r) * kHeadDim : nullptr; };
    if constexpr (kWgmma) {
      cuda::sm90::load_swizzled_tile_async<kHeadDim, kTileRows, kThreads>(base + Smem::kQ + buffer * Smem::kQTile,
                                                                         q_rows, row);
    } else {
      cuda::load_tile_async<kHeadDim, kThreads>(base + Smem::kQ + buffer * Smem::kQTile, q_rows, row);
    }
  };
  // Statistics of (head g, query tile qt), column threadIdx.x (< 64): loaded into registers
  // early, stored to a stage after the MMAs, so no warp waits on them before computing.
  // p = 2^(score x scale2 - max2 - log2 sum): the normalisation is one subtraction in the
  // exponent, not a multiply per probability. A column past last_q, or a query that sees no key
  // anywhere, gets +inf: probability 0 without a branch.
  float next_max = 0.0f;
  float next_sum = 0.0f;
  auto load_stats = [&](int g, int qt) {
    const int c = static_cast<int>(threadIdx.x);
    const int64_t t = int64_t{qt} * kTileRows + c;
    next_sum = 0.0f;
    if (c < kTileRows && t < last_q) {
      const int64_t at = int64_t{group.q_row(p.shape, g)} * last_q + t;
      next_max = p.row_max[at];
      next_sum = p.row_sum[at];
    }
  };
  auto store_stats = [&](int buffer) {
    const int c = static_cast<int>(threadIdx.x);
    if (c < kTileRows) {
      stats[buffer * kTileRows + c] = next_sum > 0.0f ? next_max * kLog2e + __log2f(next_sum) : INFINITY;
    }
  };

  issue_keys(chunk_first);
  issue_queries(0, 0, 0);
  cuda::cp_async_commit();
  load_stats(0, 0);
  store_stats(0);

  uint32_t k_frag[kMTiles][kSteps][4];
  int32_t kg[kMTiles][2];            // global positions of this thread's 4 keys [m-tile][row half]
  int32_t warp_key0 = 0;       // global position of the warp's first key
  int32_t cta_key0 = 0;        // ... of the CTA's first key
  bool warp_consecutive = false;
  bool cta_consecutive = false;
  bool warp_last_key_late = true;  // the warp's last key may be after some query (mask needed)
  int32_t warp_last_key = 0;
  float vertical[kMTiles][2] = {};
  bool keys_newest = false;  // the most recent cp.async group is the next chunk's keys

  // This iteration's (chunk, head, query tile) and the next one's, stepped without divisions.
  int chunk = chunk_first;
  int g = 0;
  int qt = 0;
  for (int it = 0; it < iterations; ++it) {
    const bool chunk_start = g == 0 && qt == 0;
    int next_g = g;
    int next_qt = qt + 1;
    if (next_qt == q_tiles) {
      next_qt = 0;
      if (++next_g == group.heads) next_g = 0;
    }
    if (keys_newest && !chunk_start) {
      cuda::cp_async_wait<1>();  // this iteration's queries, not yet the next chunk's keys
    } else {
      cuda::cp_async_wait<0>();
    }
    if constexpr (kWgmma) cuda::sm90::fence_proxy_async_shared();  // the queries, for wgmma
    __syncthreads();  // (A) queries (and at a chunk start the keys) landed; diagonal totals read
    keys_newest = false;
    if (chunk_start) {
      const int key0 = warp * kP2KeysPerWarp;
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int kk = 0; kk < kSteps; ++kk) {
          const int r = key0 + mt * 16 + lane % 16;
          cuda::ldmatrix_x4(k_frag[mt][kk], base + Smem::kK + static_cast<uint32_t>((r / kTileRows) * Smem::kTile) +
                                                static_cast<uint32_t>(cuda::tile_offset<kHeadDim>(r % kTileRows, kk * 2 + lane / 16) * 2));
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) kg[mt][h] = key_global[key0 + mt * 16 + h * 8 + quad_row];
      }
      warp_key0 = key_global[key0];
      warp_last_key = key_global[key0 + kP2KeysPerWarp - 1];
      cta_key0 = key_global[0];
      warp_consecutive = warp_last_key != INT32_MAX && warp_last_key - warp_key0 == kP2KeysPerWarp - 1;
      cta_consecutive = key_global[kP2ChunkKeys - 1] != INT32_MAX &&
                        key_global[kP2ChunkKeys - 1] - cta_key0 == kP2ChunkKeys - 1;
      __syncthreads();  // every warp holds its keys: the key region may be refilled
    }

    // S^T = K Q^T for the warp's 32 keys x 64 queries: m-tile mt in s[mt] (the m16n8 accumulator
    // layout, n-tile nt at s[mt][nt]).
    float s[kMTiles][8][4];
    const uint32_t q_tile = base + Smem::kQ + static_cast<uint32_t>((it & 1) * Smem::kQTile);
    if constexpr (kWgmma) {
#if defined(SPARSERING_SM90A_DEVICE_CODE)
      // One commit group per m-tile, issued before the next iteration's loads below.
      const uint64_t q_desc = cuda::sm90::swizzled_descriptor(q_tile, 0);
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        cuda::sm90::issue_tile_scores<kHeadDim>(*reinterpret_cast<float(*)[32]>(&s[mt][0][0]), k_frag[mt], q_desc);
      }
#endif
    }
    const bool more = it + 1 < iterations;
    if (more) {
      issue_queries(next_g, next_qt, (it + 1) & 1);
      load_stats(next_g, next_qt);
    }
    cuda::cp_async_commit();
    if (chunk_start && chunk + 1 < chunk_first + chunk_count) {
      issue_keys(chunk + 1);
      cuda::cp_async_commit();
      keys_newest = true;
    }

    if constexpr (!kWgmma) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
      }
#pragma unroll
      for (int kk = 0; kk < kSteps; ++kk) {
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          uint32_t qf[4];
          const int r = np * 16 + (lane % 8) + (lane / 16) * 8;
          cuda::ldmatrix_x4(qf, q_tile + static_cast<uint32_t>(cuda::tile_offset<kHeadDim>(r, kk * 2 + (lane / 8) % 2) * 2));
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            cuda::mma_bf16_16816(s[mt][2 * np], k_frag[mt][kk], qf[0], qf[1]);
            cuda::mma_bf16_16816(s[mt][2 * np + 1], k_frag[mt][kk], qf[2], qf[3]);
          }
        }
      }
    }

    if (more) store_stats((it + 1) & 1);  // that stage was last read before this iteration's (A)

    // Probabilities in place; the causal test only where the warp's last key follows the tile's
    // first query (keys ascend in global order; sentinel keys past kv_len always fail it).
    const float* bias2 = stats + (it & 1) * kTileRows;
    const int64_t query0 = first_query + int64_t{qt} * kTileRows;  // global position of column 0
    warp_last_key_late = static_cast<int64_t>(warp_last_key) > query0;
    // Key (mt, h) is masked in the tile's columns c < visible_from[mt][h] (its position minus the
    // tile's first query, clamped to [0, 64]): one 32-bit compare per probability.
    int32_t visible_from[kMTiles][2];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        visible_from[mt][h] = static_cast<int32_t>(
            min(max(static_cast<int64_t>(kg[mt][h]) - query0, int64_t{0}), int64_t{kTileRows}));
      }
    }
    float bias[16];  // the thread's 16 columns' max2 + log2 sum
#pragma unroll
    for (int c = 0; c < 16; ++c) bias[c] = bias2[(c / 2) * 8 + quad_col * 2 + c % 2];
    // Probabilities of m-tile mt in place. The mask is a uniform branch: most tiles lie wholly
    // before the queries and skip it.
    auto probabilities = [&](int mt, auto masked) {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int c = nt * 8 + quad_col * 2 + j;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            float prob = cuda::fast_exp2(fmaf(s[mt][nt][2 * h + j], scale2, -bias[2 * nt + j]));
            if (decltype(masked)::value && c < visible_from[mt][h]) prob = 0.0f;
            s[mt][nt][2 * h + j] = prob;
          }
        }
      }
    };
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      if constexpr (kWgmma) {
#if defined(SPARSERING_SM90A_DEVICE_CODE)
        static_assert(kMTiles <= 2, "one wgmma group per m-tile, at most one left in flight");
        if (mt + 1 < kMTiles) {
          cuda::sm90::wgmma_wait<1>();  // m-tile mt complete; the next one's MMAs run on
        } else {
          cuda::sm90::wgmma_wait<0>();
        }
        cuda::sm90::fence_registers(*reinterpret_cast<float(*)[32]>(&s[mt][0][0]));
#endif
      }
      if (warp_last_key_late) {
        probabilities(mt, std::true_type{});
      } else {
        probabilities(mt, std::false_type{});
      }
      // Vertical: this thread's columns, accumulated over the head's query tiles.
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float row = 0.0f;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) row += s[mt][nt][2 * h] + s[mt][nt][2 * h + 1];
        vertical[mt][h] += row;
      }
    }

    // Slash: diagonal e = c - r of the warp tile, offset d = query0 - warp_key0 + e.
    float* slash_row = p.slash_mass + int64_t{group.q_row(p.shape, g)} * n;
    if (warp_consecutive) {
      // Value (mt, nt, h, j) sits on e = 8u + (2b + j - a) with u = nt - h - 2 mt in [-kGroupLow, 7].
      float partial[Shape::kGroups][2];
#pragma unroll
      for (int u = 0; u < Shape::kGroups; ++u) partial[u][0] = partial[u][1] = 0.0f;
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
#pragma unroll
            for (int j = 0; j < 2; ++j) partial[nt - h - 2 * mt + Shape::kGroupLow][j] += s[mt][nt][2 * h + j];
          }
        }
      }
      float* const stage_row = stage + quad_row * Shape::kStagePitch + 8 + quad_col * 2;
#pragma unroll
      for (int u = 0; u < Shape::kGroups; ++u) {
        *reinterpret_cast<float2*>(stage_row + 8 * u) = make_float2(partial[u][0], partial[u][1]);
      }
      __syncwarp();
      // Diagonal e = idx - (keys per warp - 1) sums row a at e + a + 8 kGroupLow + 8 over the 8 rows.
      float* const warp_totals = diagonal_totals + warp * Shape::kDiagonalPitch;
      for (int idx = lane; idx < Shape::kDiagonals; idx += 32) {
        const float* const at = stage + idx - (kP2KeysPerWarp - 1) + 8 * Shape::kGroupLow + 8;
        float total = 0.0f;
#pragma unroll
        for (int a = 0; a < 8; ++a) total += at[a * (Shape::kStagePitch + 1)];
        if (cta_consecutive) {
          warp_totals[idx] = total;
        } else if (total != 0.0f) {
          atomicAdd(slash_row + (query0 - warp_key0 + idx - (kP2KeysPerWarp - 1)), total);
        }
      }
      __syncwarp();
    } else {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              const float prob = s[mt][nt][2 * h + j];
              if (prob != 0.0f) atomicAdd(slash_row + (query0 + nt * 8 + quad_col * 2 + j - kg[mt][h]), prob);
            }
          }
        }
      }
    }
    __syncthreads();  // (B) every warp's diagonal totals are in
    if (cta_consecutive) {
      // Diagonal i of the CTA tile (offset query0 - cta_key0 - (chunk keys - 1) + i) is diagonal
      // idx = i - chunk keys + (w + 1) x keys per warp of warp w, for the (at most
      // ceil(kDiagonals / keys per warp)) warps where idx is in [0, kDiagonals).
      const int64_t d0 = query0 - cta_key0 - (kP2ChunkKeys - 1);
      for (int i = static_cast<int>(threadIdx.x); i < Shape::kBins; i += kThreads) {
        const int w_first = max(0, (kP2ChunkKeys - i + kP2KeysPerWarp - 1) / kP2KeysPerWarp - 1);
        float total = 0.0f;
        for (int w = w_first; w < kWarps; ++w) {
          const int idx = i - kP2ChunkKeys + (w + 1) * kP2KeysPerWarp;
          if (idx >= Shape::kDiagonals) break;
          total += diagonal_totals[w * Shape::kDiagonalPitch + idx];
        }
        if (total != 0.0f) atomicAdd(slash_row + (d0 + i), total);
      }
    }
    if (qt == q_tiles - 1) {
      // The head's last query tile: its vertical mass of these keys is complete.
      float* vertical_row = p.vertical_mass + int64_t{group.q_row(p.shape, g)} * kv_len;
      const int64_t key0 = int64_t{chunk} * kP2ChunkKeys + warp * kP2KeysPerWarp;
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float v = vertical[mt][h];
          v += __shfl_xor_sync(0xffffffffu, v, 1);
          v += __shfl_xor_sync(0xffffffffu, v, 2);
          const int64_t key = key0 + mt * 16 + h * 8 + quad_row;
          if (quad_col == 0 && key < kv_len) vertical_row[key] = v;
          vertical[mt][h] = 0.0f;
        }
      }
    }
    if (next_g == 0 && next_qt == 0) ++chunk;
    g = next_g;
    qt = next_qt;
  }
  cuda::cp_async_wait<0>();
}

template <int kHeadDim>
void launch_pass1_instance(const EstimateParams& p, cudaStream_t stream, EstimateKernel kernel) {
  const int rows = p.shape.batch * p.shape.q_heads;
  const int chunks = static_cast<int>((p.shape.kv_len + kP1ChunkKeys - 1) / kP1ChunkKeys);
  const int64_t entries = int64_t{rows} * p.shape.q_len;
  const unsigned fold_blocks = static_cast<unsigned>((entries * 32 + 255) / 256);
  if (chunks == 0) {  // an empty shard: every query sees no key
    estimate_pattern_fold_kernel<<<fold_blocks, 256, 0, stream>>>(entries, 0, nullptr, nullptr, p.row_max, p.row_sum);
    SPARSERING_CUDA_CHECK(cudaGetLastError());
    return;
  }
  const int64_t m_tiles_per_head = (p.shape.q_len + 15) / 16;
  const int64_t rounds = (int64_t{p.shape.q_heads / p.shape.kv_heads} * m_tiles_per_head + kP1MTilesPerCta - 1) /
                         kP1MTilesPerCta;
  require(rounds <= 65535, "last_q x (q_heads / kv_heads) is too large for the estimation: ", rounds,
          " query rounds of 256 rows (at most 65535)");
  StreamBuffer partials(static_cast<size_t>(entries) * static_cast<size_t>(chunks) * 8, stream);
  float* partial_max = partials.as<float>();
  float* partial_sum = partial_max + entries * chunks;
  if (kernel == EstimateKernel::wgmma) {
    launch_estimate_pattern_pass1_sm90(p, chunks, static_cast<int>(m_tiles_per_head), static_cast<int>(rounds),
                                       partial_max, partial_sum, stream);
  } else {
    constexpr int smem = Pass1Smem<kHeadDim>::kBytes;
    SPARSERING_CUDA_CHECK(cudaFuncSetAttribute(estimate_pattern_pass1_kernel<kHeadDim>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(p.shape.batch * p.shape.kv_heads),
                    static_cast<unsigned>(rounds));
    estimate_pattern_pass1_kernel<kHeadDim><<<grid, kThreads, smem, stream>>>(
        p, chunks, static_cast<int>(m_tiles_per_head), partial_max, partial_sum);
    SPARSERING_CUDA_CHECK(cudaGetLastError());
  }
  estimate_pattern_fold_kernel<<<fold_blocks, 256, 0, stream>>>(entries, chunks, partial_max, partial_sum, p.row_max,
                                                                p.row_sum);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

template <int kHeadDim, int kMTiles, bool kWgmma>
void launch_pass2_instance(const EstimateParams& p, cudaStream_t stream) {
  constexpr int kChunkKeys = Pass2Shape<kMTiles>::kChunkKeys;
  const int chunks = static_cast<int>((p.shape.kv_len + kChunkKeys - 1) / kChunkKeys);
  if (chunks == 0) return;
  const int64_t q_tiles = (p.shape.q_len + kTileRows - 1) / kTileRows;
  require(q_tiles * (p.shape.q_heads / p.shape.kv_heads) * kP2ChunksPerCta < (int64_t{1} << 31),
          "last_q x (q_heads / kv_heads) is too large for the estimation");
  constexpr int smem = Pass2Smem<kHeadDim, kMTiles, kWgmma>::kBytes;
  SPARSERING_CUDA_CHECK(cudaFuncSetAttribute(estimate_pattern_pass2_kernel<kHeadDim, kMTiles, kWgmma>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(static_cast<unsigned>((chunks + kP2ChunksPerCta - 1) / kP2ChunksPerCta),
                  static_cast<unsigned>(p.shape.batch * p.shape.kv_heads));
  estimate_pattern_pass2_kernel<kHeadDim, kMTiles, kWgmma>
      <<<grid, kThreads, smem, stream>>>(p, chunks, static_cast<int>(q_tiles));
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

std::string estimate_kernel_unavailable(EstimateKernel kernel) {
  return kernel == EstimateKernel::wgmma ? sm90a_code_unavailable() : "";
}

namespace {

/// `kernel`, with automatic resolved; InputError when it cannot run here.
EstimateKernel resolve_estimate_kernel(EstimateKernel kernel) {
  require(kernel == EstimateKernel::automatic || kernel == EstimateKernel::mma_sync || kernel == EstimateKernel::wgmma,
          "unknown estimation kernel ", static_cast<int>(kernel));
  if (kernel == EstimateKernel::automatic) {
    return estimate_kernel_unavailable(EstimateKernel::wgmma).empty() ? EstimateKernel::wgmma
                                                                       : EstimateKernel::mma_sync;
  }
  if (const std::string why = estimate_kernel_unavailable(kernel); !why.empty()) {
    throw InputError("the wgmma estimation kernel cannot run here: " + why);
  }
  return kernel;
}

}  // namespace

void launch_estimate_pattern_pass1(const EstimateParams& params, cudaStream_t stream, EstimateKernel kernel) {
  check_estimate(params, false);
  kernel = resolve_estimate_kernel(kernel);
  if (params.shape.head_dim == 64) {
    launch_pass1_instance<64>(params, stream, kernel);
  } else {
    launch_pass1_instance<128>(params, stream, kernel);
  }
}

void launch_estimate_pattern_combine(int64_t rows, const float* shard_max, const float* shard_sum, float* row_max,
                                     float* row_sum, cudaStream_t stream) {
  require(rows >= 0, "rows = ", rows, " is negative");
  if (rows == 0) return;
  check_device_pointer(shard_max, 4, "shard_max");
  check_device_pointer(shard_sum, 4, "shard_sum");
  check_device_pointer(row_max, 4, "row_max");
  check_device_pointer(row_sum, 4, "row_sum");
  estimate_pattern_combine_kernel<<<static_cast<unsigned>((rows + 255) / 256), 256, 0, stream>>>(
      rows, shard_max, shard_sum, row_max, row_sum);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

void launch_estimate_pattern_pass2(const EstimateParams& params, cudaStream_t stream, EstimateKernel kernel) {
  check_estimate(params, true);
  const bool wgmma = resolve_estimate_kernel(kernel) == EstimateKernel::wgmma;
  if (params.shape.head_dim == 64) {
    wgmma ? launch_pass2_instance<64, kP2MTiles, true>(params, stream)
          : launch_pass2_instance<64, kP2MTiles, false>(params, stream);
  } else {
    wgmma ? launch_pass2_instance<128, kP2MTiles, true>(params, stream)
          : launch_pass2_instance<128, kP2MTiles, false>(params, stream);
  }
}

}  // namespace sparsering
