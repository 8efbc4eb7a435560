// The plan space the tuner searches (docs/tuner.md section 1) and its enumeration.
//
// Dimensions, for a model, a cluster (all of its GPUs) and a sequence length N:
//   degrees   head-parallel H (divides the query heads; divides or is a multiple of the KV heads,
//             as check_plan_against requires), context-parallel W (divides GPUs / H, and W x H
//             divides N), data-parallel D = GPUs / (W x H);
//   order     placement x family (tuner/search/ring_order.hpp); identical orders are kept once;
//   hierarchy flat or nested rings with strictly slower tiers outwards (ring_hierarchy.hpp);
//   layout    contiguous, zigzag, striped with granularity block x 2^s for the configured shifts
//             s (divisors and multiples of the block), when the layout divides N; W = 1 has only
//             contiguous (every layout is the same there);
//   block     block_q = block_k, from the configured sizes, each one the CUDA kernels support
//             (core/kernel_support.hpp), so every candidate is a plan parse_plan accepts;
//   shuffle   striped layouts only: re-laid out per layer (all-to-alls around every attention)
//             or once by the data loader; contiguous and zigzag always come from the loader;
//   comm      p2p ring or all-gather (all-gather ignores the ring hierarchy, so only with the
//             flat ring; W = 1 has only p2p);
//   recompute none, selective, full;  zero stage 0-3 (memory decides which fit).
// A geometry is what a work set depends on: (degrees, layout, granularity, block). Candidates
// are enumerated in a fixed order (degrees by H then W ascending, then order, hierarchy,
// geometry, shuffle, comm, recompute, zero stage); the index in that order is the stable key that breaks
// ties. Tested in tests/tuner_search/search_space_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/config/cluster_config.hpp"
#include "sim/config/model_config.hpp"
#include "sim/config/plan_config.hpp"
#include "core/token_layout.hpp"
#include "tuner/search/ring_hierarchy.hpp"
#include "tuner/search/ring_order.hpp"

namespace sparsering {

/// What the tuner may choose. Empty lists are errors.
struct SearchSpaceOptions {
  std::vector<int64_t> block_sizes = {64, 128};  ///< tokens; block_q = block_k; powers of two the kernels support
  std::vector<int32_t> stripe_shifts = {-1, 0, 1};  ///< striped granularity = block x 2^shift
  std::vector<LayoutKind> layouts = {LayoutKind::contiguous, LayoutKind::zigzag, LayoutKind::striped};
  std::vector<CommPrimitive> comms = {CommPrimitive::p2p, CommPrimitive::all_gather};
  /// Where striped layouts are established (the others always come from the loader).
  std::vector<LayoutShuffleMode> layout_shuffles = {LayoutShuffleMode::per_layer, LayoutShuffleMode::loader};
  std::vector<RecomputeMode> recomputes = {RecomputeMode::none, RecomputeMode::selective, RecomputeMode::full};
  std::vector<int64_t> zero_stages = {0, 1, 2, 3};
  std::vector<RankPlacement> placements = {RankPlacement::cp_inner, RankPlacement::hp_inner};
  std::vector<RingOrderFamily> families = {RingOrderFamily::node_major, RingOrderFamily::interleaved,
                                           RingOrderFamily::snake};
  /// Enumeration stops with InputError once the space holds more candidates (0 = no limit).
  int64_t max_candidates = 0;
};

/// One distinct ring order of one set of degrees, with the hierarchies it allows.
struct OrderChoice {
  int32_t degrees = 0;                     ///< index into SearchSpace::degrees
  RankPlacement placement = RankPlacement::cp_inner;
  RingOrderFamily family = RingOrderFamily::node_major;
  std::vector<int64_t> ring_order;
  std::vector<RingHierarchy> hierarchies;  ///< [0] is the flat ring
  std::vector<std::string> same_as;        ///< other placement/family names that give this order
};

/// What a work set depends on.
struct Geometry {
  int32_t degrees = 0;
  TokenLayout layout;  ///< over the context-parallel degree
  int64_t block = 64;  ///< block_q = block_k
};

/// One plan of the space, as indices into its tables.
struct Candidate {
  int32_t order = 0;      ///< into SearchSpace::orders (fixes the degrees)
  int32_t hierarchy = 0;  ///< into orders[order].hierarchies
  int32_t geometry = 0;   ///< into SearchSpace::geometries (same degrees)
  CommPrimitive comm = CommPrimitive::p2p;
  RecomputeMode recompute = RecomputeMode::none;
  int32_t zero_stage = 0;
  LayoutShuffleMode shuffle = LayoutShuffleMode::loader;  ///< per_layer only for striped layouts
};

struct SearchSpace {
  int64_t seq_len_tokens = 0;
  std::vector<ParallelDegrees> degrees;
  std::vector<OrderChoice> orders;
  std::vector<Geometry> geometries;
  std::vector<Candidate> candidates;  ///< the index is the stable tie-break key

  const ParallelDegrees& degrees_of(const Candidate& c) const {
    return degrees[static_cast<size_t>(orders[static_cast<size_t>(c.order)].degrees)];
  }
  const OrderChoice& order_of(const Candidate& c) const { return orders[static_cast<size_t>(c.order)]; }
  const RingHierarchy& hierarchy_of(const Candidate& c) const {
    return order_of(c).hierarchies[static_cast<size_t>(c.hierarchy)];
  }
  const Geometry& geometry_of(const Candidate& c) const { return geometries[static_cast<size_t>(c.geometry)]; }
};

/// The degrees of the space (H, then W ascending, as in the file comment) without anything that
/// grows with the GPU count. Throws InputError when no layout splits the sequence.
std::vector<ParallelDegrees> enumerate_parallel_degrees(const ModelConfig& model, const ClusterConfig& cluster,
                                                      int64_t seq_len_tokens);

/// Enumerates the space (file comment). Throws InputError for empty or invalid options (a block
/// size that is not a power of two in [16, 512] or that the CUDA kernels do not support, so in
/// effect not one of 64, 128, 256, 512; a zero stage outside 0-3), for seq_len_tokens < 1,
/// and when no plan exists (e.g. no degree divides the sequence), naming the reason.
SearchSpace enumerate_search_space(const ModelConfig& model, const ClusterConfig& cluster, int64_t seq_len_tokens,
                                   const SearchSpaceOptions& options);

/// The fields every plan of a search shares.
struct PlanTemplate {
  std::string name_prefix = "tuned";
  std::string model;    ///< model reference as the plan should write it
  std::string cluster;  ///< cluster reference as the plan should write it
  std::string trace;    ///< trace path as the plan should write it (may be empty)
  SparseSettings sparse;  ///< recall, caps, last_q (block sizes come from the candidate)
  int64_t micro_batch_sequences = 1;
};

/// The plan of a candidate: degrees, ring levels and order, layout, blocks, comm, recompute,
/// ZeRO stage; named "<prefix>-<short description>". No prediction.
PlanConfig make_candidate_plan(const SearchSpace& space, const Candidate& candidate, const PlanTemplate& tmpl);

/// Short labels for tables and messages.
std::string describe_degrees(const ParallelDegrees& degrees);           ///< "H2 W16 D1"
std::string describe_order(const OrderChoice& order);                   ///< "hp-inner/node-major"
std::string describe_hierarchy(const RingHierarchy& hierarchy);         ///< "8 nvlink x 4 infiniband"
std::string describe_layout(const TokenLayout& layout);                 ///< "striped G=64"
/// Every dimension, e.g. "H2 W16 D1 | hp-inner/node-major | 16 infiniband | striped G=64 | b64 | p2p | full | zero1".
std::string describe_candidate(const SearchSpace& space, const Candidate& candidate);

}  // namespace sparsering
