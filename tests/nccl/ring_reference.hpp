// The single-GPU oracle of the ring runtime tests: the same kernels launched once over the whole
// sequence (W = 1, contiguous) on the same inputs (regenerated on the host from the seed with
// ring_input_bits) and the same kept sets, plus the comparison of a distributed run against it
// (each rank's outputs mapped back to global tokens through the plan's layout).
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cuda/attn_bwd_delta.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/sparse_attn_bwd.hpp"
#include "kernels/cuda/sparse_attn_fwd.hpp"
#include "kernels/cuda/sparse_index_build.hpp"
#include "kernels/nccl/ring_attention_layer.hpp"
#include "kernels/ring/ring_input_values.hpp"
#include "kernels/ring/ring_topology.hpp"

namespace sparsering::ring_testing {

inline int gpu_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

/// Outputs over the whole sequence (global token order), W = 1.
struct ReferenceOutputs {
  std::vector<float> out, lse, dq, dk, dv;
};

/// Host tensor (B, H, N, D) of `tensor` for every global token.
inline std::vector<bf16_bits> host_inputs(uint64_t seed, uint32_t tensor, int32_t batch, int32_t heads, int64_t n,
                                          int32_t head_dim) {
  std::vector<bf16_bits> values(static_cast<size_t>(int64_t{batch} * heads * n * head_dim));
  size_t e = 0;
  for (int32_t b = 0; b < batch; ++b) {
    for (int32_t h = 0; h < heads; ++h) {
      for (int64_t t = 0; t < n; ++t) {
        for (int32_t d = 0; d < head_dim; ++d) values[e++] = ring_input_bits(seed, tensor, b, h, t, d);
      }
    }
  }
  return values;
}

/// Kept sets of a dense problem: every slash offset.
inline KeptSet dense_kept(int32_t rows, int64_t n) { return KeptSet::dense(rows, n); }

/// Runs the layer's kernels once over the whole sequence on device 0.
inline ReferenceOutputs single_gpu_reference(const RingLayerProblem& problem, const KeptSet& kept) {
  SPARSERING_CUDA_CHECK(cudaSetDevice(0));
  const int64_t n = problem.layout.seq_len_tokens();
  AttentionShape shape = problem.shape;
  shape.q_len = n;
  shape.kv_len = n;
  const int32_t rows = shape.batch * shape.q_heads;
  const TokenLayout whole = make_token_layout(LayoutKind::contiguous, n, 1);
  const float scale = problem.softmax_scale > 0.0f ? problem.softmax_scale
                                                   : 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  CudaStream stream;
  DeviceBuffer<bf16_bits> q(host_inputs(problem.seed, 0, shape.batch, shape.q_heads, n, shape.head_dim));
  DeviceBuffer<bf16_bits> k(host_inputs(problem.seed, 1, shape.batch, shape.kv_heads, n, shape.head_dim));
  DeviceBuffer<bf16_bits> v(host_inputs(problem.seed, 2, shape.batch, shape.kv_heads, n, shape.head_dim));
  DeviceBuffer<bf16_bits> dout(host_inputs(problem.seed, 3, shape.batch, shape.q_heads, n, shape.head_dim));
  const PaddedKeptSet padded = kept.padded();
  DeviceBuffer<int32_t> vc_d(padded.vertical_count), vk_d(padded.vertical_keys), sc_d(padded.slash_count),
      so_d(padded.slash_offsets);
  const KeptSetsView view{rows, padded.capacity, vc_d.data(), vk_d.data(), sc_d.data(), so_d.data()};
  const DeviceSparseIndex index =
      launch_build_sparse_index(view, RingPosition{whole, 0, 0}, problem.block_q, problem.block_k, stream.get());
  const auto qe = static_cast<size_t>(int64_t{rows} * n * shape.head_dim);
  const auto kve = static_cast<size_t>(int64_t{shape.batch} * shape.kv_heads * n * shape.head_dim);
  DeviceBuffer<float> out(qe), lse(static_cast<size_t>(int64_t{rows} * n)), delta(lse.size()), dq(qe), dk(kve), dv(kve);
  out.fill_bytes(0);
  dq.fill_bytes(0);
  dk.fill_bytes(0);
  dv.fill_bytes(0);
  lse.upload(std::vector<float>(lse.size(), -std::numeric_limits<float>::infinity()));
  SparseAttnFwdParams fp;
  fp.shape = shape;
  fp.position = RingPosition{whole, 0, 0};
  fp.index = index.view();
  fp.softmax_scale = scale;
  fp.q = q.data();
  fp.k = k.data();
  fp.v = v.data();
  fp.out = out.data();
  fp.lse = lse.data();
  launch_sparse_attn_fwd(fp, stream.get());
  ReferenceOutputs ref;
  if (problem.backward) {
    AttnBwdDeltaParams dp;
    dp.shape = shape;
    dp.dout = dout.data();
    dp.out = out.data();
    dp.delta = delta.data();
    launch_attn_bwd_delta(dp, stream.get());
    SparseAttnBwdParams bp;
    bp.shape = shape;
    bp.position = fp.position;
    bp.index = fp.index;
    bp.softmax_scale = scale;
    bp.q = q.data();
    bp.k = k.data();
    bp.v = v.data();
    bp.dout = dout.data();
    bp.lse = lse.data();
    bp.delta = delta.data();
    bp.dq = dq.data();
    bp.dk = dk.data();
    bp.dv = dv.data();
    launch_sparse_attn_bwd(bp, stream.get());
  }
  stream.synchronize();
  ref.out = out.download();
  ref.lse = lse.download();
  if (problem.backward) {
    ref.dq = dq.download();
    ref.dk = dk.download();
    ref.dv = dv.download();
  }
  return ref;
}

/// Error of a distributed tensor against the reference.
struct Comparison {
  double max_abs = 0.0;
  double max_ref = 0.0;
  double rel_l2 = 0.0;
  size_t non_finite = 0;
};

/// Compares the per-rank tensors (heads x local tokens x width, plan layout) with the
/// reference (heads x N x width, global order).
inline Comparison compare(const RingLayerProblem& problem, const RingLayerMeasurement& m, int32_t heads,
                          int32_t width, const std::vector<float> RingRankOutputs::*field,
                          const std::vector<float>& reference) {
  const RingTopology topo(problem.level_sizes, problem.ring_order, problem.layout.ranks());
  const int64_t n = problem.layout.seq_len_tokens();
  const int64_t local = problem.layout.local_len();
  const int32_t bh = problem.shape.batch * heads;
  Comparison c;
  double diff2 = 0.0;
  double ref2 = 0.0;
  for (int32_t g = 0; g < problem.layout.ranks(); ++g) {
    const int32_t p = topo.ring_rank(GlobalRank(g)).value();
    const std::vector<float>& got = m.outputs[static_cast<size_t>(g)].*field;
    EXPECT_EQ(got.size(), static_cast<size_t>(int64_t{bh} * local * width)) << "rank " << g;
    if (got.size() != static_cast<size_t>(int64_t{bh} * local * width)) return c;
    for (int32_t r = 0; r < bh; ++r) {
      for (int64_t i = 0; i < local; ++i) {
        const int64_t global = problem.layout.global_token(p, i);
        for (int32_t d = 0; d < width; ++d) {
          const double a = got[static_cast<size_t>((int64_t{r} * local + i) * width + d)];
          const double e = reference[static_cast<size_t>((int64_t{r} * n + global) * width + d)];
          if (!std::isfinite(a)) {
            ++c.non_finite;
            continue;
          }
          c.max_abs = std::max(c.max_abs, std::abs(a - e));
          c.max_ref = std::max(c.max_ref, std::abs(e));
          diff2 += (a - e) * (a - e);
          ref2 += e * e;
        }
      }
    }
  }
  c.rel_l2 = ref2 > 0.0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  return c;
}

inline std::string describe(const Comparison& c) {
  return "max_abs " + std::to_string(c.max_abs) + " max_ref " + std::to_string(c.max_ref) + " rel_l2 " +
         std::to_string(c.rel_l2) + " non_finite " + std::to_string(c.non_finite);
}

}  // namespace sparsering::ring_testing
