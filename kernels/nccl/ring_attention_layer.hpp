// One attention layer of a plan run on real GPUs over NCCL: the layout shuffle, the sparse
// pattern (given, estimated online across shards, or dense), the per-step index build, and the
// forward and backward rings (flat or hierarchical, RingSchedule), every (rank, step) timed with
// CUDA events. The validate command and the tests drive it through run_ring_attention_layer.
// This header is plain C++ (no CUDA or NCCL headers) so host-compiled code can include it.
// Tested in tests/nccl/ring_attention_layer_test.cpp against the single-GPU kernels run over the
// whole sequence (W = 1); docs/VALIDATION.md, docs/method.md sections 3-5.
//
// Process model: one thread per GPU. In-process (the default) the call drives every global rank
// of the ring; with RingRuntimeOptions::id_file several processes on one host (e.g. one per
// emulated node, NCCL_HOSTID) each drive the ranks listed in local_ranks and share the NCCL id
// through the file; across hosts (mpirun / srun) RingRuntimeOptions::mpi_id shares it through MPI.
//
// Data: Q, K, V and dO are bf16 values drawn from (seed, tensor, batch, head, global token, d)
// (ring_input_bits, tensors 0..3 = Q, K, V, dO), so any rank and the single-GPU reference regenerate the same tensors. Each
// ring position starts from its contiguous shard (tokens [p*N/W, (p+1)*N/W)) and one all-to-all
// moves the tokens into the plan's layout; outputs stay in the plan's layout.
//
// Backward route of the fp32 dK/dV accumulators: AccumulatorRoute::mirror (sim/ring/
// ring_simulation.hpp): they follow the K/V ring at every level and land on the chunk's owner
// (kernels/ring/ring_topology.hpp, accumulator_hops).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/attention_params.hpp"
#include "kernels/ring/ring_error.hpp"
#include "kernels/ring/ring_input_values.hpp"
#include "core/token_layout.hpp"

namespace sparsering {

/// Where the vertical-slash pattern of the layer comes from.
enum class PatternSource : int32_t {
  kept_sets = 0,  ///< given kept sets (RingLayerProblem::kept), e.g. from a trace
  estimate = 1,   ///< online: last_q queries against every shard, recall (top-p) selection
  dense = 2,      ///< every causal pair (an index that keeps every slash offset)
};

/// The pass a ring step belongs to (error messages, timings, the test hook).
enum class RingPass : int32_t { forward = 0, backward = 1 };

/// Kept sets of every index row (row = batch x q_heads + head of the per-rank shape), in global
/// coordinates, as kernels/sparse_index.hpp defines them.
struct RingKeptSets {
  std::vector<std::vector<int32_t>> vertical_keys;  ///< [row] global key positions, ascending, unique
  std::vector<std::vector<int32_t>> slash_offsets;  ///< [row] offsets q - k >= 0, ascending, unique (0 implied)
};

/// One attention layer of a plan on W = layout.ranks() GPUs (context parallel only: head and data
/// parallel are folded into `shape`, which is already per rank).
struct RingLayerProblem {
  TokenLayout layout;                ///< over the W ring positions (make_token_layout)
  std::vector<int64_t> level_sizes;  ///< ring levels inner -> outer, product W; empty = flat
  std::vector<int32_t> ring_order;   ///< ring position -> global rank (permutation of 0..W-1); empty = identity
  AttentionShape shape;              ///< per rank: q_len = kv_len = layout.local_len()
  int32_t block_q = 64;              ///< query block (tokens) of the index and the kernels
  int32_t block_k = 64;              ///< key tile (tokens)
  PatternSource pattern = PatternSource::kept_sets;
  RingKeptSets kept;                 ///< for kept_sets: batch x q_heads rows
  double recall = 0.95;              ///< for estimate: top-p target in (0, 1]
  int32_t last_q = 64;               ///< for estimate: queries scored (the last of the sequence)
  int32_t capacity = 4096;           ///< for estimate: cap on kept verticals / slashes per row
  float softmax_scale = 0.0f;        ///< 0 = 1 / sqrt(head_dim)
  bool backward = true;              ///< run the backward ring after the forward one
  uint64_t seed = 1;                 ///< input values (ring_input_bits)
  int32_t warmup = 0;                ///< untimed repetitions of the whole layer
  int32_t iterations = 1;            ///< timed repetitions (medians are reported), >= 1
};

/// How the runtime runs.
struct RingRuntimeOptions {
  std::vector<int32_t> devices;   ///< global rank -> CUDA device of this host; empty = device g for rank g
  double timeout_s = 60.0;        ///< bound on every wait; on expiry the rank aborts its communicators
  bool return_outputs = false;    ///< download out, lse, dq, dk, dv of the last iteration
  std::string id_file;            ///< several processes: the NCCL id travels through this file
  std::vector<int32_t> local_ranks;  ///< with id_file: the global ranks this process drives
  bool write_id = false;          ///< with id_file: this process creates the id and writes the file
  /// Several processes started by mpirun / srun: MPI (initialised by the caller) broadcasts the
  /// NCCL id from MPI rank 0; local_ranks lists this process's ranks. InputError when built without MPI.
  bool mpi_id = false;
  /// Test hook, called on a rank's host thread after it queued a ring step (not timed).
  std::function<void(int32_t global_rank, RingPass pass, int32_t step)> after_step;
};

/// Host copies of one rank's results, in the plan's layout (local token order of its position).
struct RingRankOutputs {
  std::vector<float> out;  ///< (B, Hq, S, D) forward output
  std::vector<float> lse;  ///< (B, Hq, S) natural-log LSE
  std::vector<float> dq;   ///< (B, Hq, S, D), empty without backward
  std::vector<float> dk;   ///< (B, Hkv, S, D) of the rank's own chunk, summed over the ring
  std::vector<float> dv;   ///< (B, Hkv, S, D)
};

/// Timings of one pass; per (global rank g, step t) entries at [g * W + t]; medians over the
/// timed iterations.
struct RingPassTimes {
  std::vector<double> compute_ms;    ///< the attention kernel(s) of the step
  std::vector<double> step_ms;       ///< end of the previous step's compute -> end of this one (t = 0: from pass start)
  std::vector<double> recv_wait_ms;  ///< end of the previous compute -> start of this one (waiting for data)
  std::vector<double> rank_total_ms; ///< [g] pass start -> last compute done (backward: accumulators home)
  std::vector<double> rank_compute_ms;  ///< [g] sum of compute_ms
  double wall_ms = 0.0;              ///< max over ranks of rank_total_ms
  double exposed_comm_ms = 0.0;      ///< max over ranks of sum over steps of recv_wait_ms (+ backward tail)
};

/// What a run measured (medians over iterations; max over ranks where a single figure is given).
struct RingLayerMeasurement {
  int32_t ranks = 0;                 ///< W
  RingPassTimes forward;
  RingPassTimes backward;            ///< empty vectors without backward
  double shuffle_ms = 0.0;           ///< the layout all-to-all of Q, K, V (and dO)
  double estimate_ms = 0.0;          ///< pattern estimation and selection (estimate), or upload
  double index_build_ms = 0.0;       ///< building the W step indices
  std::vector<int64_t> index_tiles;  ///< [g * W + t] kept tiles of the step index
  std::vector<int64_t> index_columns;///< [g * W + t] kept vertical columns
  RingKeptSets kept;                 ///< the kept sets used (estimate: as selected; identical on every rank)
  std::vector<RingRankOutputs> outputs;  ///< [g] with return_outputs, for the ranks driven here
};

/// Runs the layer (warmup + iterations) and returns its timings. Throws InputError for a bad
/// problem (sizes, ring order, levels, kept sets out of range, too few GPUs), RingError when a
/// peer dies or stalls (names the rank, the pass, the step and what it waited for) and
/// CudaError for a CUDA failure.
RingLayerMeasurement run_ring_attention_layer(const RingLayerProblem& problem, const RingRuntimeOptions& options);

/// Checks a problem without touching a GPU: layout, levels, ring order, shape, blocks, kept sets.
/// Throws InputError naming the field and value.
void validate_ring_layer_problem(const RingLayerProblem& problem);

}  // namespace sparsering
