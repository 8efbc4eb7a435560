// Plan config (configs/plans/*.yaml, docs/formats.md section 2): the parallel layout of one training run that
// the tuner writes and simulate / validate / export read: degrees, ring hierarchy and order, token
// layout, sparse settings, communication primitive, memory options, and the prediction that
// produced it. Schema reference: docs/configs.md. Tested in tests/config/plan_config_test.cpp.
//
// Ranks. The plan's world has context_parallel x head_parallel x data_parallel ranks, and
// `ring_order` lists every one of them exactly once (a permutation of 0 .. world-1, global ranks
// of the cluster). It is cut into head_parallel x data_parallel consecutive rings of
// context_parallel entries: entry (d x head_parallel + h) x context_parallel + p is the global
// rank at ring position p of the context-parallel ring of head-parallel index h and data-parallel
// replica d. Ring positions decompose over `ring.levels` (inner -> outer) with the inner index
// varying fastest: p = i0 + s0 x (i1 + s1 x (i2 + ...)). A hop of level l joins two positions that
// differ by one (cyclically) in i_l only. Positions p and p+1 are ring neighbours of the flat ring.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/cluster_config.hpp"
#include "sim/config/model_config.hpp"
#include "core/token_layout.hpp"

namespace sparsering {

enum class CommPrimitive : int32_t { p2p = 0, all_gather = 1 };
enum class RecomputeMode : int32_t { none = 0, selective = 1, full = 2 };

/// One level of the ring hierarchy.
struct RingLevel {
  int64_t size = 1;                 ///< ranks in one ring of this level
  LinkKind link = LinkKind::nvlink; ///< slowest link its hops cross
};

/// Dynamic sparse attention settings (docs/algorithm.md sections 2-3).
struct SparseSettings {
  bool enabled = true;          ///< false = dense ring attention
  int64_t block_q = 64;         ///< query block (tokens): 64, 128, 256 or 512 (core/kernel_support.hpp)
  int64_t block_k = 64;         ///< key tile (tokens): 64, 128, 256 or 512
  double recall = 0.95;         ///< top-p mass target for verticals and slashes, in (0, 1]
  int64_t max_verticals = 4096; ///< cap on kept vertical columns per head
  int64_t max_slashes = 4096;   ///< cap on kept slash offsets per head
  int64_t last_q = 64;          ///< queries used to estimate the pattern
};

/// What the simulator predicted for the plan (written by the tuner or `simulate`).
struct PlanPrediction {
  std::string sparsering_version;
  std::map<std::string, std::string> input_hashes;  ///< e.g. model, cluster, trace -> "sha256:..."
  std::vector<double> attention_fwd_ms;  ///< per layer
  std::vector<double> attention_bwd_ms;  ///< per layer
  double step_ms = 0.0;                  ///< one training step
  double tokens_per_s = 0.0;             ///< training throughput, whole cluster
  double worker_imbalance = 1.0;         ///< max / mean of per-rank attention work (>= 1)
  double step_imbalance = 1.0;           ///< mean over ring steps of per-step max / mean (>= 1)
  double exposed_comm_share = 0.0;       ///< share of ring steps whose KV transfer outlasts compute
  double peak_memory_gib = 0.0;          ///< per GPU
};

/// Where the token layout is established: by all-to-alls of Q, K, V around every attention
/// (`per_layer`) or once by the data loader (`loader`, no cost in the step).
enum class LayoutShuffleMode : int32_t { per_layer = 0, loader = 1 };

struct PlanConfig {
  std::string name;                     ///< optional label
  std::string model;                    ///< model reference as written (name or path)
  std::string cluster;                  ///< cluster reference as written
  std::string trace;                    ///< optional trace path as written
  std::filesystem::path model_path;     ///< resolved by load_plan; empty when parsed from a string
  std::filesystem::path cluster_path;   ///< resolved by load_plan
  std::filesystem::path trace_path;     ///< resolved by load_plan (relative to the plan file)
  int64_t seq_len_tokens = 0;           ///< tokens of one sequence
  int64_t micro_batch_sequences = 1;    ///< sequences per micro batch per data-parallel replica
  int64_t context_parallel = 1;         ///< ring size
  int64_t head_parallel = 1;            ///< Ulysses degree (heads split by all-to-all)
  int64_t data_parallel = 1;            ///< replicas
  std::vector<RingLevel> ring_levels;   ///< inner -> outer; sizes multiply to context_parallel
  std::vector<int64_t> ring_order;      ///< global ranks, see the file comment
  TokenLayout layout;                   ///< over context_parallel ranks
  SparseSettings sparse;
  CommPrimitive comm = CommPrimitive::p2p;
  RecomputeMode recompute = RecomputeMode::none;
  /// Optional key `layout_shuffle`; absent: striped layouts per layer, the others by the loader.
  std::optional<LayoutShuffleMode> layout_shuffle;
  int64_t zero_stage = 0;               ///< ZeRO / FSDP sharding stage 0-3, over every rank of the world (as Megatron's distributed optimizer and FSDP shard over data x context parallel)
  std::optional<PlanPrediction> prediction;
  std::filesystem::path source_path;

  /// context_parallel x head_parallel x data_parallel.
  int64_t world_size() const { return context_parallel * head_parallel * data_parallel; }
  /// Number of context-parallel rings: head_parallel x data_parallel.
  int64_t ring_count() const { return head_parallel * data_parallel; }
  /// Global rank at position `position` of ring `ring` (ring = d x head_parallel + h).
  /// Preconditions: 0 <= ring < ring_count(), 0 <= position < context_parallel.
  int64_t global_rank(int64_t ring, int64_t position) const;
  /// The global ranks of ring `ring` in ring order.
  std::vector<int64_t> ring_members(int64_t ring) const;
  /// Index of `level` of the ring position (i_level in the file comment).
  int64_t level_index(int64_t position, size_t level) const;
  /// Position reached from `position` by one hop at `level` (i_level + 1 mod size, others kept).
  int64_t next_position(int64_t position, size_t level) const;
};

/// Parses a plan and checks everything the plan alone determines: degrees, level sizes (product ==
/// context_parallel), ring_order (a permutation of 0 .. world-1), token layout divisibility (through
/// make_token_layout), sparse settings (block sizes the CUDA kernels support, core/kernel_support.hpp),
/// prediction. Does not load the model or cluster.
/// Errors are InputError prefixed with `source_name`, naming the key path and value.
PlanConfig parse_plan(const std::string& yaml_text, std::string_view source_name);

/// Reads and parses a plan file and resolves its model, cluster and trace references.
PlanConfig load_plan(const std::filesystem::path& path);

/// Checks a plan against its model and cluster: world size == cluster GPUs, head_parallel divides
/// the query heads (and divides or is a multiple of the KV heads), ring_order ranks exist, each ring
/// level's link is the slowest link its hops cross, referenced names match, and the prediction has
/// one entry per layer. Throws InputError naming the key path and values.
void check_plan_against(const PlanConfig& plan, const ModelConfig& model, const ClusterConfig& cluster);

/// A plan with the configs it references, loaded and cross-checked.
struct LoadedPlan {
  PlanConfig plan;
  ModelConfig model;
  ClusterConfig cluster;
};

/// load_plan, then load_model and load_cluster on the resolved paths, then check_plan_against.
LoadedPlan load_plan_with_inputs(const std::filesystem::path& path);

/// Emits a plan as YAML that parse_plan reads back to an equal plan (resolved paths are not written).
std::string write_plan_yaml(const PlanConfig& plan);

/// The default ring order: identity (ring r position p is global rank r x context_parallel + p),
/// so inner levels stay on consecutive ranks, i.e. inside nodes.
std::vector<int64_t> identity_ring_order(int64_t world_size);

/// The YAML spellings of the enums ("p2p", "selective", ...).
std::string_view to_string(CommPrimitive primitive);
std::string_view to_string(RecomputeMode mode);
std::string_view to_string(LayoutShuffleMode mode);

}  // namespace sparsering
