// A lower bound of the sparse kernel's work matrix (sim/work/work_counts.hpp) of a group of
// heads, far cheaper than the exact count, for the tuner's pruning: every cell (q rank, K/V rank)
// gets tiles <= the exact tiles, column_chunks <= the exact chunks, lists <= the exact lists and
// key_lists <= the exact key lists, and the backward's column_lists, columns and column_items at
// most the exact ones (every row the chunk bound counts is a list with a column; a row bounded to
// gather c columns has ceil(c / 64) items); masked_tiles and longest_key_list are left 0. The
// kernel semantics are those of kernels/sparse_index.hpp.
//
// Tiles. When every local block is one global block-aligned block ("aligned": contiguous with
// b | N/W, zigzag with b | N/2W, striped with b | G), tile (global q block I, key block J) is listed
// iff I - J is a touched block diagonal: D = { floor(d/b), ceil(d/b) : d kept slash offset or 0 }.
// A layout whose ranks own stripes of g = G/b blocks (contiguous is one stripe of N/W tokens per
// rank, zigzag two half-chunks) then gives, for stripe diagonal e = (S_q - S_k),
//   F[e] = sum over d in D of max(0, g - |d - e g|)   (block pairs of two stripes e apart at diagonal d)
// and the tiles of (p, src) are sums of F over the stripe pairs the two ranks own: exact, in
// O(|D| + N/G) per head group. Striped layouts with stripes finer than the block (G | b, b | N/W):
// a local block holds m = b/G stripes, and tile (i, j) of (p, src) is listed iff some stripe
// diagonal u W + (p - src) in the stripe-level set E lies in [(i-j) m - m + 1, (i-j) m + m - 1],
// i.e. iff i - j is in D_r = { floor(u/m), ceil(u/m) : u W + r in E } with r = p - src: exact
// too. Other layouts (partial blocks) get 0 tiles.
// Lists, exact where tiles are: a row (head, query block I) has a list on the chunk of src iff it
// has a tile there or sees a kept column of src (a row without a tile covers no column), and it
// sees one iff I >= K, the key block of src's earliest column. In a unit of g rows (contiguous,
// zigzag), the rows with a tile on a key unit e units back are a prefix and a suffix: a diagonal
// d = q g + rem lists rows [rem, g) at e = q and [0, rem) at e = q + 1; with the rows from K that
// is one prefix and one suffix per unit. For striped layouts the rows of query residue x modulo
// the period P = g W have a tile on src from the smallest touched diagonal d with (x - d) mod P in
// src's stripe residues on, so the lists are the rows of residue x from min(d, K), in O(|D| x P)
// per head. Fine stripes: a row i has a tile iff i >= min D_r, and sees the column from the first
// block whose last stripe reaches the column's stripe.
// Chunks. For every K/V rank, one representative kept column (the earliest it owns): in every
// query block of rank p that can see it (causality) and whose tile list misses its key block, the
// column list of that (head, query block) is non-empty, so the kernel gathers at least one chunk
// there. The count of such query blocks is exact (visible blocks minus covered ones) per head.
// For a K/V rank holding more than one block's worth of a head's columns (aligned layouts), each
// query block also gets ceil((visible columns - covered-block bound x most columns per key
// block) / block) chunks, where the covered-block bound counts the touched diagonals that can
// land on that rank's key blocks (exactly for contiguous and zigzag, modulo the stripe period for
// striped layouts).
// Key lists (the backward's (K/V head, key block) segments). Key block J of src has a tile from
// rank p iff some row I of p has I - J in D. Mirrored, the count is the rows count: in units of
// g blocks, a diagonal d = q g + rem lists the keys [0, g - rem) of unit diagonal q and
// [g - rem, g) of q + 1, so a unit diagonal lists as many keys as rows (contiguous, zigzag; fine
// stripes: the keys up to the last minus the smallest diagonal of D_r, again the rows count). For
// striped layouts, key residue y of src is listed from the smallest touched diagonal d with
// (y + d) mod P among p's residues, its key blocks y + kP numbering at least stripes - ceil(d / P).
// The heads of one K/V head list at least what any of them lists: a group's bound is the sum over
// its K/V heads of the largest of their heads' counts.
// Tested against the exact work counter in tests/tuner_search/work_lower_bound_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "core/token_layout.hpp"
#include "sim/work/kept_pattern.hpp"
#include "sim/work/work_counts.hpp"

namespace sparsering {

/// True when work_lower_bound's tile counts are exact for this layout and block (the aligned and
/// fine-striped cases of the file comment).
bool exact_tile_count(const TokenLayout& layout, int64_t block);

/// How much of the column (chunk) bound to compute.
enum class ColumnBound : int32_t {
  none = 0,            ///< chunks left 0 (tiles only)
  representative = 1,  ///< one representative column per (head, K/V rank)
  dense = 2,           ///< plus the column-count part for K/V ranks with many columns (several times slower)
};

/// Which of the backward's units work_lower_bound bounds beyond the column lists and items its
/// chunk bound gives: a cost model that charges nothing for one need not pay for its bound (left
/// at 0 or at the rows' count, still a bound).
struct BackwardTerms {
  /// Consecutive heads of `heads` that share one K/V head (the last run may be shorter): key lists
  /// are bounded per run. 0: key lists left 0.
  int64_t key_group = 1;
  /// Column lists, columns and items of the backward's column pass (else left 0).
  bool column_units = true;
  /// Columns as the visible ones less a bound of the covered ones (else one per counted row);
  /// only with column_units.
  bool columns = true;
};

/// The lower-bound work matrix of one head group: the sum over `heads` of each head's bound.
/// Patterns must be normalized (normalize_pattern) for layout.seq_len_tokens(). `block` is
/// block_q = block_k. `diagonals`, if not empty, holds touched_diagonals(head, block) of each
/// head (callers that bound many layouts compute them once). Throws InputError for block < 1 or
/// a diagonal list of the wrong length.
WorkMatrix work_lower_bound(const std::vector<const KeptPattern*>& heads, const TokenLayout& layout, int64_t block,
                            const std::vector<const std::vector<int64_t>*>& diagonals = {},
                            ColumnBound columns = ColumnBound::dense, const BackwardTerms& backward = {});

/// The exact tiles of a head group as a function of the rank pair, where that is cheap to state:
/// for contiguous and striped layouts (aligned or finely striped) a function of r = q rank - K/V
/// rank, computed in O(N / stripe) instead of O(W^2); for zigzag the unit-diagonal weights F of
/// the file comment, tiles(p, src) = sum of F[x - y] over x in {p, 2W-1-p}, y in {src, 2W-1-src}.
/// Linear in the heads: the table of a group is the sum of its heads' tables, so geometries that
/// differ only in how heads are grouped share them.
struct RankPairTiles {
  enum class Form : int32_t {
    none = 0,    ///< no closed form (blocks that straddle the layout's units): use work_lower_bound
    offset = 1,  ///< table[r + W - 1], r in (-W, W)
    zigzag = 2,  ///< table = F over unit diagonals [0, 2W)
  };
  Form form = Form::none;
  int32_t ranks = 0;
  std::vector<int64_t> table;
  /// A lower bound of the rows with a tile (lists without their columns), in the same form:
  /// offset form: by offset (exact for contiguous and fine stripes; for aligned stripes the rows
  /// from each residue's smallest diagonal, less one per residue); zigzag: the exact rows per unit
  /// diagonal, a cell taking the larger of its two key units per row unit.
  std::vector<int64_t> lists;
  /// A lower bound of the key blocks with a tile (the backward's key lists), in the same form:
  /// offset form by offset; zigzag the keys per unit diagonal, a cell taking the larger of its two
  /// row units per key unit. Of one head, or of a K/V head's heads (merge_same_kv_head).
  std::vector<int64_t> keys;

  /// Tiles of q rank `q` on the K/V chunk of rank `kv`. Precondition: form != none.
  int64_t at(int32_t q, int32_t kv) const;
  /// The lists bound of that cell (only rows with a tile: a cell with lists > 0 has tiles > 0).
  int64_t lists_at(int32_t q, int32_t kv) const;
  /// The key lists bound of that cell (only keys with a tile: a cell with keys > 0 has tiles > 0).
  int64_t keys_at(int32_t q, int32_t kv) const;
  /// Sums over the K/V ranks of one q rank's cells: tiles, lists and keys bounds, and the cells
  /// with a tile.
  struct RowSums {
    int64_t tiles = 0;
    int64_t lists = 0;
    int64_t keys = 0;
    int64_t cells_with_tiles = 0;
  };
  /// at, lists_at and keys_at of (q, kv) summed over kv. Precondition: form != none.
  RowSums row_sums(int32_t q) const;
  /// Adds the table of heads of other K/V heads (tiles, lists and keys add up).
  RankPairTiles& operator+=(const RankPairTiles& other);
  /// Adds the table of another head of the same K/V head: tiles and lists add up, keys take the
  /// larger count of each entry (the K/V head lists at least what either lists).
  RankPairTiles& merge_same_kv_head(const RankPairTiles& other);
};

/// The rank-pair tile table of `heads` (diagonals as for work_lower_bound).
/// Without `with_keys`, `keys` holds zeros (a bound still, for cost models without key lists).
RankPairTiles rank_pair_tiles(const std::vector<const KeptPattern*>& heads, const TokenLayout& layout, int64_t block,
                              const std::vector<const std::vector<int64_t>*>& diagonals = {}, bool with_keys = true);

/// The ascending touched diagonals { floor(d/unit), ceil(d/unit) } of the slash offsets d of a
/// normalized pattern (ascending, starting with 0), at granularity `unit` tokens (>= 1).
std::vector<int64_t> touched_diagonals(const KeptPattern& pattern, int64_t unit);

}  // namespace sparsering
