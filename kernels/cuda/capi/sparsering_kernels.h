/* C API of the sparsering CUDA kernels (libsparsering_kernels.so), for ctypes and for runtimes
 * that are not C++. Every tensor argument is a raw device pointer laid out as in
 * kernels/attention_params.hpp: Q (B, Hq, Sq, D) bf16, K and V (B, Hkv, Skv, D) bf16, fp32 out /
 * lse / gradients; `stream` is a cudaStream_t (0 = legacy default stream). Calls are
 * asynchronous on `stream`. Each returns SR_OK, SR_INPUT_ERROR (bad arguments; nothing was
 * queued) or SR_CUDA_ERROR; sr_last_error() gives the message of the calling thread's last
 * failure. Python binding: python/sparsering/capi.py. Tested through that binding in
 * kernels/bench/check_capi.py. */
#ifndef SPARSERING_KERNELS_H_
#define SPARSERING_KERNELS_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SR_OK 0
#define SR_CUDA_ERROR 1
#define SR_INPUT_ERROR 2

/* Layout kinds, as sparsering::LayoutKind. */
#define SR_LAYOUT_CONTIGUOUS 0
#define SR_LAYOUT_ZIGZAG 1
#define SR_LAYOUT_STRIPED 2

/* One ring step's attention problem: shape, token layout and ring position, and the sparse
 * index (kernels/sparse_index.hpp) as device arrays. */
typedef struct sr_attention_problem {
  int32_t batch, q_heads, kv_heads, head_dim;
  int64_t q_len, kv_len;           /* local query tokens; tokens of the held K/V chunk */
  int32_t layout_kind;             /* SR_LAYOUT_* */
  int32_t ring_ranks;              /* W */
  int64_t seq_len_tokens;          /* N */
  int64_t granularity_tokens;      /* striped stripe size G, else 0 */
  int32_t q_rank, kv_rank;         /* ring ranks owning the queries / the held K/V */
  float softmax_scale;             /* usually 1/sqrt(D) */
  int32_t block_q, block_k, q_blocks;
  const int32_t* tile_offsets;     /* (batch*q_heads*q_blocks + 1) */
  const int32_t* tile_block;       /* (tiles) */
  const uint8_t* tile_masked;      /* (tiles) */
  const int32_t* column_offsets;   /* (batch*q_heads*q_blocks + 1) */
  const int32_t* column_index;     /* (columns) */
  int64_t max_tiles;               /* entries tile_block holds (a bound on tiles): the backward then
                                    * never waits for the GPU; 0 = not known (it synchronizes once) */
} sr_attention_problem;

/* Forward of one ring step, merged into the running fp32 (out, lse). Start from out = 0,
 * lse = -inf. */
int sr_sparse_attn_fwd(const sr_attention_problem* problem, const void* q, const void* k, const void* v, float* out,
                       float* lse, void* stream);

/* delta[t] = sum_d dout[t, d] * out[t, d] over tokens = B*Hq*Sq rows of head_dim. */
int sr_attn_bwd_delta(int64_t tokens, int32_t head_dim, const void* dout, const float* out, float* delta,
                      void* stream);

/* Backward of one ring step: dq, dk, dv += (fp32). lse and delta are the final forward ones. */
int sr_sparse_attn_bwd(const sr_attention_problem* problem, const void* q, const void* k, const void* v,
                       const void* dout, const float* lse, const float* delta, float* dq, float* dk, float* dv,
                       void* stream);

/* A sparse index in device memory, built on the GPU. */
typedef struct sr_index sr_index;

/* Single-rank pattern estimation and selection (the rank holds all N keys): the last `last_q`
 * queries q_last (B, Hq, last_q, D) score k (B, Hkv, N, D); per row the verticals and slashes
 * reaching `recall` of their mass (at most `capacity`) are written ascending into
 * vertical_keys / slash_offsets (B*Hq, capacity), -1 past each row's count, with their counts
 * (B*Hq): every element is written, so outputs can be reused without a fill. Asynchronous. */
int sr_estimate_select(int32_t batch, int32_t q_heads, int32_t kv_heads, int32_t head_dim, int64_t seq_len,
                       int32_t last_q, float softmax_scale, const void* q_last, const void* k, double recall,
                       int32_t capacity, int32_t* vertical_count, int32_t* vertical_keys, int32_t* slash_count,
                       int32_t* slash_offsets, void* stream);

/* Index build of ring step (q_rank, kv_rank) from kept sets (global key positions and offsets,
 * ascending and unique per row, `capacity` slots per row; offset 0 is implied) for the layout
 * (layout_kind, ring_ranks, seq_len_tokens, granularity_tokens) with block_q x block_k tiles.
 * On success *index owns the result (sr_index_free). Synchronizes `stream` once. */
int sr_build_index(int32_t rows, int32_t capacity, const int32_t* vertical_count, const int32_t* vertical_keys,
                   const int32_t* slash_count, const int32_t* slash_offsets, int32_t layout_kind, int32_t ring_ranks,
                   int64_t seq_len_tokens, int64_t granularity_tokens, int32_t q_rank, int32_t kv_rank,
                   int32_t block_q, int32_t block_k, sr_index** index, void* stream);

/* An index for ring step (q_rank, kv_rank) of the layout with block_q x block_k tiles, sized by
 * the capacity bound of kept sets of `rows` rows with at most `capacity` entries each, so that
 * sr_build_index_into never runs out of room. Allocates device memory: allocate once, build many
 * times. Tiles and columns read -1 until a build's counts are read. */
int sr_index_allocate(int32_t rows, int32_t capacity, int32_t layout_kind, int32_t ring_ranks, int64_t seq_len_tokens,
                      int64_t granularity_tokens, int32_t q_rank, int32_t kv_rank, int32_t block_q, int32_t block_k,
                      sr_index** index);

/* sr_build_index's build into `index` (from sr_index_allocate for the same rows and geometry)
 * with no host synchronization (CUDA-graph capturable): the forward and backward can read the
 * index as soon as the build is queued. Tiles and columns read -1 until sr_index_read_counts. */
int sr_build_index_into(int32_t rows, int32_t capacity, const int32_t* vertical_count, const int32_t* vertical_keys,
                        const int32_t* slash_count, const int32_t* slash_offsets, int32_t layout_kind,
                        int32_t ring_ranks, int64_t seq_len_tokens, int64_t granularity_tokens, int32_t q_rank,
                        int32_t kv_rank, sr_index* index, void* stream);

/* Synchronizes `stream` and stores the last build's tile and column counts in `index`
 * (SR_INPUT_ERROR when they exceeded its capacity: that index must not be used). */
int sr_index_read_counts(sr_index* index, void* stream);

/* Points the index fields of `problem` (block_q, block_k, q_blocks, the five arrays and max_tiles)
 * at `index`. */
int sr_index_fill_problem(const sr_index* index, sr_attention_problem* problem);

/* Tiles and vertical columns of an index. */
int64_t sr_index_tiles(const sr_index* index);
int64_t sr_index_columns(const sr_index* index);

/* Frees an index from sr_build_index or sr_index_allocate (null is allowed). */
void sr_index_free(sr_index* index);

/* Message of the calling thread's last failed call ("" if none). Valid until its next call. */
const char* sr_last_error(void);

/* Library version string (the project version). */
const char* sr_version(void);

#ifdef __cplusplus
}
#endif

#endif /* SPARSERING_KERNELS_H_ */
