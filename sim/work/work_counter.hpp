// Exact, analytic count of the sparse kernel's work for one head: for every (query rank, K/V chunk)
// pair of a ring, the tiles, masked tiles, vertical columns, vertical chunks and non-empty lists
// that the index builder (kernels/sparse_index.hpp semantics) produces, without enumerating tiles or tokens.
//
// How: a tile's set of global differences global(q) - global(k) is, for regular blocks, a fixed
// set D_pair shifted by x0 + mu x shift (sim/work/block_geometry.hpp). The tile is in its tile list
// iff a kept slash offset (or 0) lies in that set. With F_w = { y : some kept offset in [y, y+w] }
// stored as runs, the mu of the present tiles of a class pair are F_w sampled on an arithmetic
// progression (runs again), and the tiles they stand for are sums of the trapezoidal count of
// (a, b) member pairs with a - b = mu. Striped layouts with stripes finer than the blocks use one
// more level (the stripes of a block form a progression of windows). Masked tiles are the present
// ones whose difference set reaches below 0. Vertical columns are counted per query block with
// difference arrays: each kept column adds 1 from the first query block that can see it, and is
// removed again on the query blocks whose tile list covers its key block (the same presence runs
// shifted by its block). Irregular blocks (partial, straddling) are checked tile by tile.
// Key blocks (the backward's transposed-index segments): key member b of a class pair meets query
// member a iff a - b is a present offset, so each presence run adds a trapezoid in b to the
// per-key-block tile counts (second-order difference arrays); the counts of a GQA group's heads
// add up, and their nonzero entries and maximum give key_lists and longest_key_list.
// Non-empty lists: a query block without a tile has no covered column, so its list is non-empty
// iff it has a tile or sees a kept column of the chunk; visibility is monotone in the block, so
// the lists are the blocks from the first that sees a column, plus the earlier blocks with a tile.
// Those are the members a whose differences against the whole chunk (BlockGeometry::chunk_pairs)
// hold a kept offset: F sampled on a progression again, as runs, once per (class, segment, x0);
// when every key block is regular, the present member offsets of the tiles widened by each key
// class's members give the same runs for less.
// Cost per head: O(W^2 x class pairs + W x runs of F + verticals x runs + W^2 x query blocks when
// there are verticals + W^2 x query classes x runs of the listed members + W^2 x key blocks for the
// per-key-block tile counts); memory O(W^2 x key blocks) for those counts, or O(W^2 x heads of a
// GQA group) with one segment per rank and no irregular block (memo entries per rank pair). Tested against token-level brute force in tests/sim/work_counter_test.cpp
// and against the kernels' index builder in tests/sim/work_counter_index_test.cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "sim/work/block_geometry.hpp"
#include "sim/work/flat_index_map.hpp"
#include "sim/work/kept_pattern.hpp"
#include "sim/work/run_set.hpp"
#include "sim/work/work_counts.hpp"

namespace sparsering {

/// Counts one head's work matrix for a fixed geometry. Holds scratch buffers: reuse one counter
/// for many heads; use one counter per thread (not thread-safe). No global state.
class WorkCounter {
 public:
  /// Rank-pair slot tables (see slot tables below) up to this many entries (16 MiB).
  static constexpr size_t kMaxSlotEntries = size_t{1} << 22;

  /// Keeps a reference to `geometry`, which must outlive the counter. Memo lookups go through
  /// rank-pair slot tables when they need at most `max_slot_entries` entries, else through a hash
  /// of (offset, pair); both give the same counts.
  explicit WorkCounter(const BlockGeometry& geometry, size_t max_slot_entries = kMaxSlotEntries);

  /// Work of one head with kept pattern `pattern` (normalized or not; values must lie in
  /// [0, seq_len)). `out` is resized to W x W and overwritten: out.at(q, kv) is the work of ring
  /// rank q on the K/V chunk of ring rank kv. Throws InputError for out-of-range pattern values.
  void count_head(const KeptPattern& pattern, WorkMatrix& out);

  /// Adds one head's work to `out` (which must already be W x W); the head is its own GQA group
  /// for WorkCounts::key_lists and longest_key_list.
  void accumulate_head(const KeptPattern& pattern, WorkMatrix& out);

  /// The heads of one GQA group (the query heads sharing one K/V head): begin_key_group, then
  /// accumulate_group_head for each head, then end_key_group, which adds the (KV head, key block)
  /// pairs any of them lists (WorkCounts::key_lists, a union over the heads) to `out` and raises
  /// longest_key_list to the group's most tiles of one key block (summed over the heads).
  void begin_key_group();
  void accumulate_group_head(const KeptPattern& pattern, WorkMatrix& out);
  void end_key_group(WorkMatrix& out);

  /// Work of a dense head (every causal pair: all slash offsets [0, seq_len), no verticals) into
  /// `out`, resized to W x W. Memory O(W^2 + query blocks), not O(tokens).
  void count_dense_head(WorkMatrix& out);

  const BlockGeometry& geometry() const { return geo_; }

 private:
  struct Presence {
    RunSet mu;             ///< member-offset values (a - b) of present tiles
    std::vector<int64_t> run_lo;   ///< the runs of mu as two arrays: first values ...
    std::vector<int64_t> run_end;  ///< ... and one past the last values
    // mu over [base, base + span) as a prefix count, for O(1) membership and range counts.
    int64_t base = 0;
    std::vector<int32_t> prefix;  ///< prefix[x] = elements of mu in [base, base + x), x in [0, span]
    int64_t span() const { return static_cast<int64_t>(prefix.size()) - 1; }
    bool test(int64_t mu_value) const {
      const int64_t x = mu_value - base;
      return x >= 0 && x < span() && prefix[static_cast<size_t>(x) + 1] != prefix[static_cast<size_t>(x)];
    }
    /// Elements of mu in [lo, hi].
    int64_t count(int64_t lo, int64_t hi) const {
      const int64_t from = lo - base > 0 ? lo - base : 0;
      const int64_t to = hi - base + 1 < span() ? hi - base + 1 : span();  // exclusive
      return from >= to ? 0 : prefix[static_cast<size_t>(to)] - prefix[static_cast<size_t>(from)];
    }
    /// run_from[x] = index of the first run ending at or after base + x (x in [0, span]): where a
    /// scan of the runs from a member offset starts, without a binary search.
    std::vector<int32_t> run_from;
    size_t first_run_from(int64_t mu_value) const {
      const int64_t x = mu_value - base;
      if (x <= 0) return 0;
      return x >= span() ? run_lo.size() : static_cast<size_t>(run_from[static_cast<size_t>(x)]);
    }
    int64_t tiles = 0;
    int64_t masked = 0;
  };
  /// Kept columns of one key block that become visible from the same query block.
  struct ColumnGroup {
    int64_t first_block = 0;  ///< first query block that may see them
    int64_t count = 0;
  };
  /// The kept columns of one key block of their owner rank. For a query rank below, equal to or
  /// above the owner (case 0, 1, 2) the first visible query block is the same for every rank of
  /// the case (block_geometry_test checks this property of the layouts), so the groups are
  /// computed once per head.
  struct KeyBlockColumns {
    int64_t block = 0;
    int32_t k_class = -1;  ///< -1 for an irregular key block
    int64_t member = 0;    ///< member index in k_class
    size_t begin[3] = {0, 0, 0};  ///< groups of each case: group_store_[begin[c], end[c])
    size_t end[3] = {0, 0, 0};
  };

  void prepare(const KeptPattern& pattern);
  const RunSet& dilated_slashes(int64_t width);
  /// Member offsets mu = a - b of `pair` (b in [0, count_b)) whose difference set holds a kept offset.
  RunSet present_offsets(const ClassPair& pair, int64_t count_b, int64_t x0);
  void compute_presence(const ClassPair& pair, int64_t x0, Presence& out);
  /// The presence set of class pair `pair_index` at offset `x0` for rank pair `rank_pair` (q rank
  /// x W + kv rank), memoized per head through the slot tables or, without them, by (x0, pair).
  const Presence& presence(size_t rank_pair, size_t pair_index, int64_t x0);
  /// Query members of chunk pair `chunk_pair_index` with a tile against that segment of the chunk
  /// (memoized as presence() is); compute_listed_members computes them, from pair_presence_ (the
  /// current rank pair's) when every key block is regular.
  const RunSet& listed_members(size_t rank_pair, size_t chunk_pair_index, int64_t x0);
  /// Fills pair_slot_ and chunk_slot_.
  void build_slot_tables();
  RunSet compute_listed_members(size_t chunk_pair_index, int64_t x0);
  /// Non-empty lists of the regular query blocks plus every block from `first_with_columns` on.
  int64_t count_lists(int32_t q_rank, int32_t kv_rank, int64_t first_with_columns);
  bool any_slash_in(int64_t lo, int64_t hi) const;
  /// First query block of `q_rank` with a query at or after global position `global`
  /// (q_blocks if none): the first block that may see a column there.
  int64_t first_visible_block(int32_t q_rank, int64_t global) const;
  /// Tile (q block i of rank q, k block j of rank kv) by direct interval checks: {present, masked}.
  std::pair<bool, bool> tile_direct(int32_t q_rank, int64_t i, int32_t kv_rank, int64_t j);
  WorkCounts count_pair(int32_t q_rank, int32_t kv_rank);
  /// Adds the rank pair's tiles per key block to the group's counts (after count_pair).
  void add_key_block_tiles(int32_t q_rank, int32_t kv_rank);
  /// The memo entry (key_tiles_store_) of the current rank pair's presence sets, computed if new.
  size_t memoized_key_tiles();
  /// Before a head's rank pairs: room for its memo entries (shared_key_tiles_).
  void start_key_head();
  void end_shared_key_group(WorkMatrix& out);
  /// An interval of key blocks (or key members) [lo, hi]; empty when lo > hi.
  struct BlockRange {
    int64_t lo = INT64_MAX;
    int64_t hi = -1;
    bool empty() const { return lo > hi; }
    void add(int64_t from, int64_t to) {
      lo = std::min(lo, from);
      hi = std::max(hi, to);
    }
  };
  /// Adds the tiles per regular key block of the current rank pair's presence sets to `tiles`
  /// (k_blocks entries); returns the blocks it may have changed.
  BlockRange regular_key_tiles(int32_t* tiles);
  /// Adds memo entry `id`'s tiles per key block to `tiles`; returns the blocks it may change.
  BlockRange add_memoized_key_tiles(size_t id, int32_t* tiles) const;
  /// The key blocks of `range` with a tile and the most tiles of one of them; zeroes them.
  static std::pair<int64_t, int32_t> take_key_tiles(int32_t* tiles, BlockRange range);
  void count_columns(int32_t q_rank, int32_t kv_rank, WorkCounts& counts);
  /// count_columns for the common geometry: every query class one block apart, no irregular
  /// block, block_k a power of two.
  void count_columns_regular(int c, int32_t kv_rank, WorkCounts& counts);
  /// count_columns for geometries whose query classes are all strided (members a stripe period
  /// apart), with no irregular block and block_k a power of two.
  void count_columns_strided(int c, int32_t kv_rank, WorkCounts& counts);
  /// Subtracts the columns of the flattened groups of (kv_rank, case c) that tiles cover from
  /// `diff`, a difference array over query blocks (every query class one block apart).
  void cover_flat(int c, int32_t kv_rank, int64_t* diff) const;
  /// Closed-form column count for rank pairs with few visible columns; false if not applicable.
  bool count_columns_sparse(int c, int32_t kv_rank, WorkCounts& counts);
  /// Subtracts `count` columns of regular key block `member` of `k_class` from every regular query
  /// block at or after the group's first visible block whose tile list holds that key block;
  /// `class_min` holds, per query class, the first member at or after that block.
  void cover_regular(int32_t k_class, int64_t member, const int64_t* class_min, int64_t count);
  void group_columns(int32_t owner, std::vector<int64_t>& locals, std::vector<int64_t>& globals);
  /// The same by tile-by-tile checks, for irregular query blocks (or every query block when the
  /// key block is irregular).
  void cover_direct(int32_t q_rank, int32_t kv_rank, int64_t j, int64_t i_min, bool regular_key_block, int64_t count);

  const BlockGeometry& geo_;
  /// Sets the slash runs and vertical positions (sorted, unique, in range) of the next head.
  void prepare_runs(RunSet slash_runs, const std::vector<int64_t>& vertical_positions);

  RunSet slashes_;                ///< kept offsets (with 0) as runs
  std::vector<int64_t> widths_;   ///< widths with a cached dilation
  std::vector<RunSet> dilations_;
  bool memoize_ = true;
  FlatIndexMap presence_index_;
  std::deque<Presence> presence_store_;   ///< deque: stable addresses for pair_presence_
  std::vector<Presence> pair_scratch_;    ///< per class pair when not memoizing
  FlatIndexMap listed_index_;  ///< (x0, chunk pair) -> listed_store_ entry
  std::deque<RunSet> listed_store_;
  std::vector<RunSet> listed_scratch_;    ///< per chunk pair when not memoizing
  std::vector<Interval> listed_scratch_runs_;
  std::vector<int64_t> segment_start_;    ///< [rank][segment] global position of the segment start
  // Slot tables: the memo key (segment offset x0, pair) of every (rank pair, pair), numbered once
  // per geometry, so a head's lookups read an array instead of hashing. A head's memo is then
  // slot -> store index (-1 until computed), reset per head. Empty when the tables would be too
  // large (rings of thousands of ranks); the hash maps serve then.
  std::vector<int32_t> pair_slot_;    ///< [(q rank x W + kv rank) x class pairs + pair]
  std::vector<int32_t> chunk_slot_;   ///< [(q rank x W + kv rank) x chunk pairs + chunk pair]
  std::vector<int32_t> presence_of_slot_;
  std::vector<int32_t> listed_of_slot_;
  std::vector<const Presence*> pair_presence_;  ///< per class pair, for the current rank pair
  // Kept columns by owner rank.
  std::vector<std::vector<KeyBlockColumns>> key_columns_;
  std::vector<ColumnGroup> group_store_;
  /// Per group of group_store_ and query class: the first member at or after the group's first
  /// visible block ([group x query classes + class]; computed once per head by flatten_groups).
  std::vector<int64_t> group_class_min_;
  std::vector<int64_t> total_visible_;  ///< [owner][case]: columns visible to ranks of the case
  /// A group of columns of one regular key block, flattened for the covering loop.
  struct FlatGroup {
    int64_t member = 0;       ///< member index of the key block in its class
    int64_t first_block = 0;  ///< first query block that sees the columns
    int64_t count = 0;
    size_t group = 0;         ///< its index in group_store_
  };
  /// Groups of regular key blocks per (owner rank, case, key class), members ascending:
  /// flat_groups_[flat_begin_[(owner x 3 + case) x (key classes + 1) + k_class] .. next entry).
  std::vector<FlatGroup> flat_groups_;
  std::vector<size_t> flat_begin_;
  /// Visible columns of (owner, case) per query block: visible_[(owner x 3 + case) x q_blocks + i];
  /// visible_first_[owner x 3 + case] = the first query block that sees any (q_blocks if none).
  std::vector<int32_t> visible_;
  std::vector<int64_t> visible_first_;
  /// (column, query block) pairs in which a column of (owner, case) is visible: [owner x 3 + case].
  std::vector<int64_t> visible_pairs_;
  /// Fills flat_groups_, flat_begin_, visible_ and visible_first_ from the column groups.
  void flatten_groups();
  // Scratch for the column count.
  std::vector<int64_t> block_diff_;      ///< per q block: visible minus covered (stride-1 classes), difference array
  std::vector<int64_t> regular_diff_;    ///< count_columns_regular's difference array, kept zeroed between calls
  std::vector<int64_t> covered_direct_;  ///< per q block, from tile-by-tile checks
  std::vector<int64_t> covered_diff_;    ///< per strided q class (at class_offset_), difference array over members
  std::vector<int64_t> class_offset_;
  bool strided_classes_ = false;
  bool every_class_strided_ = true;      ///< every query class has members > 1 a stride > 1 apart
  bool covered_clean_ = true;            ///< covered_diff_ is all zero (count_columns_strided keeps it so)
  int block_k_shift_ = -1;               ///< log2(block_k) when block_k is a power of two, else -1
  int item_shift_ = -1;                  ///< log2(column_item) when a power of two, else -1
  /// Tiles per key block of the current GQA group, summed over its heads: k_blocks entries per
  /// rank pair ([(q rank x W + kv rank) x k_blocks + block]).
  std::vector<int32_t> key_tiles_;
  /// Per rank pair, the key blocks whose counts may be nonzero: what end_key_group reads and zeroes.
  std::vector<BlockRange> key_range_;
  std::vector<int64_t> irregular_key_hits_;  ///< key block of each irregular tile found by count_pair
  /// regular_key_tiles' second-order difference arrays over the members of each key class
  /// (members + 2 entries at key_class_offset_[class]); kept zeroed between calls.
  std::vector<int64_t> key_member_diff_;
  std::vector<size_t> key_class_offset_;
  std::vector<BlockRange> key_member_range_;  ///< per key class, the members with a point
  /// regular_key_tiles of each distinct tuple of presence sets (pair_presence_) of the current
  /// head: entry e = key_tiles_index_[tuple] holds k_blocks counts at key_tiles_store_[e x k_blocks]
  /// and the blocks they may change at key_tiles_range_[e].
  struct PresenceTupleHash {
    size_t operator()(const std::vector<const Presence*>& tuple) const {
      size_t h = 1469598103934665603ULL;
      for (const Presence* p : tuple) h = (h ^ reinterpret_cast<size_t>(p)) * 1099511628211ULL;
      return h;
    }
  };
  std::unordered_map<std::vector<const Presence*>, size_t, PresenceTupleHash> key_tiles_index_;
  std::vector<int32_t> key_tiles_store_;
  std::vector<BlockRange> key_tiles_range_;
  /// One segment per rank and no irregular block: instead of key_tiles_, each rank pair keeps the
  /// memo entry of each head of the group (key_ids_[head x W^2 + rank pair]; the store lives for
  /// the group), and end_key_group sums each distinct tuple of entries once.
  bool shared_key_tiles_ = false;
  bool key_group_begun_ = false;
  std::vector<int32_t> key_ids_;
  size_t key_head_offset_ = 0;
  std::vector<int32_t> key_sum_;
  struct IdTupleHash {
    size_t operator()(const std::vector<int32_t>& tuple) const {
      uint64_t h = UINT64_C(1469598103934665603);  // FNV-1a
      for (const int32_t id : tuple) h = (h ^ static_cast<uint64_t>(static_cast<uint32_t>(id))) * UINT64_C(1099511628211);
      return static_cast<size_t>(h);
    }
  };
  /// Per distinct tuple of memo entries: (key blocks listed, most tiles of one key block).
  std::unordered_map<std::vector<int32_t>, std::pair<int64_t, int32_t>, IdTupleHash> key_group_results_;
  std::vector<const Presence*> presence_key_;
  std::vector<Interval> q_runs_;
  std::vector<Interval> k_runs_;
};

/// Convenience: one head's work matrix for `geometry`.
WorkMatrix count_head_work(const BlockGeometry& geometry, const KeptPattern& pattern);

}  // namespace sparsering
