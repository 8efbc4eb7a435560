// The ring attention layer on real GPUs (kernels/nccl/ring_attention_layer.hpp). One host thread
// per rank; per rank one compute stream and, per ring level, one K/V stream and (backward) one
// accumulator stream, each with its own communicator, so the outer hop posted at the start of an
// outer step overlaps the whole inner ring. Streams are ordered by events only: the compute of
// step t waits for the arrival event of its chunk; a receive into a reused buffer waits for the
// compute and the forwards of the chunk it replaces (RingTopology::kv_buffer_plan). The host
// stays one step ahead and waits, bounded (NcclWorld), for the compute of the previous step, so
// a dead peer is named with its step.
#include "kernels/nccl/ring_attention_layer.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <thread>
#include <tuple>

#include "common/error.hpp"
#include "kernels/cuda/attn_bwd_delta.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/estimate_pattern.hpp"
#include "kernels/cuda/recall_select.hpp"
#include "kernels/cuda/sparse_attn_bwd.hpp"
#include "kernels/cuda/sparse_attn_fwd.hpp"
#include "kernels/cuda/sparse_index_build.hpp"
#include "kernels/nccl/nccl_check.hpp"
#include "kernels/nccl/nccl_id_mpi.hpp"
#include "kernels/nccl/nccl_world.hpp"
#include "kernels/nccl/ring_kernels.hpp"
#include "kernels/ring/ring_topology.hpp"

namespace sparsering {
namespace {

/// Sizes of one rank's tensors.
struct Geometry {
  int32_t ranks = 1;
  int64_t local_tokens = 0;  ///< n = N / W
  int32_t batch = 1;
  int32_t q_heads = 1;
  int32_t kv_heads = 1;
  int32_t head_dim = 128;
  int64_t q_elems() const { return int64_t{batch} * q_heads * local_tokens * head_dim; }
  int64_t kv_elems() const { return int64_t{batch} * kv_heads * local_tokens * head_dim; }
  int64_t lse_elems() const { return int64_t{batch} * q_heads * local_tokens; }
  int32_t rows() const { return batch * q_heads; }
};

/// Kept sets padded to (rows, capacity), as KeptSetsView reads them.
struct HostKept {
  int32_t rows = 0;
  int32_t capacity = 1;
  std::vector<int32_t> vertical_count, vertical_keys, slash_count, slash_offsets;
};

HostKept pack_kept(const RingLayerProblem& problem) {
  HostKept kept;
  kept.rows = problem.shape.batch * problem.shape.q_heads;
  const auto rows = static_cast<size_t>(kept.rows);
  const int64_t n_total = problem.layout.seq_len_tokens();
  if (problem.pattern == PatternSource::dense) {
    kept.capacity = static_cast<int32_t>(n_total);
    kept.vertical_count.assign(rows, 0);
    kept.vertical_keys.assign(rows * static_cast<size_t>(kept.capacity), 0);
    kept.slash_count.assign(rows, kept.capacity);
    kept.slash_offsets.resize(rows * static_cast<size_t>(kept.capacity));
    for (size_t r = 0; r < rows; ++r) {
      for (int32_t d = 0; d < kept.capacity; ++d) kept.slash_offsets[r * static_cast<size_t>(kept.capacity) + static_cast<size_t>(d)] = d;
    }
    return kept;
  }
  size_t capacity = 1;
  for (size_t r = 0; r < rows; ++r) {
    capacity = std::max({capacity, problem.kept.vertical_keys[r].size(), problem.kept.slash_offsets[r].size()});
  }
  kept.capacity = static_cast<int32_t>(capacity);
  kept.vertical_count.resize(rows);
  kept.slash_count.resize(rows);
  kept.vertical_keys.assign(rows * capacity, 0);
  kept.slash_offsets.assign(rows * capacity, 0);
  for (size_t r = 0; r < rows; ++r) {
    const auto& v = problem.kept.vertical_keys[r];
    const auto& s = problem.kept.slash_offsets[r];
    kept.vertical_count[r] = static_cast<int32_t>(v.size());
    kept.slash_count[r] = static_cast<int32_t>(s.size());
    std::copy(v.begin(), v.end(), kept.vertical_keys.begin() + static_cast<std::ptrdiff_t>(r * capacity));
    std::copy(s.begin(), s.end(), kept.slash_offsets.begin() + static_cast<std::ptrdiff_t>(r * capacity));
  }
  return kept;
}

/// Row maps of the layout all-to-all of one position for a tensor of `heads` heads: its
/// contiguous shard is packed by destination (segments in position order, rows (bh, token) inside)
/// and the received segments (by source position) are scattered to the layout's local order.
struct ShuffleMaps {
  std::vector<int64_t> send_rows;    ///< send-buffer row -> shard row (bh * n + i)
  std::vector<int64_t> send_counts;  ///< [destination position] rows
  std::vector<int64_t> recv_rows;    ///< receive-buffer row -> layout row (bh * n + local)
  std::vector<int64_t> recv_counts;  ///< [source position] rows
};

ShuffleMaps make_shuffle_maps(const TokenLayout& layout, int32_t position, int32_t bh_rows) {
  const int32_t w = layout.ranks();
  const int64_t n = layout.local_len();
  ShuffleMaps maps;
  std::vector<std::vector<int64_t>> by_dest(static_cast<size_t>(w));
  for (int64_t i = 0; i < n; ++i) {
    by_dest[static_cast<size_t>(layout.owner(int64_t{position} * n + i).ring_rank)].push_back(i);
  }
  for (int32_t d = 0; d < w; ++d) {
    const auto& tokens = by_dest[static_cast<size_t>(d)];
    maps.send_counts.push_back(static_cast<int64_t>(tokens.size()) * bh_rows);
    for (int32_t bh = 0; bh < bh_rows; ++bh) {
      for (const int64_t i : tokens) maps.send_rows.push_back(int64_t{bh} * n + i);
    }
  }
  for (int32_t s = 0; s < w; ++s) {
    std::vector<int64_t> locals;
    for (int64_t i = 0; i < n; ++i) {
      const TokenOwner owner = layout.owner(int64_t{s} * n + i);
      if (owner.ring_rank == position) locals.push_back(owner.local_index);
    }
    maps.recv_counts.push_back(static_cast<int64_t>(locals.size()) * bh_rows);
    for (int32_t bh = 0; bh < bh_rows; ++bh) {
      for (const int64_t local : locals) maps.recv_rows.push_back(int64_t{bh} * n + local);
    }
  }
  return maps;
}

/// Device copies of the maps.
struct DeviceShuffle {
  ShuffleMaps host;
  DeviceBuffer<int64_t> send_rows, recv_rows;
  explicit DeviceShuffle(ShuffleMaps maps)
      : host(std::move(maps)), send_rows(host.send_rows), recv_rows(host.recv_rows) {}
};

/// Owned CUDA events (timing enabled: every event may be timed).
class EventSet {
 public:
  explicit EventSet(size_t count) : events_(count, nullptr) {
    for (auto& e : events_) SPARSERING_CUDA_CHECK(cudaEventCreate(&e));
  }
  EventSet(const EventSet&) = delete;
  EventSet& operator=(const EventSet&) = delete;
  ~EventSet() {
    for (auto e : events_) (void)cudaEventDestroy(e);
  }
  cudaEvent_t operator[](size_t i) const { return events_[i]; }

 private:
  std::vector<cudaEvent_t> events_;
};

float elapsed_ms(cudaEvent_t from, cudaEvent_t to) {
  float ms = 0.0f;
  SPARSERING_CUDA_CHECK(cudaEventElapsedTime(&ms, from, to));
  return ms;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t m = values.size() / 2;
  return values.size() % 2 == 1 ? values[m] : 0.5 * (values[m - 1] + values[m]);
}

/// One pass's raw timings of one rank and iteration.
struct PassSample {
  std::vector<double> compute_ms, step_ms, wait_ms;
  double total_ms = 0.0;
  double tail_ms = 0.0;  ///< backward: last compute end -> accumulators home
};

struct RankResult {
  std::vector<PassSample> forward, backward;
  std::vector<double> shuffle_ms, estimate_ms, index_ms;
  std::vector<int64_t> tiles, columns;
  RingRankOutputs outputs;
  RingKeptSets kept;
  bool ran = false;
};

const char* pass_name(RingPass pass) { return pass == RingPass::forward ? "forward" : "backward"; }

/// Everything the rank threads share (read-only).
struct SharedRun {
  const RingLayerProblem* problem = nullptr;
  const RingRuntimeOptions* options = nullptr;
  RingTopology topology;
  KvBufferPlan plan;
  Geometry geo;
  HostKept kept;  ///< kept_sets / dense
  float softmax_scale = 0.0f;
};

/// Estimation across shards: the last_q queries gathered on every rank, pass 1 per shard, the
/// row statistics combined (all-gather + fold), pass 2, slash mass summed and vertical mass
/// gathered (all-reduce of disjoint scatters), then the recall selection, identical everywhere.
void estimate_kept_sets(const SharedRun& sh, NcclWorld& world, int32_t position, const bf16_bits* q_layout,
                        const bf16_bits* k_layout, cudaStream_t stream, DeviceBuffer<int32_t>& vcount,
                        DeviceBuffer<int32_t>& vkeys, DeviceBuffer<int32_t>& scount, DeviceBuffer<int32_t>& soffs) {
  const RingLayerProblem& pr = *sh.problem;
  const Geometry& g = sh.geo;
  const int64_t n_total = pr.layout.seq_len_tokens();
  const int32_t last_q = pr.last_q;
  const int32_t rows = g.rows();
  const int32_t w = g.ranks;
  // Gather the last queries: each rank copies its own rows into a zeroed buffer; a bf16 sum
  // all-reduce is exact (one nonzero contributor per element).
  std::vector<int64_t> src_rows, dst_rows;
  for (int64_t t = n_total - last_q; t < n_total; ++t) {
    const TokenOwner owner = pr.layout.owner(t);
    if (owner.ring_rank != position) continue;
    for (int32_t bh = 0; bh < rows; ++bh) {
      src_rows.push_back(int64_t{bh} * g.local_tokens + owner.local_index);
      dst_rows.push_back(int64_t{bh} * last_q + (t - (n_total - last_q)));
    }
  }
  const int64_t q_last_elems = int64_t{rows} * last_q * g.head_dim;
  DeviceBuffer<bf16_bits> q_last(static_cast<size_t>(q_last_elems));
  SPARSERING_CUDA_CHECK(cudaMemsetAsync(q_last.data(), 0, q_last.bytes(), stream));
  DeviceBuffer<int64_t> src_dev(src_rows), dst_dev(dst_rows);
  launch_copy_rows(q_last.data(), dst_dev.data(), q_layout, src_dev.data(), static_cast<int64_t>(src_rows.size()),
                   g.head_dim, stream);
  SPARSERING_NCCL_CHECK(ncclAllReduce(q_last.data(), q_last.data(), static_cast<size_t>(q_last_elems), ncclBfloat16,
                                      ncclSum, world.comm(), stream));
  world.wait_comm(world.comm(), "estimation: gathering the last queries");

  EstimateParams ep;
  ep.shape = pr.shape;
  ep.shape.q_len = last_q;
  ep.shape.kv_len = g.local_tokens;
  ep.position = RingPosition{pr.layout, position, position};
  ep.softmax_scale = sh.softmax_scale;
  ep.q_last = q_last.data();
  ep.k = k_layout;
  const auto stat_count = static_cast<size_t>(rows) * static_cast<size_t>(last_q);
  DeviceBuffer<float> stats(2 * stat_count);                            // this shard: max | sum
  DeviceBuffer<float> all_stats(2 * stat_count * static_cast<size_t>(w));  // every shard's
  DeviceBuffer<float> row_max(stat_count), row_sum(stat_count);
  ep.row_max = stats.data();
  ep.row_sum = stats.data() + stat_count;
  launch_estimate_pattern_pass1(ep, stream);
  SPARSERING_NCCL_CHECK(ncclAllGather(stats.data(), all_stats.data(), 2 * stat_count, ncclFloat, world.comm(), stream));
  world.wait_comm(world.comm(), "estimation: gathering row statistics");
  launch_fill_floats(row_max.data(), static_cast<int64_t>(stat_count), -std::numeric_limits<float>::infinity(), stream);
  launch_fill_floats(row_sum.data(), static_cast<int64_t>(stat_count), 0.0f, stream);
  for (int32_t s = 0; s < w; ++s) {  // fold in shard order: every rank gets identical statistics
    const float* base = all_stats.data() + 2 * stat_count * static_cast<size_t>(s);
    launch_estimate_pattern_combine(static_cast<int64_t>(stat_count), base, base + stat_count, row_max.data(),
                                    row_sum.data(), stream);
  }
  const auto vert_local = static_cast<size_t>(rows) * static_cast<size_t>(g.local_tokens);
  const auto mass_global = static_cast<size_t>(rows) * static_cast<size_t>(n_total);
  DeviceBuffer<float> vmass_local(vert_local), vmass(mass_global), smass(mass_global);
  SPARSERING_CUDA_CHECK(cudaMemsetAsync(smass.data(), 0, smass.bytes(), stream));
  SPARSERING_CUDA_CHECK(cudaMemsetAsync(vmass.data(), 0, vmass.bytes(), stream));
  ep.row_max = row_max.data();
  ep.row_sum = row_sum.data();
  ep.vertical_mass = vmass_local.data();
  ep.slash_mass = smass.data();
  launch_estimate_pattern_pass2(ep, stream);
  // Scatter this shard's vertical mass to its keys' global positions (zeros elsewhere), so the
  // sum all-reduce below is a gather (one nonzero contributor per element: exact).
  {
    std::vector<int64_t> to_global(vert_local);
    for (int32_t bh = 0; bh < rows; ++bh) {
      for (int64_t i = 0; i < g.local_tokens; ++i) {
        to_global[static_cast<size_t>(bh) * static_cast<size_t>(g.local_tokens) + static_cast<size_t>(i)] =
            int64_t{bh} * n_total + pr.layout.global_token(position, i);
      }
    }
    std::vector<float> host_local(vert_local);
    SPARSERING_CUDA_CHECK(cudaStreamSynchronize(stream));
    SPARSERING_CUDA_CHECK(cudaMemcpy(host_local.data(), vmass_local.data(), vmass_local.bytes(), cudaMemcpyDeviceToHost));
    std::vector<float> host_global(mass_global, 0.0f);
    for (size_t e = 0; e < vert_local; ++e) host_global[static_cast<size_t>(to_global[e])] = host_local[e];
    vmass.upload(host_global);
  }
  SPARSERING_NCCL_CHECK(ncclGroupStart());
  SPARSERING_NCCL_CHECK(ncclAllReduce(vmass.data(), vmass.data(), mass_global, ncclFloat, ncclSum, world.comm(), stream));
  SPARSERING_NCCL_CHECK(ncclAllReduce(smass.data(), smass.data(), mass_global, ncclFloat, ncclSum, world.comm(), stream));
  SPARSERING_NCCL_CHECK(ncclGroupEnd());
  world.wait_comm(world.comm(), "estimation: summing vertical and slash mass");
  const int32_t capacity = static_cast<int32_t>(std::min<int64_t>(pr.capacity, n_total));
  vcount = DeviceBuffer<int32_t>(static_cast<size_t>(rows));
  scount = DeviceBuffer<int32_t>(static_cast<size_t>(rows));
  vkeys = DeviceBuffer<int32_t>(static_cast<size_t>(rows) * static_cast<size_t>(capacity));
  soffs = DeviceBuffer<int32_t>(static_cast<size_t>(rows) * static_cast<size_t>(capacity));
  RecallSelectParams sel;
  sel.rows = rows;
  sel.entries = n_total;
  sel.recall = pr.recall;
  sel.capacity = capacity;
  sel.mass = vmass.data();
  sel.kept_count = vcount.data();
  sel.kept_index = vkeys.data();
  launch_recall_select(sel, stream);
  sel.mass = smass.data();
  sel.kept_count = scount.data();
  sel.kept_index = soffs.data();
  launch_recall_select(sel, stream);
  world.wait_stream(stream, "estimation: recall selection");
}

void run_rank(const SharedRun& sh, int32_t global, const ncclUniqueId& id, RankResult& result) {
  const RingLayerProblem& pr = *sh.problem;
  const RingRuntimeOptions& opt = *sh.options;
  const RingTopology& topo = sh.topology;
  const KvBufferPlan& plan = sh.plan;
  const Geometry& g = sh.geo;
  const int32_t w = g.ranks;
  const int32_t levels = topo.levels();
  const RingRank pos = topo.ring_rank(GlobalRank(global));
  const int32_t p = pos.value();
  const int32_t device = opt.devices.empty() ? global : opt.devices[static_cast<size_t>(global)];

  NcclWorld world(NcclWorldConfig{global, w, device, id, opt.timeout_s});
  std::vector<ncclComm_t> kv_comm, acc_comm;
  for (int32_t l = 0; l < levels; ++l) kv_comm.push_back(world.duplicate());
  if (pr.backward) {
    for (int32_t l = 0; l < levels; ++l) acc_comm.push_back(world.duplicate());
  }
  CudaStream compute;
  std::vector<std::unique_ptr<CudaStream>> kv_stream, acc_stream;
  for (int32_t l = 0; l < levels; ++l) {
    kv_stream.push_back(std::make_unique<CudaStream>());
    acc_stream.push_back(std::make_unique<CudaStream>());
  }
  cudaStream_t cs = compute.get();
  const auto uz = [](int64_t v) { return static_cast<size_t>(v); };

  // Inputs of the contiguous shard, generated from the seed.
  const int64_t qe = g.q_elems();
  const int64_t kve = g.kv_elems();
  DeviceBuffer<bf16_bits> shard_q(uz(qe)), shard_k(uz(kve)), shard_v(uz(kve)), shard_do(pr.backward ? uz(qe) : 0);
  const int64_t first = int64_t{p} * g.local_tokens;
  launch_generate_ring_inputs(shard_q.data(), pr.seed, 0, g.batch, g.q_heads, g.local_tokens, g.head_dim, first, cs);
  launch_generate_ring_inputs(shard_k.data(), pr.seed, 1, g.batch, g.kv_heads, g.local_tokens, g.head_dim, first, cs);
  launch_generate_ring_inputs(shard_v.data(), pr.seed, 2, g.batch, g.kv_heads, g.local_tokens, g.head_dim, first, cs);
  if (pr.backward) {
    launch_generate_ring_inputs(shard_do.data(), pr.seed, 3, g.batch, g.q_heads, g.local_tokens, g.head_dim, first, cs);
  }
  DeviceShuffle shuffle_q(make_shuffle_maps(pr.layout, p, g.batch * g.q_heads));
  DeviceShuffle shuffle_kv(make_shuffle_maps(pr.layout, p, g.batch * g.kv_heads));
  DeviceBuffer<bf16_bits> send(uz(std::max(qe, kve))), recv(uz(std::max(qe, kve)));

  // Layout buffers and ring state.
  DeviceBuffer<bf16_bits> q(uz(qe)), dout(pr.backward ? uz(qe) : 0), own_kv(uz(2 * kve));
  std::vector<DeviceBuffer<bf16_bits>> slots;
  for (int32_t b = 0; b < plan.buffers; ++b) slots.emplace_back(uz(2 * kve));
  DeviceBuffer<float> out(uz(qe)), lse(uz(g.lse_elems())), delta(pr.backward ? uz(g.lse_elems()) : 0),
      dq(pr.backward ? uz(qe) : 0);
  std::vector<DeviceBuffer<float>> local_acc;
  std::map<std::tuple<int32_t, int32_t, bool>, DeviceBuffer<float>> acc_recv;
  if (pr.backward) {
    for (int32_t t = 0; t < w; ++t) local_acc.emplace_back(uz(2 * kve));
    if (w > 1) {
      for (int32_t t = 0; t < w; ++t) {
        for (const AccumulatorHop& hop : topo.accumulator_hops(pos, t)) {
          acc_recv.emplace(std::make_tuple(hop.level, hop.recv_step, hop.recv_lands), DeviceBuffer<float>(uz(2 * kve)));
        }
      }
    }
  }
  DeviceBuffer<float> barrier_value(1);

  // Pattern source (kept / dense: uploaded once).
  DeviceBuffer<int32_t> vcount, vkeys, scount, soffs;
  int32_t kept_capacity = sh.kept.capacity;
  if (pr.pattern != PatternSource::estimate) {
    const auto t0 = std::chrono::steady_clock::now();
    vcount = DeviceBuffer<int32_t>(sh.kept.vertical_count);
    vkeys = DeviceBuffer<int32_t>(sh.kept.vertical_keys);
    scount = DeviceBuffer<int32_t>(sh.kept.slash_count);
    soffs = DeviceBuffer<int32_t>(sh.kept.slash_offsets);
    result.estimate_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  } else {
    kept_capacity = static_cast<int32_t>(std::min<int64_t>(pr.capacity, pr.layout.seq_len_tokens()));
  }

  // Events: per pass, per step start / end / arrival, per (step, level) sent; pass start / end.
  const auto wz = static_cast<size_t>(w);
  const auto lz = static_cast<size_t>(levels);
  struct PassEvents {
    EventSet start, end, arrived, sent, acc;
    cudaEvent_t pass_start, pass_end, ready, final_home;
    EventSet misc;
    std::vector<bool> sent_recorded;
    PassEvents(size_t w_, size_t l_)
        : start(w_), end(w_), arrived(w_), sent(w_ * l_), acc(w_ * l_), pass_start(nullptr), pass_end(nullptr),
          ready(nullptr), final_home(nullptr), misc(4), sent_recorded(w_ * l_, false) {
      pass_start = misc[0];
      pass_end = misc[1];
      ready = misc[2];
      final_home = misc[3];
    }
  };
  PassEvents fwd_ev(wz, lz), bwd_ev(wz, lz);
  // Per-step kernel, step and wait times of a finished pass, from its events.
  const auto read_pass_sample = [w](const PassEvents& ev) {
    PassSample sample;
    for (int32_t t = 0; t < w; ++t) {
      const auto tz = static_cast<size_t>(t);
      const cudaEvent_t previous_end = t == 0 ? ev.pass_start : ev.end[tz - 1];
      sample.compute_ms.push_back(elapsed_ms(ev.start[tz], ev.end[tz]));
      sample.step_ms.push_back(elapsed_ms(previous_end, ev.end[tz]));
      sample.wait_ms.push_back(elapsed_ms(previous_end, ev.start[tz]));
    }
    sample.total_ms = elapsed_ms(ev.pass_start, ev.pass_end);
    return sample;
  };
  EventSet shuffle_ev(2);

  const auto chunk_ptr = [&](int32_t t) { return slots[static_cast<size_t>(plan.slot[static_cast<size_t>(t)])].data(); };

  // Posts the K/V hops of step t (outer level first).
  const auto post_kv = [&](RingPass pass, PassEvents& ev, int32_t t) {
    for (const KvHop& hop : topo.kv_hops(pos, t)) {
      const auto l = static_cast<size_t>(hop.level);
      cudaStream_t s = kv_stream[l]->get();
      SPARSERING_CUDA_CHECK(cudaStreamWaitEvent(s, t == 0 ? ev.ready : ev.arrived[static_cast<size_t>(t)], 0));
      const int32_t prev = plan.previous_holder[static_cast<size_t>(hop.recv_step)];
      if (prev >= 0) {
        SPARSERING_CUDA_CHECK(cudaStreamWaitEvent(s, ev.end[static_cast<size_t>(prev)], 0));
        for (size_t m = 0; m < lz; ++m) {
          if (ev.sent_recorded[static_cast<size_t>(prev) * lz + m]) {
            SPARSERING_CUDA_CHECK(cudaStreamWaitEvent(s, ev.sent[static_cast<size_t>(prev) * lz + m], 0));
          }
        }
      }
      SPARSERING_NCCL_CHECK(ncclGroupStart());
      SPARSERING_NCCL_CHECK(ncclSend(chunk_ptr(t), uz(2 * kve), ncclBfloat16, hop.to.value(), kv_comm[l], s));
      SPARSERING_NCCL_CHECK(ncclRecv(chunk_ptr(hop.recv_step), uz(2 * kve), ncclBfloat16, hop.from.value(), kv_comm[l], s));
      SPARSERING_NCCL_CHECK(ncclGroupEnd());
      world.wait_comm(kv_comm[l], str("posting the level-", hop.level, " K/V hop of ", pass_name(pass), " step ", t));
      SPARSERING_CUDA_CHECK(cudaEventRecord(ev.arrived[static_cast<size_t>(hop.recv_step)], s));
      SPARSERING_CUDA_CHECK(cudaEventRecord(ev.sent[static_cast<size_t>(t) * lz + l], s));
      ev.sent_recorded[static_cast<size_t>(t) * lz + l] = true;
    }
  };
  const auto describe_wait = [&](int32_t t) {
    if (t == 0) return std::string("the compute of step 0 (own K/V chunk)");
    const int32_t src = topo.chunk_source(pos, t).value();
    const int32_t level = topo.schedule().arrival_level(t);
    return str("the compute of step ", t, " (K/V chunk of ring position ", src, ", rank ",
               topo.global_rank(RingRank(src)).value(), ", arriving over level ", level, " from rank ",
               topo.predecessor(pos, level).value(), ")");
  };
  const auto barrier = [&](const char* what) {
    SPARSERING_NCCL_CHECK(ncclAllReduce(barrier_value.data(), barrier_value.data(), 1, ncclFloat, ncclSum, world.comm(), cs));
    world.wait_comm(world.comm(), what);
    world.wait_stream(cs, what);
  };
  const auto shuffle_tensor = [&](const bf16_bits* shard, bf16_bits* dst, const DeviceShuffle& m) {
    const int64_t rows = static_cast<int64_t>(m.host.send_rows.size());
    launch_copy_rows(send.data(), nullptr, shard, m.send_rows.data(), rows, g.head_dim, cs);
    SPARSERING_NCCL_CHECK(ncclGroupStart());
    int64_t offset = 0;
    for (int32_t d = 0; d < w; ++d) {
      const int64_t count = m.host.send_counts[static_cast<size_t>(d)];
      if (count > 0) {
        SPARSERING_NCCL_CHECK(ncclSend(send.data() + offset * g.head_dim, uz(count * g.head_dim), ncclBfloat16,
                                       topo.global_rank(RingRank(d)).value(), world.comm(), cs));
      }
      offset += count;
    }
    offset = 0;
    for (int32_t s = 0; s < w; ++s) {
      const int64_t count = m.host.recv_counts[static_cast<size_t>(s)];
      if (count > 0) {
        SPARSERING_NCCL_CHECK(ncclRecv(recv.data() + offset * g.head_dim, uz(count * g.head_dim), ncclBfloat16,
                                       topo.global_rank(RingRank(s)).value(), world.comm(), cs));
      }
      offset += count;
    }
    SPARSERING_NCCL_CHECK(ncclGroupEnd());
    world.wait_comm(world.comm(), "posting the layout shuffle");
    launch_copy_rows(dst, m.recv_rows.data(), recv.data(), nullptr, rows, g.head_dim, cs);
  };

  std::vector<DeviceSparseIndex> index;
  const int32_t total_iterations = pr.warmup + pr.iterations;
  for (int32_t it = 0; it < total_iterations; ++it) {
    const bool timed = it >= pr.warmup;
    // Layout shuffle.
    world.set_phase("layout shuffle");
    SPARSERING_CUDA_CHECK(cudaEventRecord(shuffle_ev[0], cs));
    shuffle_tensor(shard_q.data(), q.data(), shuffle_q);
    shuffle_tensor(shard_k.data(), own_kv.data(), shuffle_kv);
    shuffle_tensor(shard_v.data(), own_kv.data() + kve, shuffle_kv);
    if (pr.backward) shuffle_tensor(shard_do.data(), dout.data(), shuffle_q);
    SPARSERING_CUDA_CHECK(cudaEventRecord(shuffle_ev[1], cs));
    world.wait_event(shuffle_ev[1], "the layout shuffle");
    if (timed) result.shuffle_ms.push_back(elapsed_ms(shuffle_ev[0], shuffle_ev[1]));

    // Pattern.
    if (pr.pattern == PatternSource::estimate) {
      world.set_phase("pattern estimation");
      const auto t0 = std::chrono::steady_clock::now();
      estimate_kept_sets(sh, world, p, q.data(), own_kv.data(), cs, vcount, vkeys, scount, soffs);
      if (timed) {
        result.estimate_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
    }
    KeptSetsView kept_view{g.rows(), kept_capacity, vcount.data(), vkeys.data(), scount.data(), soffs.data()};

    // Index of every step.
    world.set_phase("index build");
    {
      const auto t0 = std::chrono::steady_clock::now();
      index.clear();
      result.tiles.assign(wz, 0);
      result.columns.assign(wz, 0);
      for (int32_t t = 0; t < w; ++t) {
        const RingPosition rp{pr.layout, p, topo.chunk_source(pos, t).value()};
        index.push_back(launch_build_sparse_index(kept_view, rp, pr.block_q, pr.block_k, cs));
        result.tiles[static_cast<size_t>(t)] = index.back().tiles;
        result.columns[static_cast<size_t>(t)] = index.back().columns;
      }
      if (timed) {
        result.index_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
    }
    barrier("the barrier before the forward ring");

    // Forward ring.
    {
      PassEvents& ev = fwd_ev;
      std::fill(ev.sent_recorded.begin(), ev.sent_recorded.end(), false);
      SPARSERING_CUDA_CHECK(cudaMemsetAsync(out.data(), 0, out.bytes(), cs));
      launch_fill_floats(lse.data(), g.lse_elems(), -std::numeric_limits<float>::infinity(), cs);
      SPARSERING_CUDA_CHECK(cudaMemcpyAsync(slots[0].data(), own_kv.data(), own_kv.bytes(), cudaMemcpyDeviceToDevice, cs));
      SPARSERING_CUDA_CHECK(cudaEventRecord(ev.ready, cs));
      SPARSERING_CUDA_CHECK(cudaEventRecord(ev.pass_start, cs));
      for (int32_t t = 0; t < w; ++t) {
        world.set_phase(str("forward ring step ", t));
        post_kv(RingPass::forward, ev, t);
        if (t > 0) SPARSERING_CUDA_CHECK(cudaStreamWaitEvent(cs, ev.arrived[static_cast<size_t>(t)], 0));
        SPARSERING_CUDA_CHECK(cudaEventRecord(ev.start[static_cast<size_t>(t)], cs));
        SparseAttnFwdParams fp;
        fp.shape = pr.shape;
        fp.position = RingPosition{pr.layout, p, topo.chunk_source(pos, t).value()};
        fp.index = index[static_cast<size_t>(t)].view();
        fp.softmax_scale = sh.softmax_scale;
        fp.q = q.data();
        fp.k = chunk_ptr(t);
        fp.v = chunk_ptr(t) + kve;
        fp.out = out.data();
        fp.lse = lse.data();
        launch_sparse_attn_fwd(fp, cs);
        SPARSERING_CUDA_CHECK(cudaEventRecord(ev.end[static_cast<size_t>(t)], cs));
        if (opt.after_step) opt.after_step(global, RingPass::forward, t);
        if (t > 0) {
          world.set_phase(str("forward ring step ", t - 1));
          world.wait_event(ev.end[static_cast<size_t>(t - 1)], describe_wait(t - 1));
        }
      }
      world.set_phase(str("forward ring step ", w - 1));
      world.wait_event(ev.end[wz - 1], describe_wait(w - 1));
      SPARSERING_CUDA_CHECK(cudaEventRecord(ev.pass_end, cs));
      for (auto& s : kv_stream) world.wait_stream(s->get(), "the forward K/V hops to finish");
      world.wait_event(ev.pass_end, "the end of the forward ring");
      if (timed) {
        result.forward.push_back(read_pass_sample(ev));
      }
    }

    if (pr.backward) {
      barrier("the barrier before the backward ring");
      PassEvents& ev = bwd_ev;
      std::fill(ev.sent_recorded.begin(), ev.sent_recorded.end(), false);
      SPARSERING_CUDA_CHECK(cudaMemsetAsync(dq.data(), 0, dq.bytes(), cs));
      for (auto& b : local_acc) SPARSERING_CUDA_CHECK(cudaMemsetAsync(b.data(), 0, b.bytes(), cs));
      SPARSERING_CUDA_CHECK(cudaMemcpyAsync(slots[0].data(), own_kv.data(), own_kv.bytes(), cudaMemcpyDeviceToDevice, cs));
      SPARSERING_CUDA_CHECK(cudaEventRecord(ev.ready, cs));
      SPARSERING_CUDA_CHECK(cudaEventRecord(ev.pass_start, cs));
      AttnBwdDeltaParams dp;
      dp.shape = pr.shape;
      dp.dout = dout.data();
      dp.out = out.data();
      dp.delta = delta.data();
      launch_attn_bwd_delta(dp, cs);
      float* final_acc = local_acc[0].data();
      for (int32_t t = 0; t < w; ++t) {
        world.set_phase(str("backward ring step ", t));
        post_kv(RingPass::backward, ev, t);
        if (t > 0) SPARSERING_CUDA_CHECK(cudaStreamWaitEvent(cs, ev.arrived[static_cast<size_t>(t)], 0));
        SPARSERING_CUDA_CHECK(cudaEventRecord(ev.start[static_cast<size_t>(t)], cs));
        SparseAttnBwdParams bp;
        bp.shape = pr.shape;
        bp.position = RingPosition{pr.layout, p, topo.chunk_source(pos, t).value()};
        bp.index = index[static_cast<size_t>(t)].view();
        bp.softmax_scale = sh.softmax_scale;
        bp.q = q.data();
        bp.k = chunk_ptr(t);
        bp.v = chunk_ptr(t) + kve;
        bp.dout = dout.data();
        bp.lse = lse.data();
        bp.delta = delta.data();
        bp.dq = dq.data();
        bp.dk = local_acc[static_cast<size_t>(t)].data();
        bp.dv = local_acc[static_cast<size_t>(t)].data() + kve;
        launch_sparse_attn_bwd(bp, cs);
        SPARSERING_CUDA_CHECK(cudaEventRecord(ev.end[static_cast<size_t>(t)], cs));
        // Accumulator hops of this step, inner level first (mirror route).
        if (w > 1) {
          for (const AccumulatorHop& hop : topo.accumulator_hops(pos, t)) {
            const auto l = static_cast<size_t>(hop.level);
            cudaStream_t s = acc_stream[l]->get();
            float* value = nullptr;
            if (hop.level == 0) {
              SPARSERING_CUDA_CHECK(cudaStreamWaitEvent(s, ev.end[static_cast<size_t>(t)], 0));
              value = local_acc[static_cast<size_t>(hop.send_step)].data();
            } else {
              SPARSERING_CUDA_CHECK(cudaStreamWaitEvent(s, ev.acc[static_cast<size_t>(t) * lz + l - 1], 0));
              value = acc_recv.at(std::make_tuple(hop.level - 1, hop.send_step, true)).data();
            }
            if (hop.add_incoming) {
              launch_add_floats(value, acc_recv.at(std::make_tuple(hop.level, hop.send_step, false)).data(), 2 * kve, s);
            }
            float* target = acc_recv.at(std::make_tuple(hop.level, hop.recv_step, hop.recv_lands)).data();
            SPARSERING_NCCL_CHECK(ncclGroupStart());
            SPARSERING_NCCL_CHECK(ncclSend(value, uz(2 * kve), ncclFloat, hop.to.value(), acc_comm[l], s));
            SPARSERING_NCCL_CHECK(ncclRecv(target, uz(2 * kve), ncclFloat, hop.from.value(), acc_comm[l], s));
            SPARSERING_NCCL_CHECK(ncclGroupEnd());
            world.wait_comm(acc_comm[l], str("posting the level-", hop.level, " dK/dV hop of backward step ", t));
            SPARSERING_CUDA_CHECK(cudaEventRecord(ev.acc[static_cast<size_t>(t) * lz + l], s));
            if (hop.recv_final) {
              final_acc = target;
              SPARSERING_CUDA_CHECK(cudaEventRecord(ev.final_home, s));
            }
          }
        }
        if (opt.after_step) opt.after_step(global, RingPass::backward, t);
        if (t > 0) {
          world.set_phase(str("backward ring step ", t - 1));
          world.wait_event(ev.end[static_cast<size_t>(t - 1)], describe_wait(t - 1));
        }
      }
      world.set_phase(str("backward ring step ", w - 1));
      world.wait_event(ev.end[wz - 1], describe_wait(w - 1));
      if (w > 1) SPARSERING_CUDA_CHECK(cudaStreamWaitEvent(cs, ev.final_home, 0));
      SPARSERING_CUDA_CHECK(cudaEventRecord(ev.pass_end, cs));
      world.wait_event(ev.pass_end, "the dK/dV accumulators of the own chunk to come home");
      for (auto& s : kv_stream) world.wait_stream(s->get(), "the backward K/V hops to finish");
      for (auto& s : acc_stream) world.wait_stream(s->get(), "the dK/dV hops to finish");
      if (timed) {
        PassSample sample = read_pass_sample(ev);
        sample.tail_ms = elapsed_ms(ev.end[wz - 1], ev.pass_end);
        result.backward.push_back(sample);
      }
      if (it + 1 == total_iterations && opt.return_outputs) {
        const std::vector<float> acc = [&] {
          std::vector<float> host(uz(2 * kve));
          SPARSERING_CUDA_CHECK(cudaMemcpy(host.data(), final_acc, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
          return host;
        }();
        result.outputs.dq = dq.download();
        result.outputs.dk.assign(acc.begin(), acc.begin() + kve);
        result.outputs.dv.assign(acc.begin() + kve, acc.end());
      }
    }
    if (it + 1 == total_iterations) {
      if (opt.return_outputs) {
        result.outputs.out = out.download();
        result.outputs.lse = lse.download();
      }
      if (pr.pattern == PatternSource::estimate) {
        const auto vc = vcount.download(), vk = vkeys.download(), sc = scount.download(), so = soffs.download();
        result.kept.vertical_keys.resize(uz(g.rows()));
        result.kept.slash_offsets.resize(uz(g.rows()));
        for (size_t r = 0; r < uz(g.rows()); ++r) {
          const auto base = r * uz(kept_capacity);
          result.kept.vertical_keys[r].assign(vk.begin() + static_cast<std::ptrdiff_t>(base),
                                              vk.begin() + static_cast<std::ptrdiff_t>(base + uz(vc[r])));
          result.kept.slash_offsets[r].assign(so.begin() + static_cast<std::ptrdiff_t>(base),
                                              so.begin() + static_cast<std::ptrdiff_t>(base + uz(sc[r])));
        }
      }
    }
  }
  result.ran = true;
}

RingPassTimes summarize(const std::vector<RankResult>& results, int32_t w, bool forward) {
  RingPassTimes times;
  const auto cells = static_cast<size_t>(w) * static_cast<size_t>(w);
  times.compute_ms.assign(cells, 0.0);
  times.step_ms.assign(cells, 0.0);
  times.recv_wait_ms.assign(cells, 0.0);
  times.rank_total_ms.assign(static_cast<size_t>(w), 0.0);
  times.rank_compute_ms.assign(static_cast<size_t>(w), 0.0);
  for (int32_t gr = 0; gr < w; ++gr) {
    const RankResult& r = results[static_cast<size_t>(gr)];
    const auto& samples = forward ? r.forward : r.backward;
    if (!r.ran || samples.empty()) continue;
    double exposed = 0.0;
    for (int32_t t = 0; t < w; ++t) {
      std::vector<double> c, s, wt;
      for (const auto& sample : samples) {
        c.push_back(sample.compute_ms[static_cast<size_t>(t)]);
        s.push_back(sample.step_ms[static_cast<size_t>(t)]);
        wt.push_back(sample.wait_ms[static_cast<size_t>(t)]);
      }
      const auto cell = static_cast<size_t>(gr) * static_cast<size_t>(w) + static_cast<size_t>(t);
      times.compute_ms[cell] = median(c);
      times.step_ms[cell] = median(s);
      times.recv_wait_ms[cell] = median(wt);
      times.rank_compute_ms[static_cast<size_t>(gr)] += times.compute_ms[cell];
      if (t > 0) exposed += times.recv_wait_ms[cell];
    }
    std::vector<double> totals, tails;
    for (const auto& sample : samples) {
      totals.push_back(sample.total_ms);
      tails.push_back(sample.tail_ms);
    }
    times.rank_total_ms[static_cast<size_t>(gr)] = median(totals);
    exposed += median(tails);
    times.wall_ms = std::max(times.wall_ms, times.rank_total_ms[static_cast<size_t>(gr)]);
    times.exposed_comm_ms = std::max(times.exposed_comm_ms, exposed);
  }
  return times;
}

}  // namespace

void validate_ring_layer_problem(const RingLayerProblem& problem) {
  const TokenLayout& layout = problem.layout;
  require(layout.seq_len_tokens() < (int64_t{1} << 31), "layout.seq_len_tokens ", layout.seq_len_tokens(),
          " must be < 2^31");
  (void)RingTopology(problem.level_sizes, problem.ring_order, layout.ranks());
  const AttentionShape& s = problem.shape;
  require(s.batch >= 1, "shape.batch must be >= 1, got ", s.batch);
  require(s.kv_heads >= 1 && s.q_heads >= 1 && s.q_heads % s.kv_heads == 0, "shape.q_heads ", s.q_heads,
          " must be a positive multiple of shape.kv_heads ", s.kv_heads);
  require(s.head_dim == 64 || s.head_dim == 128, "shape.head_dim must be 64 or 128, got ", s.head_dim);
  require(s.q_len == layout.local_len() && s.kv_len == layout.local_len(), "shape.q_len ", s.q_len, " and kv_len ",
          s.kv_len, " must equal the local length N/W = ", layout.local_len());
  require(problem.block_q >= 1 && problem.block_q <= 1024, "block_q must be in [1, 1024], got ", problem.block_q);
  require(problem.block_k >= 1, "block_k must be >= 1, got ", problem.block_k);
  require(problem.iterations >= 1, "iterations must be >= 1, got ", problem.iterations);
  require(problem.warmup >= 0, "warmup must be >= 0, got ", problem.warmup);
  require(std::isfinite(problem.softmax_scale) && problem.softmax_scale >= 0.0f, "softmax_scale must be finite and >= 0");
  const auto rows = static_cast<size_t>(s.batch) * static_cast<size_t>(s.q_heads);
  if (problem.pattern == PatternSource::kept_sets) {
    require(problem.kept.vertical_keys.size() == rows && problem.kept.slash_offsets.size() == rows,
            "kept sets have ", problem.kept.vertical_keys.size(), " vertical and ", problem.kept.slash_offsets.size(),
            " slash rows, expected batch x q_heads = ", rows);
    for (size_t r = 0; r < rows; ++r) {
      for (const auto* list : {&problem.kept.vertical_keys[r], &problem.kept.slash_offsets[r]}) {
        const char* name = list == &problem.kept.vertical_keys[r] ? "vertical_keys" : "slash_offsets";
        for (size_t i = 0; i < list->size(); ++i) {
          const int32_t v = (*list)[i];
          require(v >= 0 && v < layout.seq_len_tokens(), "kept.", name, "[", r, "][", i, "] = ", v, " is not in [0, ",
                  layout.seq_len_tokens(), ")");
          require(i == 0 || (*list)[i - 1] < v, "kept.", name, "[", r, "] is not ascending and unique at entry ", i);
        }
      }
    }
  } else if (problem.pattern == PatternSource::estimate) {
    require(problem.recall > 0.0 && problem.recall <= 1.0, "recall must be in (0, 1], got ", problem.recall);
    require(problem.last_q >= 1 && problem.last_q <= layout.seq_len_tokens(), "last_q must be in [1, N], got ",
            problem.last_q);
    require(problem.capacity >= 1, "capacity must be >= 1, got ", problem.capacity);
  }
}

RingLayerMeasurement run_ring_attention_layer(const RingLayerProblem& problem, const RingRuntimeOptions& options) {
  validate_ring_layer_problem(problem);
  const int32_t w = problem.layout.ranks();
  require(options.timeout_s > 0.0, "timeout must be > 0 s, got ", options.timeout_s);
  require(options.devices.empty() || options.devices.size() == static_cast<size_t>(w), "devices lists ",
          options.devices.size(), " entries, the ring has ", w, " ranks");
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess) device_count = 0;
  for (int32_t gr = 0; gr < w; ++gr) {
    const int32_t d = options.devices.empty() ? gr : options.devices[static_cast<size_t>(gr)];
    require(d >= 0 && d < device_count, "rank ", gr, " needs CUDA device ", d, " but this host has ", device_count,
            " GPUs");
  }
  SharedRun sh{&problem, &options, RingTopology(problem.level_sizes, problem.ring_order, w), {}, {}, {}, 0.0f};
  sh.plan = sh.topology.kv_buffer_plan();
  sh.geo = Geometry{w, problem.layout.local_len(), problem.shape.batch, problem.shape.q_heads,
                    problem.shape.kv_heads, problem.shape.head_dim};
  if (problem.pattern != PatternSource::estimate) sh.kept = pack_kept(problem);
  sh.softmax_scale = problem.softmax_scale > 0.0f ? problem.softmax_scale
                                                  : 1.0f / std::sqrt(static_cast<float>(problem.shape.head_dim));

  std::vector<int32_t> local;
  ncclUniqueId id{};
  require(!(options.mpi_id && !options.id_file.empty()), "choose one of id_file and mpi_id");
  if (options.id_file.empty() && !options.mpi_id) {
    for (int32_t gr = 0; gr < w; ++gr) local.push_back(gr);
    id = NcclWorld::new_id();
  } else {
    require(!options.local_ranks.empty(), "with an id file or MPI, local_ranks must list the ranks this process drives");
    for (const int32_t gr : options.local_ranks) {
      require(gr >= 0 && gr < w, "local rank ", gr, " is not in [0, ", w, ")");
      local.push_back(gr);
    }
    if (options.mpi_id) {
#if defined(SPARSERING_HAVE_MPI)
      id = broadcast_nccl_id_mpi();
#else
      throw InputError("mpi_id: this build has no MPI (CMake did not find it)");
#endif
    } else if (options.write_id) {
      id = NcclWorld::new_id();
      NcclWorld::write_id_file(options.id_file, id);
    } else {
      id = NcclWorld::read_id_file(options.id_file, options.timeout_s);
    }
  }

  std::vector<RankResult> results(static_cast<size_t>(w));
  std::vector<std::exception_ptr> errors(local.size());
  {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < local.size(); ++i) {
      threads.emplace_back([&, i] {
        try {
          run_rank(sh, local[i], id, results[static_cast<size_t>(local[i])]);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }

  RingLayerMeasurement m;
  m.ranks = w;
  m.forward = summarize(results, w, true);
  if (problem.backward) m.backward = summarize(results, w, false);
  const auto cells = static_cast<size_t>(w) * static_cast<size_t>(w);
  m.index_tiles.assign(cells, 0);
  m.index_columns.assign(cells, 0);
  for (int32_t gr = 0; gr < w; ++gr) {
    const RankResult& r = results[static_cast<size_t>(gr)];
    if (!r.ran) continue;
    m.shuffle_ms = std::max(m.shuffle_ms, median(r.shuffle_ms));
    m.estimate_ms = std::max(m.estimate_ms, median(r.estimate_ms));
    m.index_build_ms = std::max(m.index_build_ms, median(r.index_ms));
    for (int32_t t = 0; t < w; ++t) {
      const auto cell = static_cast<size_t>(gr) * static_cast<size_t>(w) + static_cast<size_t>(t);
      m.index_tiles[cell] = r.tiles[static_cast<size_t>(t)];
      m.index_columns[cell] = r.columns[static_cast<size_t>(t)];
    }
  }
  if (problem.pattern == PatternSource::estimate) {
    m.kept = results[static_cast<size_t>(local.front())].kept;
  } else if (problem.pattern == PatternSource::kept_sets) {
    m.kept = problem.kept;
  }
  if (options.return_outputs) {
    m.outputs.resize(static_cast<size_t>(w));
    for (const int32_t gr : local) m.outputs[static_cast<size_t>(gr)] = std::move(results[static_cast<size_t>(gr)].outputs);
  }
  return m;
}

}  // namespace sparsering
