// The extern "C" API of libsparsering_kernels.so (declared in sparsering_kernels.h): converts
// the flat C structs into the C++ params structs, calls the launchers, and turns exceptions
// into return codes plus a thread-local message. No kernel code lives here.
// Tested through the ctypes binding in kernels/bench/check_capi.py.
#include "sparsering_kernels.h"

#include <exception>
#include <memory>
#include <string>

#include "common/error.hpp"
#include "kernels/cuda/attn_bwd_delta.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/pattern_pipeline.hpp"
#include "kernels/cuda/sparse_attn_bwd.hpp"
#include "kernels/cuda/sparse_attn_fwd.hpp"
#include "kernels/cuda/sparse_index_build.hpp"
#include "sparsering/version.hpp"

#define SR_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

thread_local std::string last_error;

/// Runs `body`, mapping InputError -> SR_INPUT_ERROR, anything else -> SR_CUDA_ERROR.
template <typename Body>
int guarded(Body body) {
  try {
    body();
    last_error.clear();
    return SR_OK;
  } catch (const sparsering::InputError& error) {
    last_error = error.what();
    return SR_INPUT_ERROR;
  } catch (const std::exception& error) {
    last_error = error.what();
    return SR_CUDA_ERROR;
  } catch (...) {
    last_error = "unknown error";
    return SR_CUDA_ERROR;
  }
}

sparsering::AttentionShape shape_of(const sr_attention_problem& p) {
  sparsering::AttentionShape shape;
  shape.batch = p.batch;
  shape.q_heads = p.q_heads;
  shape.kv_heads = p.kv_heads;
  shape.head_dim = p.head_dim;
  shape.q_len = p.q_len;
  shape.kv_len = p.kv_len;
  return shape;
}

sparsering::RingPosition layout_position(int32_t layout_kind, int32_t ring_ranks, int64_t seq_len_tokens,
                                         int64_t granularity_tokens, int32_t q_rank, int32_t kv_rank) {
  sparsering::require(layout_kind >= SR_LAYOUT_CONTIGUOUS && layout_kind <= SR_LAYOUT_STRIPED,
                      "layout_kind must be 0 (contiguous), 1 (zigzag) or 2 (striped), got ", layout_kind);
  sparsering::RingPosition position;
  // make_token_layout validates N, W and G (InputError on a bad combination).
  position.layout = sparsering::make_token_layout(static_cast<sparsering::LayoutKind>(layout_kind), seq_len_tokens,
                                                  ring_ranks, granularity_tokens);
  position.q_rank = q_rank;
  position.kv_rank = kv_rank;
  return position;
}

sparsering::RingPosition position_of(const sr_attention_problem& p) {
  return layout_position(p.layout_kind, p.ring_ranks, p.seq_len_tokens, p.granularity_tokens, p.q_rank, p.kv_rank);
}

sparsering::SparseIndexView index_of(const sr_attention_problem& p) {
  sparsering::SparseIndexView index;
  index.rows = p.batch * p.q_heads;
  index.block_q = p.block_q;
  index.block_k = p.block_k;
  index.q_blocks = p.q_blocks;
  index.tile_offsets = p.tile_offsets;
  index.tile_block = p.tile_block;
  index.tile_masked = p.tile_masked;
  index.column_offsets = p.column_offsets;
  index.column_index = p.column_index;
  index.max_tiles = p.max_tiles;
  return index;
}

const sr_attention_problem& checked(const sr_attention_problem* problem) {
  sparsering::require(problem != nullptr, "problem must not be null");
  return *problem;
}

}  // namespace

SR_EXPORT int sr_sparse_attn_fwd(const sr_attention_problem* problem, const void* q, const void* k, const void* v,
                                 float* out, float* lse, void* stream) {
  return guarded([&] {
    const sr_attention_problem& p = checked(problem);
    sparsering::SparseAttnFwdParams params;
    params.shape = shape_of(p);
    params.position = position_of(p);
    params.index = index_of(p);
    params.softmax_scale = p.softmax_scale;
    params.q = static_cast<const sparsering::bf16_bits*>(q);
    params.k = static_cast<const sparsering::bf16_bits*>(k);
    params.v = static_cast<const sparsering::bf16_bits*>(v);
    params.out = out;
    params.lse = lse;
    sparsering::launch_sparse_attn_fwd(params, static_cast<cudaStream_t>(stream));
  });
}

SR_EXPORT int sr_attn_bwd_delta(int64_t tokens, int32_t head_dim, const void* dout, const float* out, float* delta,
                                void* stream) {
  return guarded([&] {
    sparsering::require(tokens >= 0 && tokens < (int64_t{1} << 34), "tokens must be in [0, 2^34), got ", tokens);
    sparsering::AttnBwdDeltaParams params;
    params.shape.batch = 1;
    params.shape.q_heads = 1;
    params.shape.q_len = tokens;
    params.shape.head_dim = head_dim;
    params.dout = static_cast<const sparsering::bf16_bits*>(dout);
    params.out = out;
    params.delta = delta;
    sparsering::launch_attn_bwd_delta(params, static_cast<cudaStream_t>(stream));
  });
}

SR_EXPORT int sr_sparse_attn_bwd(const sr_attention_problem* problem, const void* q, const void* k, const void* v,
                                 const void* dout, const float* lse, const float* delta, float* dq, float* dk,
                                 float* dv, void* stream) {
  return guarded([&] {
    const sr_attention_problem& p = checked(problem);
    sparsering::SparseAttnBwdParams params;
    params.shape = shape_of(p);
    params.position = position_of(p);
    params.index = index_of(p);
    params.softmax_scale = p.softmax_scale;
    params.q = static_cast<const sparsering::bf16_bits*>(q);
    params.k = static_cast<const sparsering::bf16_bits*>(k);
    params.v = static_cast<const sparsering::bf16_bits*>(v);
    params.dout = static_cast<const sparsering::bf16_bits*>(dout);
    params.lse = lse;
    params.delta = delta;
    params.dq = dq;
    params.dk = dk;
    params.dv = dv;
    sparsering::launch_sparse_attn_bwd(params, static_cast<cudaStream_t>(stream));
  });
}

struct sr_index {
  sparsering::DeviceSparseIndex index;
};

SR_EXPORT int sr_estimate_select(int32_t batch, int32_t q_heads, int32_t kv_heads, int32_t head_dim, int64_t seq_len,
                                 int32_t last_q, float softmax_scale, const void* q_last, const void* k, double recall,
                                 int32_t capacity, int32_t* vertical_count, int32_t* vertical_keys,
                                 int32_t* slash_count, int32_t* slash_offsets, void* stream) {
  return guarded([&] {
    sparsering::PatternPipelineParams params;
    params.shape = sparsering::AttentionShape{batch, q_heads, kv_heads, head_dim, last_q, seq_len};
    params.softmax_scale = softmax_scale;
    params.q_last = static_cast<const sparsering::bf16_bits*>(q_last);
    params.k = static_cast<const sparsering::bf16_bits*>(k);
    params.recall = recall;
    params.capacity = capacity;
    sparsering::KeptSetsOutput out;
    out.vertical_count = vertical_count;
    out.vertical_keys = vertical_keys;
    out.slash_count = slash_count;
    out.slash_offsets = slash_offsets;
    for (const void* pointer : {static_cast<const void*>(vertical_count), static_cast<const void*>(vertical_keys),
                                static_cast<const void*>(slash_count), static_cast<const void*>(slash_offsets)}) {
      sparsering::require(pointer != nullptr, "kept-set output arrays must not be null");
    }
    sparsering::launch_single_rank_estimate_select(params, out, static_cast<cudaStream_t>(stream));
  });
}

SR_EXPORT int sr_build_index(int32_t rows, int32_t capacity, const int32_t* vertical_count,
                             const int32_t* vertical_keys, const int32_t* slash_count, const int32_t* slash_offsets,
                             int32_t layout_kind, int32_t ring_ranks, int64_t seq_len_tokens,
                             int64_t granularity_tokens, int32_t q_rank, int32_t kv_rank, int32_t block_q,
                             int32_t block_k, sr_index** index, void* stream) {
  return guarded([&] {
    sparsering::require(index != nullptr, "index must not be null");
    *index = nullptr;
    const sparsering::KeptSetsView kept{rows, capacity, vertical_count, vertical_keys, slash_count, slash_offsets};
    auto result = std::make_unique<sr_index>();
    result->index = sparsering::launch_build_sparse_index(
        kept, layout_position(layout_kind, ring_ranks, seq_len_tokens, granularity_tokens, q_rank, kv_rank), block_q,
        block_k, static_cast<cudaStream_t>(stream));
    *index = result.release();
  });
}

SR_EXPORT int sr_index_allocate(int32_t rows, int32_t capacity, int32_t layout_kind, int32_t ring_ranks,
                                int64_t seq_len_tokens, int64_t granularity_tokens, int32_t q_rank, int32_t kv_rank,
                                int32_t block_q, int32_t block_k, sr_index** index) {
  return guarded([&] {
    sparsering::require(index != nullptr, "index must not be null");
    *index = nullptr;
    sparsering::require(capacity >= 1, "capacity must be >= 1, got ", capacity);
    const sparsering::RingPosition position =
        layout_position(layout_kind, ring_ranks, seq_len_tokens, granularity_tokens, q_rank, kv_rank);
    const sparsering::SparseIndexCapacity bound =
        sparsering::sparse_index_capacity_bound(position, rows, block_q, block_k, capacity, capacity);
    auto result = std::make_unique<sr_index>();
    result->index = sparsering::allocate_sparse_index(position, rows, block_q, block_k, bound);
    *index = result.release();
  });
}

SR_EXPORT int sr_build_index_into(int32_t rows, int32_t capacity, const int32_t* vertical_count,
                                  const int32_t* vertical_keys, const int32_t* slash_count,
                                  const int32_t* slash_offsets, int32_t layout_kind, int32_t ring_ranks,
                                  int64_t seq_len_tokens, int64_t granularity_tokens, int32_t q_rank, int32_t kv_rank,
                                  sr_index* index, void* stream) {
  return guarded([&] {
    sparsering::require(index != nullptr, "index must not be null");
    const sparsering::KeptSetsView kept{rows, capacity, vertical_count, vertical_keys, slash_count, slash_offsets};
    sparsering::launch_build_sparse_index_into(
        kept, layout_position(layout_kind, ring_ranks, seq_len_tokens, granularity_tokens, q_rank, kv_rank),
        index->index, static_cast<cudaStream_t>(stream));
  });
}

SR_EXPORT int sr_index_read_counts(sr_index* index, void* stream) {
  return guarded([&] {
    sparsering::require(index != nullptr, "index must not be null");
    sparsering::read_sparse_index_counts(index->index, static_cast<cudaStream_t>(stream));
  });
}

SR_EXPORT int sr_index_fill_problem(const sr_index* index, sr_attention_problem* problem) {
  return guarded([&] {
    sparsering::require(index != nullptr && problem != nullptr, "index and problem must not be null");
    const sparsering::SparseIndexView view = index->index.view();
    problem->block_q = view.block_q;
    problem->block_k = view.block_k;
    problem->q_blocks = view.q_blocks;
    problem->tile_offsets = view.tile_offsets;
    problem->tile_block = view.tile_block;
    problem->tile_masked = view.tile_masked;
    problem->column_offsets = view.column_offsets;
    problem->column_index = view.column_index;
    problem->max_tiles = view.max_tiles;
  });
}

SR_EXPORT int64_t sr_index_tiles(const sr_index* index) { return index != nullptr ? index->index.tiles : 0; }

SR_EXPORT int64_t sr_index_columns(const sr_index* index) { return index != nullptr ? index->index.columns : 0; }

SR_EXPORT void sr_index_free(sr_index* index) { delete index; }

SR_EXPORT const char* sr_last_error(void) { return last_error.c_str(); }

SR_EXPORT const char* sr_version(void) { return sparsering::kVersion; }
