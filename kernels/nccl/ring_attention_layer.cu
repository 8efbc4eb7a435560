// The ring attention layer on real GPUs (kernels/nccl/ring_attention_layer.hpp). One host thread
// per rank; per rank one compute stream and, per ring level, one K/V stream and (backward) one
// accumulator stream, each with its own communicator, so the outer hop posted at the start of an
// outer step overlaps the whole inner ring. Streams are ordered by events only: the compute of
// step t waits for the arrival event of its chunk; a receive into a reused buffer waits for the
// compute and the forwards of the chunk it replaces (RingTopology::kv_buffer_plan). The host
// stays one step ahead and waits, bounded (NcclWorld), for the compute of the previous step, so
// a dead peer is named with its step. RankRun holds one rank's resources; its phases (set up,
// upload inputs, layout shuffle, pattern, index build, forward ring, backward ring with the dK/dV
// ring, outputs) run in that order every iteration. A step whose index is empty still records
// its events and posts its hops, so stream order and the NCCL calls are those of every other
// step; only the attention launch, which would compute nothing, is left out.
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
#include "common/median.hpp"
#include "kernels/cuda/attn_bwd_delta.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/estimate_pattern.hpp"
#include "kernels/cuda/gpu_timer.hpp"
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
  explicit EventSet(size_t count) : events_(count) {}
  cudaEvent_t operator[](size_t i) const { return events_[i].get(); }

 private:
  std::vector<CudaEvent> events_;
};

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
  KeptSet kept;  ///< estimate: the selected sets of the last iteration
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
  PaddedKeptSet kept;  ///< kept_sets / dense: the padded sets every rank uploads
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

/// Events of one pass: per step start / end / arrival, per (step, level) sent and accumulator
/// hop, pass start / end, K/V ready, accumulators home.
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

/// Per-step kernel, step and wait times of a finished pass of `w` steps, from its events.
/// A step that launched no kernel computed nothing: its events only measure the stream's gap
/// between two records (a few microseconds), which is not kernel time.
PassSample read_pass_sample(const PassEvents& ev, int32_t w, const std::vector<bool>& launched) {
  PassSample sample;
  for (int32_t t = 0; t < w; ++t) {
    const auto tz = static_cast<size_t>(t);
    const cudaEvent_t previous_end = t == 0 ? ev.pass_start : ev.end[tz - 1];
    sample.compute_ms.push_back(launched[tz] ? elapsed_ms(ev.start[tz], ev.end[tz]) : 0.0);
    sample.step_ms.push_back(elapsed_ms(previous_end, ev.end[tz]));
    sample.wait_ms.push_back(elapsed_ms(previous_end, ev.start[tz]));
  }
  sample.total_ms = elapsed_ms(ev.pass_start, ev.pass_end);
  return sample;
}

/// `count` duplicates of the world communicator (collective: every rank in the same order).
std::vector<ncclComm_t> duplicate_comms(NcclWorld& world, int32_t count) {
  std::vector<ncclComm_t> comms;
  for (int32_t l = 0; l < count; ++l) comms.push_back(world.duplicate());
  return comms;
}

size_t uz(int64_t v) { return static_cast<size_t>(v); }

/// One rank of the ring for a whole run, on its own host thread: its communicators, streams,
/// buffers and events, and the phases of an iteration. Members are declared in the order they are
/// created, so they are released in reverse and the NCCL world (the device and the
/// communicators) goes last.
class RankRun {
 public:
  /// Sets up the rank: NCCL world and its duplicates (K/V per level, then dK/dV per level),
  /// streams, input shards, layout and ring buffers, the pattern upload, events.
  RankRun(const SharedRun& sh, int32_t global, const ncclUniqueId& id, RankResult& result)
      : sh_(sh), pr_(*sh.problem), opt_(*sh.options), topo_(sh.topology), plan_(sh.plan), g_(sh.geo),
        w_(sh.geo.ranks), levels_(sh.topology.levels()), global_(global),
        pos_(sh.topology.ring_rank(GlobalRank(global))), p_(pos_.value()), qe_(sh.geo.q_elems()),
        kve_(sh.geo.kv_elems()), wz_(static_cast<size_t>(w_)), lz_(static_cast<size_t>(levels_)), result_(result),
        world_(NcclWorldConfig{global, w_, opt_.devices.empty() ? global : opt_.devices[static_cast<size_t>(global)],
                               id, opt_.timeout_s}),
        kv_comm_(duplicate_comms(world_, levels_)),
        acc_comm_(pr_.backward ? duplicate_comms(world_, levels_) : std::vector<ncclComm_t>{}) {
    for (int32_t l = 0; l < levels_; ++l) {
      kv_stream_.push_back(std::make_unique<CudaStream>());
      acc_stream_.push_back(std::make_unique<CudaStream>());
    }
    cs_ = compute_.get();
    upload_inputs();
    allocate_ring_buffers();
    upload_pattern();
    fwd_ev_ = std::make_unique<PassEvents>(wz_, lz_);
    bwd_ev_ = std::make_unique<PassEvents>(wz_, lz_);
    shuffle_ev_ = std::make_unique<EventSet>(2);
  }

  /// Runs warmup + iterations of: layout shuffle, pattern, step indices, forward ring, backward
  /// ring; records the timed iterations' times and the last iteration's outputs in the result.
  void run() {
    const int32_t total_iterations = pr_.warmup + pr_.iterations;
    for (int32_t it = 0; it < total_iterations; ++it) {
      const bool timed = it >= pr_.warmup;
      const bool last = it + 1 == total_iterations;
      shuffle_layout(timed);
      if (pr_.pattern == PatternSource::estimate) estimate_pattern(timed);
      build_indices(timed);
      barrier("the barrier before the forward ring");
      forward_ring(timed);
      if (pr_.backward) {
        barrier("the barrier before the backward ring");
        backward_ring(timed, last);
      }
      if (last) collect_outputs();
    }
    result_.ran = true;
  }

 private:
  /// Generates Q, K, V (and dO) of the contiguous shard from the seed; the shuffle maps and the
  /// all-to-all staging buffers.
  void upload_inputs() {
    shard_q_ = DeviceBuffer<bf16_bits>(uz(qe_));
    shard_k_ = DeviceBuffer<bf16_bits>(uz(kve_));
    shard_v_ = DeviceBuffer<bf16_bits>(uz(kve_));
    shard_do_ = DeviceBuffer<bf16_bits>(pr_.backward ? uz(qe_) : 0);
    const int64_t first = int64_t{p_} * g_.local_tokens;
    launch_generate_ring_inputs(shard_q_.data(), pr_.seed, 0, g_.batch, g_.q_heads, g_.local_tokens, g_.head_dim, first, cs_);
    launch_generate_ring_inputs(shard_k_.data(), pr_.seed, 1, g_.batch, g_.kv_heads, g_.local_tokens, g_.head_dim, first, cs_);
    launch_generate_ring_inputs(shard_v_.data(), pr_.seed, 2, g_.batch, g_.kv_heads, g_.local_tokens, g_.head_dim, first, cs_);
    if (pr_.backward) {
      launch_generate_ring_inputs(shard_do_.data(), pr_.seed, 3, g_.batch, g_.q_heads, g_.local_tokens, g_.head_dim, first,
                                  cs_);
    }
    shuffle_q_ = std::make_unique<DeviceShuffle>(make_shuffle_maps(pr_.layout, p_, g_.batch * g_.q_heads));
    shuffle_kv_ = std::make_unique<DeviceShuffle>(make_shuffle_maps(pr_.layout, p_, g_.batch * g_.kv_heads));
    send_ = DeviceBuffer<bf16_bits>(uz(std::max(qe_, kve_)));
    recv_ = DeviceBuffer<bf16_bits>(uz(std::max(qe_, kve_)));
  }

  /// The layout buffers (Q, dO, own K/V), the K/V slots of the buffer plan, the outputs and, for
  /// the backward, the per-step dK/dV accumulators and their receive buffers.
  void allocate_ring_buffers() {
    q_ = DeviceBuffer<bf16_bits>(uz(qe_));
    dout_ = DeviceBuffer<bf16_bits>(pr_.backward ? uz(qe_) : 0);
    own_kv_ = DeviceBuffer<bf16_bits>(uz(2 * kve_));
    for (int32_t b = 0; b < plan_.buffers; ++b) slots_.emplace_back(uz(2 * kve_));
    out_ = DeviceBuffer<float>(uz(qe_));
    lse_ = DeviceBuffer<float>(uz(g_.lse_elems()));
    delta_ = DeviceBuffer<float>(pr_.backward ? uz(g_.lse_elems()) : 0);
    dq_ = DeviceBuffer<float>(pr_.backward ? uz(qe_) : 0);
    if (pr_.backward) {
      for (int32_t t = 0; t < w_; ++t) local_acc_.emplace_back(uz(2 * kve_));
      if (w_ > 1) {
        for (int32_t t = 0; t < w_; ++t) {
          for (const AccumulatorHop& hop : topo_.accumulator_hops(pos_, t)) {
            acc_recv_.emplace(std::make_tuple(hop.level, hop.recv_step, hop.recv_lands), DeviceBuffer<float>(uz(2 * kve_)));
          }
        }
      }
    }
    barrier_value_ = DeviceBuffer<float>(1);
  }

  /// Kept sets and dense: the padded sets uploaded once (timed as the pattern time). Estimate:
  /// only the capacity, the sets are selected every iteration.
  void upload_pattern() {
    kept_capacity_ = sh_.kept.capacity;
    if (pr_.pattern != PatternSource::estimate) {
      const auto t0 = std::chrono::steady_clock::now();
      vcount_ = DeviceBuffer<int32_t>(sh_.kept.vertical_count);
      vkeys_ = DeviceBuffer<int32_t>(sh_.kept.vertical_keys);
      scount_ = DeviceBuffer<int32_t>(sh_.kept.slash_count);
      soffs_ = DeviceBuffer<int32_t>(sh_.kept.slash_offsets);
      result_.estimate_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    } else {
      kept_capacity_ = static_cast<int32_t>(std::min<int64_t>(pr_.capacity, pr_.layout.seq_len_tokens()));
    }
  }

  /// The layout all-to-all of Q, K, V (and dO) from the contiguous shards; timed with events.
  void shuffle_layout(bool timed) {
    world_.set_phase("layout shuffle");
    const EventSet& ev = *shuffle_ev_;
    SPARSERING_CUDA_CHECK(cudaEventRecord(ev[0], cs_));
    shuffle_tensor(shard_q_.data(), q_.data(), *shuffle_q_);
    shuffle_tensor(shard_k_.data(), own_kv_.data(), *shuffle_kv_);
    shuffle_tensor(shard_v_.data(), own_kv_.data() + kve_, *shuffle_kv_);
    if (pr_.backward) shuffle_tensor(shard_do_.data(), dout_.data(), *shuffle_q_);
    SPARSERING_CUDA_CHECK(cudaEventRecord(ev[1], cs_));
    world_.wait_event(ev[1], "the layout shuffle");
    if (timed) result_.shuffle_ms.push_back(elapsed_ms(ev[0], ev[1]));
  }

  /// Estimate: selects the kept sets across shards into the pattern buffers (host-timed).
  void estimate_pattern(bool timed) {
    world_.set_phase("pattern estimation");
    const auto t0 = std::chrono::steady_clock::now();
    estimate_kept_sets(sh_, world_, p_, q_.data(), own_kv_.data(), cs_, vcount_, vkeys_, scount_, soffs_);
    if (timed) {
      result_.estimate_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }

  /// Builds the index of every step (K/V chunk of its source position) on the GPU; host-timed.
  void build_indices(bool timed) {
    const KeptSetsView kept_view{g_.rows(), kept_capacity_, vcount_.data(), vkeys_.data(), scount_.data(), soffs_.data()};
    world_.set_phase("index build");
    const auto t0 = std::chrono::steady_clock::now();
    index_.clear();
    result_.tiles.assign(wz_, 0);
    result_.columns.assign(wz_, 0);
    for (int32_t t = 0; t < w_; ++t) {
      const RingPosition rp{pr_.layout, p_, topo_.chunk_source(pos_, t).value()};
      index_.push_back(launch_build_sparse_index(kept_view, rp, pr_.block_q, pr_.block_k, cs_));
      result_.tiles[static_cast<size_t>(t)] = index_.back().tiles;
      result_.columns[static_cast<size_t>(t)] = index_.back().columns;
    }
    if (timed) {
      result_.index_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }

  /// The forward ring: per step, post the K/V hops, wait for the chunk, merge the step's
  /// attention into (out, lse); the host waits for step t-1 while step t is queued.
  void forward_ring(bool timed) {
    PassEvents& ev = *fwd_ev_;
    std::fill(ev.sent_recorded.begin(), ev.sent_recorded.end(), false);
    SPARSERING_CUDA_CHECK(cudaMemsetAsync(out_.data(), 0, out_.bytes(), cs_));
    launch_fill_floats(lse_.data(), g_.lse_elems(), -std::numeric_limits<float>::infinity(), cs_);
    SPARSERING_CUDA_CHECK(cudaMemcpyAsync(slots_[0].data(), own_kv_.data(), own_kv_.bytes(), cudaMemcpyDeviceToDevice, cs_));
    SPARSERING_CUDA_CHECK(cudaEventRecord(ev.ready, cs_));
    SPARSERING_CUDA_CHECK(cudaEventRecord(ev.pass_start, cs_));
    for (int32_t t = 0; t < w_; ++t) {
      world_.set_phase(str("forward ring step ", t));
      post_kv(RingPass::forward, ev, t);
      if (t > 0) SPARSERING_CUDA_CHECK(cudaStreamWaitEvent(cs_, ev.arrived[static_cast<size_t>(t)], 0));
      SPARSERING_CUDA_CHECK(cudaEventRecord(ev.start[static_cast<size_t>(t)], cs_));
      if (step_has_work(t)) {
        SparseAttnFwdParams fp;
        fp.shape = pr_.shape;
        fp.position = RingPosition{pr_.layout, p_, topo_.chunk_source(pos_, t).value()};
        fp.index = index_[static_cast<size_t>(t)].view();
        fp.softmax_scale = sh_.softmax_scale;
        fp.q = q_.data();
        fp.k = chunk_ptr(t);
        fp.v = chunk_ptr(t) + kve_;
        fp.out = out_.data();
        fp.lse = lse_.data();
        launch_sparse_attn_fwd(fp, cs_);
      }
      SPARSERING_CUDA_CHECK(cudaEventRecord(ev.end[static_cast<size_t>(t)], cs_));
      if (opt_.after_step) opt_.after_step(global_, RingPass::forward, t);
      if (t > 0) {
        world_.set_phase(str("forward ring step ", t - 1));
        world_.wait_event(ev.end[static_cast<size_t>(t - 1)], describe_wait(t - 1));
      }
    }
    world_.set_phase(str("forward ring step ", w_ - 1));
    world_.wait_event(ev.end[wz_ - 1], describe_wait(w_ - 1));
    SPARSERING_CUDA_CHECK(cudaEventRecord(ev.pass_end, cs_));
    for (auto& s : kv_stream_) world_.wait_stream(s->get(), "the forward K/V hops to finish");
    world_.wait_event(ev.pass_end, "the end of the forward ring");
    if (timed) result_.forward.push_back(read_pass_sample(ev, w_, steps_with_work()));
  }

  /// The backward ring: delta pre-pass, then per step the K/V hops, the step's dQ and local
  /// dK/dV, and the dK/dV hops (mirror route) that bring the own chunk's sums home. On the last
  /// iteration with return_outputs, downloads dQ, dK and dV.
  void backward_ring(bool timed, bool last) {
    PassEvents& ev = *bwd_ev_;
    std::fill(ev.sent_recorded.begin(), ev.sent_recorded.end(), false);
    SPARSERING_CUDA_CHECK(cudaMemsetAsync(dq_.data(), 0, dq_.bytes(), cs_));
    for (auto& b : local_acc_) SPARSERING_CUDA_CHECK(cudaMemsetAsync(b.data(), 0, b.bytes(), cs_));
    SPARSERING_CUDA_CHECK(cudaMemcpyAsync(slots_[0].data(), own_kv_.data(), own_kv_.bytes(), cudaMemcpyDeviceToDevice, cs_));
    SPARSERING_CUDA_CHECK(cudaEventRecord(ev.ready, cs_));
    SPARSERING_CUDA_CHECK(cudaEventRecord(ev.pass_start, cs_));
    AttnBwdDeltaParams dp;
    dp.shape = pr_.shape;
    dp.dout = dout_.data();
    dp.out = out_.data();
    dp.delta = delta_.data();
    launch_attn_bwd_delta(dp, cs_);
    float* final_acc = local_acc_[0].data();
    for (int32_t t = 0; t < w_; ++t) {
      world_.set_phase(str("backward ring step ", t));
      post_kv(RingPass::backward, ev, t);
      if (t > 0) SPARSERING_CUDA_CHECK(cudaStreamWaitEvent(cs_, ev.arrived[static_cast<size_t>(t)], 0));
      SPARSERING_CUDA_CHECK(cudaEventRecord(ev.start[static_cast<size_t>(t)], cs_));
      if (step_has_work(t)) {
        SparseAttnBwdParams bp;
        bp.shape = pr_.shape;
        bp.position = RingPosition{pr_.layout, p_, topo_.chunk_source(pos_, t).value()};
        bp.index = index_[static_cast<size_t>(t)].view();
        bp.softmax_scale = sh_.softmax_scale;
        bp.q = q_.data();
        bp.k = chunk_ptr(t);
        bp.v = chunk_ptr(t) + kve_;
        bp.dout = dout_.data();
        bp.lse = lse_.data();
        bp.delta = delta_.data();
        bp.dq = dq_.data();
        bp.dk = local_acc_[static_cast<size_t>(t)].data();
        bp.dv = local_acc_[static_cast<size_t>(t)].data() + kve_;
        launch_sparse_attn_bwd(bp, cs_);
      }
      SPARSERING_CUDA_CHECK(cudaEventRecord(ev.end[static_cast<size_t>(t)], cs_));
      if (w_ > 1) post_accumulators(ev, t, final_acc);
      if (opt_.after_step) opt_.after_step(global_, RingPass::backward, t);
      if (t > 0) {
        world_.set_phase(str("backward ring step ", t - 1));
        world_.wait_event(ev.end[static_cast<size_t>(t - 1)], describe_wait(t - 1));
      }
    }
    world_.set_phase(str("backward ring step ", w_ - 1));
    world_.wait_event(ev.end[wz_ - 1], describe_wait(w_ - 1));
    if (w_ > 1) SPARSERING_CUDA_CHECK(cudaStreamWaitEvent(cs_, ev.final_home, 0));
    SPARSERING_CUDA_CHECK(cudaEventRecord(ev.pass_end, cs_));
    world_.wait_event(ev.pass_end, "the dK/dV accumulators of the own chunk to come home");
    for (auto& s : kv_stream_) world_.wait_stream(s->get(), "the backward K/V hops to finish");
    for (auto& s : acc_stream_) world_.wait_stream(s->get(), "the dK/dV hops to finish");
    if (timed) {
      PassSample sample = read_pass_sample(ev, w_, steps_with_work());
      sample.tail_ms = elapsed_ms(ev.end[wz_ - 1], ev.pass_end);
      result_.backward.push_back(sample);
    }
    if (last && opt_.return_outputs) {
      const std::vector<float> acc = [&] {
        std::vector<float> host(uz(2 * kve_));
        SPARSERING_CUDA_CHECK(cudaMemcpy(host.data(), final_acc, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
        return host;
      }();
      result_.outputs.dq = dq_.download();
      result_.outputs.dk.assign(acc.begin(), acc.begin() + kve_);
      result_.outputs.dv.assign(acc.begin() + kve_, acc.end());
    }
  }

  /// Posts the dK/dV accumulator hops of backward step t, inner level first (mirror route);
  /// points `final_acc` at the buffer where the own chunk's sums land.
  void post_accumulators(PassEvents& ev, int32_t t, float*& final_acc) {
    for (const AccumulatorHop& hop : topo_.accumulator_hops(pos_, t)) {
      const auto l = static_cast<size_t>(hop.level);
      cudaStream_t s = acc_stream_[l]->get();
      float* value = nullptr;
      if (hop.level == 0) {
        SPARSERING_CUDA_CHECK(cudaStreamWaitEvent(s, ev.end[static_cast<size_t>(t)], 0));
        value = local_acc_[static_cast<size_t>(hop.send_step)].data();
      } else {
        SPARSERING_CUDA_CHECK(cudaStreamWaitEvent(s, ev.acc[static_cast<size_t>(t) * lz_ + l - 1], 0));
        value = acc_recv_.at(std::make_tuple(hop.level - 1, hop.send_step, true)).data();
      }
      if (hop.add_incoming) {
        launch_add_floats(value, acc_recv_.at(std::make_tuple(hop.level, hop.send_step, false)).data(), 2 * kve_, s);
      }
      float* target = acc_recv_.at(std::make_tuple(hop.level, hop.recv_step, hop.recv_lands)).data();
      SPARSERING_NCCL_CHECK(ncclGroupStart());
      SPARSERING_NCCL_CHECK(ncclSend(value, uz(2 * kve_), ncclFloat, hop.to.value(), acc_comm_[l], s));
      SPARSERING_NCCL_CHECK(ncclRecv(target, uz(2 * kve_), ncclFloat, hop.from.value(), acc_comm_[l], s));
      SPARSERING_NCCL_CHECK(ncclGroupEnd());
      world_.wait_comm(acc_comm_[l], str("posting the level-", hop.level, " dK/dV hop of backward step ", t));
      SPARSERING_CUDA_CHECK(cudaEventRecord(ev.acc[static_cast<size_t>(t) * lz_ + l], s));
      if (hop.recv_final) {
        final_acc = target;
        SPARSERING_CUDA_CHECK(cudaEventRecord(ev.final_home, s));
      }
    }
  }

  /// Last iteration: the forward outputs (return_outputs) and, for estimate, the selected sets.
  void collect_outputs() {
    if (opt_.return_outputs) {
      result_.outputs.out = out_.download();
      result_.outputs.lse = lse_.download();
    }
    if (pr_.pattern == PatternSource::estimate) {
      PaddedKeptSet selected;
      selected.rows = g_.rows();
      selected.capacity = kept_capacity_;
      selected.vertical_count = vcount_.download();
      selected.vertical_keys = vkeys_.download();
      selected.slash_count = scount_.download();
      selected.slash_offsets = soffs_.download();
      result_.kept = KeptSet::from_padded(selected, pr_.layout.seq_len_tokens());
    }
  }

  /// Whether step t's index holds work: an empty (rank, step) cell launches no kernel.
  bool step_has_work(int32_t t) const {
    const DeviceSparseIndex& index = index_[static_cast<size_t>(t)];
    return index.tiles > 0 || index.columns > 0;
  }

  std::vector<bool> steps_with_work() const {
    std::vector<bool> launched;
    for (int32_t t = 0; t < w_; ++t) launched.push_back(step_has_work(t));
    return launched;
  }

  /// The K/V slot that holds the chunk of step t.
  bf16_bits* chunk_ptr(int32_t t) { return slots_[static_cast<size_t>(plan_.slot[static_cast<size_t>(t)])].data(); }

  /// Posts the K/V hops of step t (outer level first).
  void post_kv(RingPass pass, PassEvents& ev, int32_t t) {
    for (const KvHop& hop : topo_.kv_hops(pos_, t)) {
      const auto l = static_cast<size_t>(hop.level);
      cudaStream_t s = kv_stream_[l]->get();
      SPARSERING_CUDA_CHECK(cudaStreamWaitEvent(s, t == 0 ? ev.ready : ev.arrived[static_cast<size_t>(t)], 0));
      const int32_t prev = plan_.previous_holder[static_cast<size_t>(hop.recv_step)];
      if (prev >= 0) {
        SPARSERING_CUDA_CHECK(cudaStreamWaitEvent(s, ev.end[static_cast<size_t>(prev)], 0));
        for (size_t m = 0; m < lz_; ++m) {
          if (ev.sent_recorded[static_cast<size_t>(prev) * lz_ + m]) {
            SPARSERING_CUDA_CHECK(cudaStreamWaitEvent(s, ev.sent[static_cast<size_t>(prev) * lz_ + m], 0));
          }
        }
      }
      SPARSERING_NCCL_CHECK(ncclGroupStart());
      SPARSERING_NCCL_CHECK(ncclSend(chunk_ptr(t), uz(2 * kve_), ncclBfloat16, hop.to.value(), kv_comm_[l], s));
      SPARSERING_NCCL_CHECK(ncclRecv(chunk_ptr(hop.recv_step), uz(2 * kve_), ncclBfloat16, hop.from.value(), kv_comm_[l], s));
      SPARSERING_NCCL_CHECK(ncclGroupEnd());
      world_.wait_comm(kv_comm_[l], str("posting the level-", hop.level, " K/V hop of ", pass_name(pass), " step ", t));
      SPARSERING_CUDA_CHECK(cudaEventRecord(ev.arrived[static_cast<size_t>(hop.recv_step)], s));
      SPARSERING_CUDA_CHECK(cudaEventRecord(ev.sent[static_cast<size_t>(t) * lz_ + l], s));
      ev.sent_recorded[static_cast<size_t>(t) * lz_ + l] = true;
    }
  }

  /// What the host waits for at the end of step t, for error messages.
  std::string describe_wait(int32_t t) const {
    if (t == 0) return std::string("the compute of step 0 (own K/V chunk)");
    const int32_t src = topo_.chunk_source(pos_, t).value();
    const int32_t level = topo_.schedule().arrival_level(t);
    return str("the compute of step ", t, " (K/V chunk of ring position ", src, ", rank ",
               topo_.global_rank(RingRank(src)).value(), ", arriving over level ", level, " from rank ",
               topo_.predecessor(pos_, level).value(), ")");
  }

  /// A one-float all-reduce on the compute stream, waited for: every rank reached `what`.
  void barrier(const char* what) {
    SPARSERING_NCCL_CHECK(
        ncclAllReduce(barrier_value_.data(), barrier_value_.data(), 1, ncclFloat, ncclSum, world_.comm(), cs_));
    world_.wait_comm(world_.comm(), what);
    world_.wait_stream(cs_, what);
  }

  /// One tensor's layout all-to-all: pack by destination, grouped sends and receives, scatter.
  void shuffle_tensor(const bf16_bits* shard, bf16_bits* dst, const DeviceShuffle& m) {
    const int64_t rows = static_cast<int64_t>(m.host.send_rows.size());
    launch_copy_rows(send_.data(), nullptr, shard, m.send_rows.data(), rows, g_.head_dim, cs_);
    SPARSERING_NCCL_CHECK(ncclGroupStart());
    int64_t offset = 0;
    for (int32_t d = 0; d < w_; ++d) {
      const int64_t count = m.host.send_counts[static_cast<size_t>(d)];
      if (count > 0) {
        SPARSERING_NCCL_CHECK(ncclSend(send_.data() + offset * g_.head_dim, uz(count * g_.head_dim), ncclBfloat16,
                                       topo_.global_rank(RingRank(d)).value(), world_.comm(), cs_));
      }
      offset += count;
    }
    offset = 0;
    for (int32_t s = 0; s < w_; ++s) {
      const int64_t count = m.host.recv_counts[static_cast<size_t>(s)];
      if (count > 0) {
        SPARSERING_NCCL_CHECK(ncclRecv(recv_.data() + offset * g_.head_dim, uz(count * g_.head_dim), ncclBfloat16,
                                       topo_.global_rank(RingRank(s)).value(), world_.comm(), cs_));
      }
      offset += count;
    }
    SPARSERING_NCCL_CHECK(ncclGroupEnd());
    world_.wait_comm(world_.comm(), "posting the layout shuffle");
    launch_copy_rows(dst, m.recv_rows.data(), recv_.data(), nullptr, rows, g_.head_dim, cs_);
  }

  // Run constants.
  const SharedRun& sh_;
  const RingLayerProblem& pr_;
  const RingRuntimeOptions& opt_;
  const RingTopology& topo_;
  const KvBufferPlan& plan_;
  const Geometry& g_;
  const int32_t w_;
  const int32_t levels_;
  const int32_t global_;
  const RingRank pos_;
  const int32_t p_;
  const int64_t qe_;   ///< Q / dO / out elements of the rank
  const int64_t kve_;  ///< elements of one of K, V (a K/V chunk is 2 x kve_)
  const size_t wz_;
  const size_t lz_;
  RankResult& result_;

  // Resources, in creation order.
  NcclWorld world_;
  std::vector<ncclComm_t> kv_comm_, acc_comm_;  ///< per level; owned by world_
  CudaStream compute_;
  std::vector<std::unique_ptr<CudaStream>> kv_stream_, acc_stream_;  ///< per level
  cudaStream_t cs_ = nullptr;                                       ///< compute_.get()
  DeviceBuffer<bf16_bits> shard_q_, shard_k_, shard_v_, shard_do_;
  std::unique_ptr<DeviceShuffle> shuffle_q_, shuffle_kv_;
  DeviceBuffer<bf16_bits> send_, recv_;
  DeviceBuffer<bf16_bits> q_, dout_, own_kv_;
  std::vector<DeviceBuffer<bf16_bits>> slots_;
  DeviceBuffer<float> out_, lse_, delta_, dq_;
  std::vector<DeviceBuffer<float>> local_acc_;
  std::map<std::tuple<int32_t, int32_t, bool>, DeviceBuffer<float>> acc_recv_;
  DeviceBuffer<float> barrier_value_;
  DeviceBuffer<int32_t> vcount_, vkeys_, scount_, soffs_;
  int32_t kept_capacity_ = 1;
  std::unique_ptr<PassEvents> fwd_ev_, bwd_ev_;
  std::unique_ptr<EventSet> shuffle_ev_;
  std::vector<DeviceSparseIndex> index_;
};

void run_rank(const SharedRun& sh, int32_t global, const ncclUniqueId& id, RankResult& result) {
  RankRun rank(sh, global, id, result);
  rank.run();
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
    require(problem.kept.rows() == static_cast<int64_t>(rows) && problem.kept.seq_len_tokens() == layout.seq_len_tokens(),
            "kept sets have ", problem.kept.rows(), " rows over ", problem.kept.seq_len_tokens(),
            " tokens, expected batch x q_heads = ", rows, " rows over the layout's ", layout.seq_len_tokens());
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
  if (problem.pattern == PatternSource::kept_sets) {
    sh.kept = problem.kept.padded();
  } else if (problem.pattern == PatternSource::dense) {
    sh.kept = KeptSet::dense(sh.geo.rows(), problem.layout.seq_len_tokens()).padded();
  }
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
