// Runs the CPU references the way the ring does: every rank, every ring step, index built for
// (rank, step), K/V of the step's source rank, forward outputs merged across steps and backward
// gradients summed across steps; tensors gathered from / scattered to global token order so the
// result can be compared with fp64 dense attention over global positions. Also the union of the
// pairs the indexes compute, as the predicate of that dense attention.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/index/build_sparse_index.hpp"
#include "kernels/reference/brute_force_mask.hpp"
#include "kernels/reference/dense_masked_attention_f64.hpp"
#include "kernels/reference/sparse_attn_bwd_ref.hpp"
#include "kernels/reference/sparse_attn_fwd_ref.hpp"
#include "kernel_test_support.hpp"

namespace sparsering::testing_support {

/// One attention problem over the whole sequence, in global token order.
struct RingProblem {
  TokenLayout layout;
  AttentionShape shape;  ///< q_len = kv_len = N
  int32_t block_q = 16;
  int32_t block_k = 16;
  float softmax_scale = 0.0f;
  std::vector<RowPattern> rows;  ///< B x Hq kept patterns
  std::vector<bf16_bits> q, k, v, dout;

  int64_t q_rows() const { return int64_t{shape.batch} * shape.q_heads; }
  int64_t kv_rows() const { return int64_t{shape.batch} * shape.kv_heads; }
  AttentionShape local_shape() const {
    AttentionShape local = shape;
    local.q_len = layout.local_len();
    local.kv_len = layout.local_len();
    return local;
  }
  SparseIndex index(int32_t q_rank, int32_t kv_rank) const {
    return build_sparse_index(IndexGeometry{RingPosition{layout, q_rank, kv_rank}, block_q, block_k}, rows);
  }
};

/// Random bf16 inputs for a problem (values in [-1, 1], q scaled so scores spread).
inline RingProblem random_problem(std::mt19937_64& rng, const TokenLayout& layout, AttentionShape shape,
                                  int32_t block_q, int32_t block_k) {
  RingProblem problem;
  problem.layout = layout;
  shape.q_len = layout.seq_len_tokens();
  shape.kv_len = layout.seq_len_tokens();
  problem.shape = shape;
  problem.block_q = block_q;
  problem.block_k = block_k;
  problem.softmax_scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  const auto n = static_cast<size_t>(layout.seq_len_tokens());
  const auto dim = static_cast<size_t>(shape.head_dim);
  for (int64_t r = 0; r < problem.q_rows(); ++r) problem.rows.push_back(random_row_pattern(rng, layout.seq_len_tokens()));
  problem.q = random_bf16(rng, static_cast<size_t>(problem.q_rows()) * n * dim, 2.0f);
  problem.k = random_bf16(rng, static_cast<size_t>(problem.kv_rows()) * n * dim, 1.0f);
  problem.v = random_bf16(rng, static_cast<size_t>(problem.kv_rows()) * n * dim, 1.0f);
  problem.dout = random_bf16(rng, static_cast<size_t>(problem.q_rows()) * n * dim, 1.0f);
  return problem;
}

struct RingForward {
  std::vector<float> out;  ///< (B, Hq, N, D) global order
  std::vector<float> lse;  ///< (B, Hq, N)
};

/// Every rank runs W steps of sparse_attn_fwd_ref, merging into its running output.
inline RingForward run_forward(const RingProblem& p) {
  const int32_t w = p.layout.ranks();
  const int64_t dim = p.shape.head_dim;
  const int64_t local = p.layout.local_len();
  RingForward result;
  result.out.assign(static_cast<size_t>(p.q_rows() * p.layout.seq_len_tokens() * dim), 0.0f);
  result.lse.assign(static_cast<size_t>(p.q_rows() * p.layout.seq_len_tokens()), 0.0f);
  for (int32_t rank = 0; rank < w; ++rank) {
    const std::vector<bf16_bits> q = to_local(p.q, p.layout, rank, p.q_rows(), dim);
    std::vector<float> out(static_cast<size_t>(p.q_rows() * local * dim), 0.0f);
    std::vector<float> lse(static_cast<size_t>(p.q_rows() * local), -std::numeric_limits<float>::infinity());
    for (int32_t step = 0; step < w; ++step) {
      const int32_t source = kv_source_rank(rank, step, w);
      const SparseIndex index = p.index(rank, source);
      const std::vector<bf16_bits> k = to_local(p.k, p.layout, source, p.kv_rows(), dim);
      const std::vector<bf16_bits> v = to_local(p.v, p.layout, source, p.kv_rows(), dim);
      SparseAttnFwdParams params;
      params.shape = p.local_shape();
      params.position = RingPosition{p.layout, rank, source};
      params.index = host_view(index);
      params.softmax_scale = p.softmax_scale;
      params.q = q.data();
      params.k = k.data();
      params.v = v.data();
      params.out = out.data();
      params.lse = lse.data();
      sparse_attn_fwd_ref(params);
    }
    from_local(result.out, out, p.layout, rank, p.q_rows(), dim);
    from_local(result.lse, lse, p.layout, rank, p.q_rows(), 1);
  }
  return result;
}

struct RingBackward {
  std::vector<float> dq;  ///< (B, Hq, N, D) global order
  std::vector<float> dk;  ///< (B, Hkv, N, D)
  std::vector<float> dv;
};

/// Every rank computes delta once, then W steps of sparse_attn_bwd_ref; dK / dV of each chunk are
/// summed over the ranks that held it (what the dK/dV ring delivers to the owner).
inline RingBackward run_backward(const RingProblem& p, const RingForward& forward) {
  const int32_t w = p.layout.ranks();
  const int64_t dim = p.shape.head_dim;
  const int64_t local = p.layout.local_len();
  std::vector<std::vector<float>> dk_by_rank(static_cast<size_t>(w)), dv_by_rank(static_cast<size_t>(w));
  for (int32_t r = 0; r < w; ++r) {
    dk_by_rank[static_cast<size_t>(r)].assign(static_cast<size_t>(p.kv_rows() * local * dim), 0.0f);
    dv_by_rank[static_cast<size_t>(r)].assign(static_cast<size_t>(p.kv_rows() * local * dim), 0.0f);
  }
  RingBackward result;
  result.dq.assign(static_cast<size_t>(p.q_rows() * p.layout.seq_len_tokens() * dim), 0.0f);
  for (int32_t rank = 0; rank < w; ++rank) {
    const std::vector<bf16_bits> q = to_local(p.q, p.layout, rank, p.q_rows(), dim);
    const std::vector<bf16_bits> dout = to_local(p.dout, p.layout, rank, p.q_rows(), dim);
    const std::vector<float> out = to_local(forward.out, p.layout, rank, p.q_rows(), dim);
    const std::vector<float> lse = to_local(forward.lse, p.layout, rank, p.q_rows(), 1);
    std::vector<float> delta(static_cast<size_t>(p.q_rows() * local));
    AttnBwdDeltaParams delta_params;
    delta_params.shape = p.local_shape();
    delta_params.dout = dout.data();
    delta_params.out = out.data();
    delta_params.delta = delta.data();
    attn_bwd_delta_ref(delta_params);
    std::vector<float> dq(static_cast<size_t>(p.q_rows() * local * dim), 0.0f);
    for (int32_t step = 0; step < w; ++step) {
      const int32_t source = kv_source_rank(rank, step, w);
      const SparseIndex index = p.index(rank, source);
      const std::vector<bf16_bits> k = to_local(p.k, p.layout, source, p.kv_rows(), dim);
      const std::vector<bf16_bits> v = to_local(p.v, p.layout, source, p.kv_rows(), dim);
      SparseAttnBwdParams params;
      params.shape = p.local_shape();
      params.position = RingPosition{p.layout, rank, source};
      params.index = host_view(index);
      params.softmax_scale = p.softmax_scale;
      params.q = q.data();
      params.k = k.data();
      params.v = v.data();
      params.dout = dout.data();
      params.lse = lse.data();
      params.delta = delta.data();
      params.dq = dq.data();
      params.dk = dk_by_rank[static_cast<size_t>(source)].data();
      params.dv = dv_by_rank[static_cast<size_t>(source)].data();
      sparse_attn_bwd_ref(params);
    }
    from_local(result.dq, dq, p.layout, rank, p.q_rows(), dim);
  }
  result.dk.assign(static_cast<size_t>(p.kv_rows() * p.layout.seq_len_tokens() * dim), 0.0f);
  result.dv.assign(result.dk.size(), 0.0f);
  for (int32_t r = 0; r < w; ++r) {
    from_local(result.dk, dk_by_rank[static_cast<size_t>(r)], p.layout, r, p.kv_rows(), dim);
    from_local(result.dv, dv_by_rank[static_cast<size_t>(r)], p.layout, r, p.kv_rows(), dim);
  }
  return result;
}

/// allowed[(row * N + q) * N + k] over global positions: the union over ranks and steps of the
/// pairs the indexes make the kernel compute.
inline std::vector<uint8_t> union_of_index_pairs(const RingProblem& p) {
  const int64_t n = p.layout.seq_len_tokens();
  const int64_t local = p.layout.local_len();
  std::vector<uint8_t> allowed(static_cast<size_t>(p.q_rows() * n * n), 0);
  for (int32_t rank = 0; rank < p.layout.ranks(); ++rank) {
    for (int32_t source = 0; source < p.layout.ranks(); ++source) {
      const SparseIndex index = p.index(rank, source);
      const RingPosition position{p.layout, rank, source};
      for (int32_t row = 0; row < index.rows; ++row) {
        const std::vector<uint8_t> pairs = index_pair_mask(index, position, row);
        for (int64_t q = 0; q < local; ++q) {
          for (int64_t k = 0; k < local; ++k) {
            if (pairs[static_cast<size_t>(q * local + k)] == 0) continue;
            const int64_t gq = p.layout.global_token(rank, q);
            const int64_t gk = p.layout.global_token(source, k);
            allowed[static_cast<size_t>((row * n + gq) * n + gk)] = 1;
          }
        }
      }
    }
  }
  return allowed;
}

/// A predicate reading a (rows, N, N) 0/1 table (the table must outlive the predicate).
inline PairPredicate table_predicate(const std::vector<uint8_t>& allowed, int64_t n) {
  return [&allowed, n](int32_t row, int64_t q, int64_t k) {
    return allowed[static_cast<size_t>((int64_t{row} * n + q) * n + k)] != 0;
  };
}

}  // namespace sparsering::testing_support
