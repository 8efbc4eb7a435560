// Lower bounds of what the simulator (sim/step/simulation.hpp) predicts for a candidate plan: the
// step time and the peak memory per GPU. The tuner prunes a candidate whose bound already loses,
// so every bound must be <= the simulated value; tests/tuner_search/step_lower_bound_test.cpp
// checks that on random candidates and that pruning never changes the optimum.
//
// Memory: the simulator's memory model (sim/memory/memory_model.hpp) with no sparse index: exact
// except the index, which only adds.
// Time: the simulator's step composition (layer phases, LM head, exposed gradient sync, Adam) with
//   - dense GEMMs, estimation scores, the sparse index build, LM head and optimizer exactly as the
//     simulator computes them;
//   - each collective (layout and Ulysses all-to-alls, estimation broadcast and all-reduces,
//     K/V all-gather) at the minimum over the rings or groups that run it (the simulator takes a
//     maximum over them);
//   - each attention ring pass at max(slowest rank's summed kernel time, chunk relay time), where
//     kernel times come from a lower bound of the work (tuner/search/work_lower_bound.hpp) and the
//     relay time is the last chunk's hops (each hop's time with the simulator's NIC sharing, the
//     fastest over the rings; a hierarchy's hops at the fastest hop of their level); backward
//     adds the fastest dK/dV hop that must follow the last kernel; all-gather passes use the
//     simulator's closed form on the bounded kernel times;
//   - the step is monotone in every layer's forward and backward time (the exposed gradient sync
//     max(sync - window, sync / layers) shrinks by at most what the backward grows), so the bounded
//     layer times give a bounded step.
// Strengths, each at least the one before:
//   coarse  per geometry, from layout-independent totals (every aligned layout lists the same
//           tiles, and leaves the same visible columns uncovered: at least that many / block
//           chunks), spread evenly over the ring, plus every rank's own cell (a list per local
//           row); available at once, and a floor under the stronger bounds;
//   cells   per geometry, from the per-cell work bound (refine(): tiles and rows with a tile,
//           then tiles, exact lists and representative chunks, then every chunk bound). Tiles
//           and rows with a tile come from one rank-pair table per head (work_lower_bound.hpp),
//           summed per head group, so geometries that differ only in head grouping share them;
//           zigzag rank sums are closed-form over the table, each rank's cells summed as (cells
//           with tiles) x fixed cost + lists x per-list cost + tiles x per-tile cost, less half a
//           ns per cell for the simulator's rounding of each;
//   ring    per (geometry, ring order, hierarchy), p2p only (orders and hierarchies with the same
//           level sizes and bounded hop times share it): the simulator's own ring event model
//           (sim/ring/ring_simulation.hpp) run on the bounded kernel times with those hop times;
//           backward with the mirror accumulator route runs it with the accumulators, and with
//           the direct-return route without them (they only delay K/V hops that share their
//           queues) plus the fastest dK/dV hop; the event model is monotone (less compute or
//           faster links never end a pass later), so this captures the step-level imbalance and
//           exposed communication of a layout while staying a bound (refine_ring(); rings of at
//           most kMaxRingBoundRanks positions, one head group per layer: the busiest, and for
//           large rings only as many layers as kRingBoundSteps allows, busiest first);
//   counted layers: add_exact_layers() puts a layer's counted work (the simulator's own count)
//           in place of its bound: exact kernel times in every sum, exact cells in the ring
//           bound; once every layer is counted the bound is the simulator's step up to its
//           collectives and links, taken at the fastest ring or group.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "sim/config/cluster_config.hpp"
#include "sim/config/model_config.hpp"
#include "sim/core/sim_time.hpp"
#include "sim/cost/kernel_cost.hpp"
#include "sim/network/cluster_network.hpp"
#include "core/ring_schedule.hpp"
#include "sim/step/simulation.hpp"
#include "sim/work/pattern_set.hpp"
#include "sim/work/work_set.hpp"
#include "tuner/search/search_space.hpp"
#include "tuner/search/work_lower_bound.hpp"

namespace sparsering {

class StepLowerBound {
 public:
  /// `patterns` must be normalized (normalize_pattern on every head) and match the model and the
  /// space's sequence length; everything referenced must outlive the bound. `options` supplies
  /// the roofline assumptions and gradient-sync overlap the simulations will use.
  StepLowerBound(const ModelConfig& model, const ClusterConfig& cluster, const SearchSpace& space,
                 const PatternSet& patterns, const PlanTemplate& tmpl, const SimulationOptions& options);
  ~StepLowerBound();
  StepLowerBound(const StepLowerBound&) = delete;
  StepLowerBound& operator=(const StepLowerBound&) = delete;

  /// Lower bound of the simulated peak memory per GPU (bytes).
  int64_t memory_bytes(const Candidate& candidate) const;
  /// Lower bound of the simulated step time (ns): refined if refine() ran for the candidate's
  /// geometry, else coarse.
  SimNs step_ns(const Candidate& candidate) const;
  /// Strengths of refine(), each at least as strong as the one before.
  static constexpr int kTiles = 1;   ///< tiles only (O(N / stripe) per layer where it applies)
  static constexpr int kCells = 2;   ///< tiles and representative columns
  static constexpr int kStrong = 3;  ///< tiles and every column bound; keeps cells for refine_ring
  /// 0 before refine(geometry), then the strongest `strength` it ran with (kTiles .. kStrong).
  int refined(int32_t geometry) const;
  /// Computes the per-cell work bound of a geometry (parallel over layers on `threads`):
  /// kTiles with tiles only (from rank_pair_tiles where it applies, O(N / stripe) per layer,
  /// shared with the geometries that differ only in head grouping), kCells with
  /// ColumnBound::representative (rings of more than kCheapColumnRanks positions: tiles only),
  /// kStrong with ColumnBound::dense; rings of more than kMaxRingBoundRanks positions stay at
  /// tiles only. No-op if a bound of at least that strength exists.
  void refine(int32_t geometry, int threads, int strength = kStrong);
  /// True if refine_ring applies to the candidate (p2p, ring of at most kMaxRingBoundRanks).
  bool ring_bound_applies(const Candidate& candidate) const;
  /// True once refine_ring ran for the candidate's (geometry, order, hierarchy).
  bool ring_refined(const Candidate& candidate) const;
  /// Runs the ring event model on the bounded work of the candidate's geometry, order and
  /// hierarchy (refines the geometry to kStrong first). Precondition: ring_bound_applies.
  void refine_ring(const Candidate& candidate, int threads);

  /// Replaces the bound of layers `layers` of `geometry` by their counted work: `work` holds
  /// them in that order (count_work_set of those layers, the geometry's head groups and micro
  /// batch), so every step bound of the geometry's candidates uses their exact kernel times, and
  /// its ring bounds their exact cells. The terms stay when later refinements recompute the rest.
  void add_exact_layers(int32_t geometry, const std::vector<int64_t>& layers, const WorkSet& work, int threads);
  /// Every layer, the busiest bound first (forward + backward of the busiest rank; ties by layer).
  std::vector<int64_t> layers_by_bound(int32_t geometry) const;
  /// Layers of `geometry` whose terms come from counted work.
  int64_t exact_layers(int32_t geometry) const;
  /// Frees the counted layers' cell times of `geometry` (their terms stay) once no ring bound of
  /// it will be computed or redone.
  void release_exact_cells(int32_t geometry);

  static constexpr int64_t kMaxRingBoundRanks = 256;
  static constexpr int64_t kCheapColumnRanks = 64;
  /// Ring steps (positions x steps, both directions) one refine_ring may simulate; beyond that
  /// only the layers with the busiest ranks get the ring bound.
  static constexpr int64_t kRingBoundSteps = int64_t{1} << 18;
  /// Memory for the per-cell kernel times the ring bounds reuse (least recently used dropped).
  static constexpr size_t kCellCacheBytes = size_t{64} << 20;

 private:
  struct DegreeTerms;   // dense phases and shapes of one set of degrees
  struct OrderTerms;    // collectives and link times of one ring order
  struct GeometryTerms; // attention bounds of one geometry
  struct CellTimes;     // per-cell kernel times of one geometry (strong bound)
  struct RingTerms {    // ring bound of one (geometry, order, hierarchy): per layer
    std::vector<SimNs> attention_fwd;
    std::vector<SimNs> attention_bwd;
    std::vector<int64_t> layers;  // the layers it covers (the others are 0)
  };
  struct RingSetup {    // one (order, hierarchy): schedule and bounded hop times
    RingSchedule schedule;
    std::vector<SimNs> kv_send;
    std::vector<int32_t> source;  // [p x W + t]: the chunk position p holds at step t
    std::vector<SimNs> dkv_hops;  // mirror route
    SimNs dkv = 0;                // direct route: the fastest dK/dV hop
    bool mirror = true;
  };

  /// The shape of every ring-step launch of `geometry` under `groups` head groups, as the
  /// simulator sets it (its chunk key-block cost is in every bound).
  LaunchGeometry launch_of(const Geometry& geometry, int64_t groups) const;
  /// Consecutive query heads of a head group that share one K/V head (the key lists' runs).
  int64_t key_group(int64_t groups) const;
  /// The backward units worth bounding for `geometry`'s cost model (work_lower_bound.hpp).
  BackwardTerms backward_terms(const Geometry& geometry, int64_t groups) const;
  RingSetup ring_setup(int32_t order, int32_t hierarchy) const;
  /// Key of the candidate's ring bound: its geometry and the first (order, hierarchy) whose ring
  /// setup equals its own.
  std::tuple<int32_t, int32_t, int32_t> ring_key(const Candidate& candidate) const;
  /// The ring event model of one layer and direction on the busiest group's cells (counted ones
  /// for exact layers, else `bounded`).
  SimNs ring_layer_ns(const RingSetup& setup, const GeometryTerms& terms, const CellTimes& bounded, int64_t layer,
                      bool backward) const;

  /// The tiles bound of `geometry` and of every geometry that differs from it only in head
  /// grouping (one rank-pair table per head, summed per group).
  void refine_tiles(int32_t geometry, int threads);
  /// Per-rank sums from the summed rank-pair tables of each (layer, group).
  void tiles_from_tables(GeometryTerms& t, const Geometry& g, const std::vector<RankPairTiles>& tables, int threads);
  /// The tiles bound cell by cell (layouts without a rank-pair table).
  void tiles_from_cells(int32_t geometry, int threads);
  /// Stores per-(layer, group, rank) kernel-time sums and their per-layer maxima.
  void set_rank_sums(GeometryTerms& t, std::vector<SimNs> sum_f, std::vector<SimNs> own_f, std::vector<SimNs> sum_b,
                     std::vector<SimNs> own_b);
  const DegreeTerms& degree_terms(int32_t degrees) const;
  const OrderTerms& order_terms(int32_t order) const;
  SimNs broadcast_ns(int32_t order, int32_t last_owner) const;
  SimNs hop_chain_ns(const Candidate& candidate) const;
  SimNs sync_ns(int32_t zero_stage) const;
  void remember_cells(int32_t geometry, std::shared_ptr<const CellTimes> cells);
  std::shared_ptr<const CellTimes> cell_times(int32_t geometry, int threads);
  SimNs optimizer_ns(int32_t zero_stage) const;

  const ModelConfig& model_;
  const ClusterConfig& cluster_;
  const SearchSpace& space_;
  const PatternSet& patterns_;
  PlanTemplate template_;
  SimulationOptions options_;
  ClusterNetwork network_;
  GemmCostModel gemm_;
  std::map<int64_t, AttentionCostModel> cost_;  // by block size
  std::map<int64_t, std::vector<std::vector<int64_t>>> diagonals_;  // by block size: [layer x heads + head]
  std::vector<std::unique_ptr<DegreeTerms>> degree_terms_;
  std::vector<std::unique_ptr<OrderTerms>> order_terms_;
  std::vector<std::unique_ptr<GeometryTerms>> geometry_terms_;
  std::map<std::tuple<int32_t, int32_t, int32_t>, RingTerms> ring_terms_;  // by ring_key
  std::vector<std::vector<std::pair<int32_t, int32_t>>> ring_rep_;  // [order][hierarchy]: the pair whose ring bound it shares
  std::list<std::pair<int32_t, std::shared_ptr<const CellTimes>>> cell_cache_;
  size_t cell_cache_bytes_ = 0;
  mutable std::mutex memory_mutex_;
  mutable std::map<std::tuple<int32_t, int32_t, int32_t, int32_t, int32_t>, int64_t> memory_;  // memory_bytes by its inputs
  mutable std::mutex broadcast_mutex_;
  mutable std::map<std::tuple<int32_t, int32_t>, SimNs> broadcast_;
  std::vector<SimNs> sync_;       // by ZeRO stage
  std::vector<SimNs> optimizer_;  // by ZeRO stage
};

}  // namespace sparsering
