// The ring topology of a plan's context-parallel ring, as the NCCL runtime posts it: ring position
// <-> global rank (the plan's ring_order), per level successor / predecessor as global ranks, and
// per (position, step) the hops to post, all derived from RingSchedule (core/ring_schedule.hpp,
// the one definition of which chunk a position holds and which hops carry it):
//   - K/V hops: at step t a position sends the chunk it holds over every level the schedule says
//     (outer first, so the outer transfer overlaps the inner ring) and receives the chunk it needs
//     stride(level) steps later from its predecessor of that level;
//   - dK/dV accumulator hops (backward, AccumulatorRoute::mirror of sim/ring/ring_simulation.hpp):
//     the level-0 accumulator follows the K/V chunk around the inner ring and lands, holding the
//     inner ring's sum, on the position that held the chunk at the start of the inner ring; that
//     position adds the incoming level-1 accumulator and sends the sum on over level 1, and so on
//     up; the outermost level lands on the chunk's owner;
//   - the K/V receive buffer plan: which buffer each step's chunk lands in, and which earlier
//     chunk must be released (computed and forwarded) first (2 buffers for a flat ring).
// Levels of size 1 carry nothing and are dropped (positions decompose the same way).
// CPU only; tested in tests/ring/ring_topology_test.cpp by following every chunk and every
// accumulator contribution hop by hop.
#pragma once

#include <cstdint>
#include <vector>

#include "core/rank_types.hpp"
#include "core/ring_schedule.hpp"

namespace sparsering {

/// One K/V hop posted at a step: send the chunk held now, receive the one needed later.
struct KvHop {
  int32_t level = 0;      ///< ring level (after dropping size-1 levels)
  GlobalRank to;          ///< successor of this position at `level`
  GlobalRank from;        ///< predecessor at `level` (sends to this position at the same step)
  int32_t recv_step = 0;  ///< the step that needs the received chunk (step + stride(level))
};

/// One accumulator hop posted at a step (backward, mirror route). Buffers: local(t) is the dK/dV
/// this position computed at step t; incoming(k, t) an accumulator received over level k for the
/// chunk held at step t; landing(k, t) a level-k accumulator that completed its level-k ring for
/// the chunk held at step t.
struct AccumulatorHop {
  int32_t level = 0;
  GlobalRank to;             ///< successor at `level`
  GlobalRank from;           ///< predecessor at `level`
  int32_t send_step = 0;     ///< sent: level 0: local(send_step), else landing(level-1, send_step) ...
  bool add_incoming = false; ///< ... plus incoming(level, send_step) when set
  int32_t recv_step = 0;     ///< received into incoming(level, recv_step) or landing(level, recv_step)
  bool recv_lands = false;   ///< true: landing(level, recv_step); false: incoming(level, recv_step)
  bool recv_final = false;   ///< lands on the owner: the final dK/dV of its own chunk (recv_step 0)
};

/// Where each step's K/V chunk is received.
struct KvBufferPlan {
  int32_t buffers = 1;                   ///< receive buffers (slot 0 holds the own chunk)
  std::vector<int32_t> slot;             ///< [step] buffer of the chunk of that step
  std::vector<int32_t> previous_holder;  ///< [step] step whose chunk must be released first, or -1
  std::vector<int32_t> post_step;        ///< [step] step at which its receive is posted (0 for step 0)
};

class RingTopology {
 public:
  /// `level_sizes` inner -> outer (product W, each >= 1; empty = flat) and `ring_order` ring
  /// position -> global rank, a permutation of 0..W-1 (empty = identity). Throws InputError
  /// naming the bad entry.
  RingTopology(const std::vector<int64_t>& level_sizes, const std::vector<int32_t>& ring_order, int32_t ranks);

  /// W, the ring size.
  int32_t ranks() const { return schedule_.ranks(); }
  /// Levels after dropping those of size 1 (at least one).
  int32_t levels() const { return schedule_.levels(); }
  /// The schedule over the kept levels.
  const RingSchedule& schedule() const { return schedule_; }

  /// Global rank at ring position `position`.
  GlobalRank global_rank(RingRank position) const;
  /// Ring position of `rank` (InputError if it is not in the ring).
  RingRank ring_rank(GlobalRank rank) const;
  /// Level-`level` successor / predecessor of `position`, as global ranks.
  GlobalRank successor(RingRank position, int32_t level) const;
  GlobalRank predecessor(RingRank position, int32_t level) const;
  /// The ring position whose K/V chunk `position` holds at `step`.
  RingRank chunk_source(RingRank position, int32_t step) const;

  /// K/V hops `position` posts at `step`, outer level first.
  std::vector<KvHop> kv_hops(RingRank position, int32_t step) const;
  /// Accumulator hops `position` posts at `step` after its backward compute, inner level first
  /// (a level's hop uses what the level below received at the same step).
  std::vector<AccumulatorHop> accumulator_hops(RingRank position, int32_t step) const;
  /// The K/V receive buffer plan (the same for every position).
  KvBufferPlan kv_buffer_plan() const;

 private:
  void check_position(RingRank position) const;
  RingSchedule schedule_;
  std::vector<int32_t> order_;     ///< position -> global
  std::vector<int32_t> inverse_;   ///< global -> position
};

}  // namespace sparsering
