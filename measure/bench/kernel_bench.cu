// Buffers are allocated once for the largest case and reused; values are hashed from the element
// index (bf16 in [-1, 1)), so every run sees the same data. The forward runs once untimed so the
// backward starts from a real LSE and delta. Each launch is timed by GpuTimer under
// kKernelTimingL2 (kernels/cuda/gpu_timer.hpp: L2 flushed before every timed repeat), the policy
// the replay validation times the same kernels under.
#include "measure/bench/kernel_bench.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "common/error.hpp"
#include "kernels/attention_params.hpp"
#include "kernels/index/count_sparse_index.hpp"
#include "measure/calibration/kernel_calibration.hpp"
#include "measure/calibration/synthetic_index.hpp"
#include "kernels/cuda/attn_bwd_delta.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/gpu_timer.hpp"
#include "kernels/cuda/sparse_attn_bwd.hpp"
#include "kernels/cuda/sparse_attn_bwd_sm90.hpp"
#include "kernels/cuda/sparse_attn_fwd.hpp"
#include "kernels/cuda/sparse_index_transpose.hpp"

namespace sparsering {
namespace {

__global__ void fill_bf16_kernel(bf16_bits* data, size_t count, uint32_t salt) {
  for (size_t k = blockIdx.x * size_t{blockDim.x} + threadIdx.x; k < count; k += size_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(k) * 2654435761u ^ salt;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    const float value = static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
    data[k] = static_cast<bf16_bits>(__float_as_uint(value) >> 16);
  }
}

__global__ void fill_float_kernel(float* data, size_t count, float value) {
  for (size_t k = blockIdx.x * size_t{blockDim.x} + threadIdx.x; k < count; k += size_t{gridDim.x} * blockDim.x) {
    data[k] = value;
  }
}

void fill_bf16(DeviceBuffer<bf16_bits>& buffer, uint32_t salt) {
  fill_bf16_kernel<<<1024, 256>>>(buffer.data(), buffer.size(), salt);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

void fill_float(DeviceBuffer<float>& buffer, float value) {
  fill_float_kernel<<<1024, 256>>>(buffer.data(), buffer.size(), value);
  SPARSERING_CUDA_CHECK(cudaGetLastError());
}

/// The device copy of one synthetic index.
struct DeviceIndex {
  DeviceBuffer<int32_t> tile_offsets;
  DeviceBuffer<int32_t> tile_block;
  DeviceBuffer<uint8_t> tile_masked;
  DeviceBuffer<int32_t> column_offsets;
  DeviceBuffer<int32_t> column_index;
  SparseIndexView view;

  explicit DeviceIndex(const SparseIndex& index)
      : tile_offsets(index.tile_offsets), tile_block(index.tile_block), tile_masked(index.tile_masked),
        column_offsets(index.column_offsets), column_index(index.column_index) {
    view.rows = index.rows;
    view.block_q = index.block_q;
    view.block_k = index.block_k;
    view.q_blocks = index.q_blocks;
    view.tile_offsets = tile_offsets.data();
    view.tile_block = tile_block.data();
    view.tile_masked = tile_masked.data();
    view.column_offsets = column_offsets.data();
    view.column_index = column_index.data();
    view.max_tiles = std::max<int64_t>(1, index.tiles());
  }
};

}  // namespace

std::vector<KernelMeasurement> run_kernel_benchmarks(const std::vector<KernelBenchCase>& cases,
                                                     const KernelBenchOptions& options,
                                                     const std::function<void(const std::string&)>& progress) {
  require(options.repeats >= 1 && options.warmup >= 0, "kernel benchmark needs repeats >= 1 and warmup >= 0");
  SPARSERING_CUDA_CHECK(cudaSetDevice(options.device));
  cudaDeviceProp prop{};
  SPARSERING_CUDA_CHECK(cudaGetDeviceProperties(&prop, options.device));

  size_t q_elems = 0;
  size_t kv_elems = 0;
  size_t rows = 0;
  for (const KernelBenchCase& c : cases) {
    require(c.q_heads >= 1 && c.kv_heads >= 1 && c.q_heads % c.kv_heads == 0, "kernel case with ", c.q_heads,
            " query heads and ", c.kv_heads, " KV heads");
    const auto head_dim = static_cast<size_t>(c.shape.head_dim);
    q_elems = std::max(q_elems, static_cast<size_t>(c.q_heads) * static_cast<size_t>(c.local_tokens) * head_dim);
    kv_elems = std::max(kv_elems, static_cast<size_t>(c.kv_heads) * static_cast<size_t>(c.local_tokens) * head_dim);
    rows = std::max(rows, static_cast<size_t>(c.q_heads) * static_cast<size_t>(c.local_tokens));
  }
  std::vector<KernelMeasurement> results;
  if (cases.empty()) return results;
  DeviceBuffer<bf16_bits> q(q_elems), k(kv_elems), v(kv_elems), dout(q_elems);
  DeviceBuffer<float> out(q_elems), dq(q_elems), dk(kv_elems), dv(kv_elems), lse(rows), delta(rows);
  GpuTimer timer(kKernelTimingL2, nullptr);  // the launches below go to the legacy default stream
  fill_bf16(q, 1u);
  fill_bf16(k, 2u);
  fill_bf16(v, 3u);
  fill_bf16(dout, 4u);
  fill_float(dq, 0.0f);
  fill_float(dk, 0.0f);
  fill_float(dv, 0.0f);

  for (size_t n = 0; n < cases.size(); ++n) {
    const KernelBenchCase& c = cases[n];
    SyntheticIndexSpec spec;
    spec.rows = c.q_heads;
    spec.q_len_tokens = c.local_tokens;
    spec.kv_len_tokens = c.local_tokens;
    spec.block_q = static_cast<int32_t>(c.shape.block_q);
    spec.block_k = static_cast<int32_t>(c.shape.block_k);
    spec.tiles_per_list = c.tiles_per_list;
    spec.chunks_per_list = c.chunks_per_list;
    spec.columns_per_list = c.columns_per_list;
    spec.seed = options.seed + n;
    spec.banded = options.banded;
    spec.key_block_stride = c.key_block_stride;
    const SparseIndex index = make_synthetic_index(spec);
    const DeviceIndex device_index(index);

    AttentionShape shape;
    shape.batch = 1;
    shape.q_heads = c.q_heads;
    shape.kv_heads = c.kv_heads;
    shape.head_dim = static_cast<int32_t>(c.shape.head_dim);
    shape.q_len = c.local_tokens;
    shape.kv_len = c.local_tokens;
    // An off-diagonal step: the queries' chunk (rank 1) lies wholly after the held keys (rank 0).
    RingPosition position;
    position.layout = make_token_layout(LayoutKind::contiguous, 2 * c.local_tokens, 2);
    position.q_rank = 1;
    position.kv_rank = 0;
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.shape.head_dim));

    SparseAttnFwdParams fwd;
    fwd.shape = shape;
    fwd.position = position;
    fwd.index = device_index.view;
    fwd.softmax_scale = scale;
    fwd.q = q.data();
    fwd.k = k.data();
    fwd.v = v.data();
    fwd.out = out.data();
    fwd.lse = lse.data();
    fill_float(out, 0.0f);
    fill_float(lse, -INFINITY);
    launch_sparse_attn_fwd(fwd, nullptr);  // a real LSE and output for the backward
    AttnBwdDeltaParams delta_params;
    delta_params.shape = shape;
    delta_params.dout = dout.data();
    delta_params.out = out.data();
    delta_params.delta = delta.data();
    launch_attn_bwd_delta(delta_params, nullptr);
    SPARSERING_CUDA_CHECK(cudaDeviceSynchronize());
    // The backward is timed first: the timed forwards keep merging into out and lse.
    SparseAttnBwdParams bwd;
    bwd.shape = shape;
    bwd.position = position;
    bwd.index = device_index.view;
    bwd.softmax_scale = scale;
    bwd.q = q.data();
    bwd.k = k.data();
    bwd.v = v.data();
    bwd.dout = dout.data();
    bwd.lse = lse.data();
    bwd.delta = delta.data();
    bwd.dq = dq.data();
    bwd.dk = dk.data();
    bwd.dv = dv.data();
    const GpuTiming backward =
        timer.time([&] { launch_sparse_attn_bwd(bwd, nullptr); }, options.warmup, options.repeats);
    const GpuTiming forward =
        timer.time([&] { launch_sparse_attn_fwd(fwd, nullptr); }, options.warmup, options.repeats);
    // The backward's key-block pass alone (its index transposition and the key-block kernel, as
    // launch_sparse_attn_bwd queues them), where the Hopper backward runs; the column pass is the
    // rest of the backward's time. The mma.sync passes have no entry point of their own.
    double key_pass_us = -1.0;
    if (select_backward_kernel(bwd) == BackwardKernel::wgmma) {
      key_pass_us = timer
                        .time(
                            [&] {
                              const TransposedIndex transposed = launch_sparse_index_transpose(bwd.index, bwd.shape, nullptr);
                              if (transposed.view.segments > 0) {
                                launch_sparse_attn_bwd_key_blocks_sm90(bwd, transposed.view, nullptr);
                              }
                            },
                            options.warmup, options.repeats)
                        .median_us;
    }

    KernelMeasurement m;
    m.q_heads = c.q_heads;
    m.kv_heads = c.kv_heads;
    m.local_tokens = c.local_tokens;
    m.block_q = spec.block_q;
    m.block_k = spec.block_k;
    m.head_dim = shape.head_dim;
    m.tiles_per_list = c.tiles_per_list;
    m.chunks_per_list = c.chunks_per_list;
    m.placement = options.banded ? "banded" : "random";
    m.key_block_stride = c.key_block_stride;
    m.lists = int64_t{index.rows} * index.q_blocks;
    m.tiles = index.tiles();
    m.column_chunks = index.column_chunks();
    m.columns_per_list = c.columns_per_list >= 0 ? c.columns_per_list : c.chunks_per_list * spec.block_k;
    const BackwardUnits units = backward_units(index, c.q_heads / c.kv_heads);
    m.key_lists = units.key_lists;
    m.column_lists = units.column_lists;
    m.column_items = units.column_items;
    m.columns = index.columns();
    m.longest_key_list = units.longest_key_list;
    m.repeats = options.repeats;
    for (const auto& [name, timing] : {std::pair<const char*, GpuTiming>{"forward", forward}, {"backward", backward}}) {
      m.direction = name;
      m.under_filled = launch_under_filled(m, prop.multiProcessorCount);
      m.median_us = timing.median_us;
      m.min_us = timing.min_us;
      m.max_us = timing.max_us;
      m.sm_clock_mhz = timing.sm_clock_mhz;
      m.key_pass_us = m.direction == "backward" ? key_pass_us : -1.0;
      results.push_back(m);
    }
    if (progress) {
      std::ostringstream line;
      line.precision(4);
      line << "kernel case " << (n + 1) << "/" << cases.size() << ": " << to_string(c.shape) << ", heads " << c.q_heads << "/" << c.kv_heads << ", "
           << c.local_tokens << " tokens, " << c.tiles_per_list << " tiles + " << c.chunks_per_list
           << " chunks per list" << (c.key_block_stride > 1 ? str(", every ", c.key_block_stride, " key block") : "")
           << ": fwd " << forward.median_us << " us, bwd " << backward.median_us << " us"
           << (key_pass_us >= 0.0 ? str(" (key-block pass ", key_pass_us, " us)") : "");
      progress(line.str());
    }
  }
  return results;
}

}  // namespace sparsering
