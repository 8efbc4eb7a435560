// Replay measurement (see replay_compute_matrix.hpp). Inputs are hashed bf16 values in [-1, 1)
// written on the device (their values do not change which tiles run, only the numbers); the
// running output starts at (0, -inf) for each position, as in the ring. Each launch is timed by
// GpuTimer under kKernelTimingL2 (kernels/cuda/gpu_timer.hpp: L2 flushed before every timed
// repeat), the policy the calibration fitted the cost model under.
#include "measure/replay/replay_compute_matrix.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/error.hpp"
#include "kernels/cuda/attn_bwd_delta.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/gpu_timer.hpp"
#include "kernels/cuda/sparse_attn_bwd.hpp"
#include "kernels/cuda/sparse_attn_fwd.hpp"
#include "kernels/cuda/sparse_index_build.hpp"
#include "core/ring_schedule.hpp"

namespace sparsering {
namespace {

constexpr int kFillThreads = 256;

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

/// bf16 values in [-1, 1) from (seed, index).
__global__ void fill_bf16_kernel(bf16_bits* data, int64_t count, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t bits = mix64(seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(i));
    const float value = static_cast<float>(bits >> 40) * (1.0f / 8388608.0f) - 1.0f;  // 24 bits -> [-1, 1)
    data[i] = static_cast<bf16_bits>(__float_as_uint(value) >> 16);
  }
}

__global__ void fill_f32_kernel(float* data, int64_t count, float value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    data[i] = value;
  }
}

unsigned grid_for(size_t count) {
  const size_t blocks = (count + kFillThreads - 1) / kFillThreads;
  return static_cast<unsigned>(std::clamp<size_t>(blocks, 1, 65535));
}

void fill_bf16(DeviceBuffer<bf16_bits>& buffer, uint64_t seed, cudaStream_t stream) {
  fill_bf16_kernel<<<grid_for(buffer.size()), kFillThreads, 0, stream>>>(buffer.data(),
                                                                        static_cast<int64_t>(buffer.size()), seed);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

void fill_f32(DeviceBuffer<float>& buffer, float value, cudaStream_t stream) {
  fill_f32_kernel<<<grid_for(buffer.size()), kFillThreads, 0, stream>>>(buffer.data(),
                                                                       static_cast<int64_t>(buffer.size()), value);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

/// Vertical chunks of an index: sum over lists of ceil(columns / block_k).
int64_t column_chunks_of(const DeviceSparseIndex& index) {
  if (index.columns == 0) return 0;
  const std::vector<int32_t> offsets = index.column_offsets.download();
  int64_t chunks = 0;
  for (size_t k = 0; k + 1 < offsets.size(); ++k) {
    const int64_t columns = offsets[k + 1] - offsets[k];
    chunks += (columns + index.block_k - 1) / index.block_k;
  }
  return chunks;
}

}  // namespace

MeasuredLayer measure_replay(const ValidationProblem& problem, const ReplayOptions& options) {
  require(options.iterations >= 1, "--iterations must be >= 1, got ", options.iterations);
  require(options.warmup >= 0, "replay warm-up must be >= 0, got ", options.warmup);
  int device_count = 0;
  SPARSERING_CUDA_CHECK(cudaGetDeviceCount(&device_count));
  require(options.device >= 0 && options.device < device_count, "CUDA device ", options.device,
          " does not exist (", device_count, " present)");
  SPARSERING_CUDA_CHECK(cudaSetDevice(options.device));

  const RingSchedule schedule(problem.level_sizes);
  const int32_t w = problem.ranks();
  require(schedule.ranks() == w, "ring levels multiply to ", schedule.ranks(), ", the layout has ", w, " ranks");
  const AttentionShape& shape = problem.shape;
  const auto q_count = static_cast<size_t>(shape.batch) * static_cast<size_t>(shape.q_heads) *
                       static_cast<size_t>(shape.q_len) * static_cast<size_t>(shape.head_dim);
  const auto kv_count = static_cast<size_t>(shape.batch) * static_cast<size_t>(shape.kv_heads) *
                        static_cast<size_t>(shape.kv_len) * static_cast<size_t>(shape.head_dim);
  const auto row_count = static_cast<size_t>(shape.batch) * static_cast<size_t>(shape.q_heads) *
                         static_cast<size_t>(shape.q_len);

  require(problem.kept.rows() == problem.row_count() && problem.kept.seq_len_tokens() == problem.layout.seq_len_tokens(),
          "the problem's kept set has ", problem.kept.rows(), " rows over ", problem.kept.seq_len_tokens(),
          " tokens, expected ", problem.row_count(), " over ", problem.layout.seq_len_tokens());
  // Kept sets on the device, once.
  const PaddedKeptSet padded = problem.kept.padded();
  DeviceBuffer<int32_t> vertical_count(padded.vertical_count);
  DeviceBuffer<int32_t> vertical_keys(padded.vertical_keys);
  DeviceBuffer<int32_t> slash_count(padded.slash_count);
  DeviceBuffer<int32_t> slash_offsets(padded.slash_offsets);
  KeptSetsView kept;
  kept.rows = padded.rows;
  kept.capacity = padded.capacity;
  kept.vertical_count = vertical_count.data();
  kept.vertical_keys = vertical_keys.data();
  kept.slash_count = slash_count.data();
  kept.slash_offsets = slash_offsets.data();

  CudaStream stream;
  DeviceBuffer<bf16_bits> q(q_count);    // (B, Hq, S, D)
  DeviceBuffer<bf16_bits> k(kv_count);   // (B, Hkv, S, D)
  DeviceBuffer<bf16_bits> v(kv_count);   // (B, Hkv, S, D)
  DeviceBuffer<bf16_bits> dout(q_count); // (B, Hq, S, D)
  DeviceBuffer<float> out(q_count);      // (B, Hq, S, D)
  DeviceBuffer<float> lse(row_count);    // (B, Hq, S)
  DeviceBuffer<float> delta(row_count);  // (B, Hq, S)
  DeviceBuffer<float> dq(q_count);       // (B, Hq, S, D)
  DeviceBuffer<float> dk(kv_count);      // (B, Hkv, S, D)
  DeviceBuffer<float> dv(kv_count);      // (B, Hkv, S, D)
  fill_bf16(q, options.seed * 4 + 0, stream.get());
  fill_bf16(k, options.seed * 4 + 1, stream.get());
  fill_bf16(v, options.seed * 4 + 2, stream.get());
  fill_bf16(dout, options.seed * 4 + 3, stream.get());
  GpuTimer timer(kKernelTimingL2, stream.get());

  MeasuredLayer measured;
  measured.mode = "replay";
  measured.ranks = w;
  measured.iterations = options.iterations;
  const size_t cells = static_cast<size_t>(w) * static_cast<size_t>(w);
  measured.forward.compute_us.assign(cells, 0.0);
  measured.backward.compute_us.assign(cells, 0.0);
  measured.forward.sm_clock_mhz.assign(cells, 0.0);
  measured.backward.sm_clock_mhz.assign(cells, 0.0);
  const auto record = [&](MeasuredPass& pass, int32_t p, int32_t t, const GpuTiming& timing) {
    const size_t k = static_cast<size_t>(p) * static_cast<size_t>(w) + static_cast<size_t>(t);
    pass.compute_us[k] = timing.median_us;
    pass.sm_clock_mhz[k] = timing.sm_clock_mhz;
  };

  for (int32_t p = 0; p < w; ++p) {
    fill_f32(out, 0.0f, stream.get());
    fill_f32(lse, -std::numeric_limits<float>::infinity(), stream.get());
    fill_f32(dq, 0.0f, stream.get());
    fill_f32(dk, 0.0f, stream.get());
    fill_f32(dv, 0.0f, stream.get());
    std::vector<DeviceSparseIndex> indices;
    std::vector<RingPosition> positions;
    for (int32_t t = 0; t < w; ++t) {
      RingPosition position{problem.layout, p, schedule.source(p, t)};
      indices.push_back(launch_build_sparse_index(kept, position, problem.block_q, problem.block_k, stream.get()));
      positions.push_back(position);
      measured.tiles += indices.back().tiles;
      measured.column_chunks += column_chunks_of(indices.back());
    }
    for (int32_t t = 0; t < w; ++t) {
      const DeviceSparseIndex& index = indices[static_cast<size_t>(t)];
      if (index.tiles == 0 && index.columns == 0) continue;
      SparseAttnFwdParams params;
      params.shape = shape;
      params.position = positions[static_cast<size_t>(t)];
      params.index = index.view();
      params.softmax_scale = problem.softmax_scale;
      params.q = q.data();
      params.k = k.data();
      params.v = v.data();
      params.out = out.data();
      params.lse = lse.data();
      record(measured.forward, p, t,
             timer.time([&] { launch_sparse_attn_fwd(params, stream.get()); }, options.warmup, options.iterations));
    }
    AttnBwdDeltaParams delta_params;
    delta_params.shape = shape;
    delta_params.dout = dout.data();
    delta_params.out = out.data();
    delta_params.delta = delta.data();
    launch_attn_bwd_delta(delta_params, stream.get());
    for (int32_t t = 0; t < w; ++t) {
      const DeviceSparseIndex& index = indices[static_cast<size_t>(t)];
      if (index.tiles == 0 && index.columns == 0) continue;
      SparseAttnBwdParams params;
      params.shape = shape;
      params.position = positions[static_cast<size_t>(t)];
      params.index = index.view();
      params.softmax_scale = problem.softmax_scale;
      params.q = q.data();
      params.k = k.data();
      params.v = v.data();
      params.dout = dout.data();
      params.lse = lse.data();
      params.delta = delta.data();
      params.dq = dq.data();
      params.dk = dk.data();
      params.dv = dv.data();
      record(measured.backward, p, t,
             timer.time([&] { launch_sparse_attn_bwd(params, stream.get()); }, options.warmup, options.iterations));
    }
    stream.synchronize();
  }
  return measured;
}

}  // namespace sparsering
