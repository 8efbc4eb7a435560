#include "tuner/search/work_lower_bound.hpp"

#include <algorithm>
#include <limits>

#include "common/error.hpp"

namespace sparsering {

namespace {

int64_t clamp_to(int64_t v, int64_t lo, int64_t hi) { return std::max(lo, std::min(v, hi)); }

/// Columns per item of the backward's column pass (BlockGeometry::column_item of the simulator's
/// geometries).
constexpr int64_t kColumnItem = 64;

/// Aligned layouts as ranks owning stripes of g blocks (file comment): periodic (contiguous,
/// striped) or zigzag (two half-chunk units per rank).
struct AlignedModel {
  bool zigzag = false;
  int64_t ranks = 1;    // W
  int64_t g = 1;        // blocks per stripe or unit
  int64_t stripes = 1;  // periodic: stripes per rank
  int64_t blocks = 0;   // N / b

  /// Rank owning unit (stripe, or zigzag half chunk) `unit`.
  int64_t owner_of_unit(int64_t unit) const {
    if (zigzag) return unit < ranks ? unit : 2 * ranks - 1 - unit;
    return unit % ranks;
  }
  /// Rank owning global block `block`.
  int64_t owner(int64_t block) const { return owner_of_unit(block / g); }
  /// Number of stripe (or unit) diagonals F is defined on.
  int64_t diagonals() const { return zigzag ? 2 * ranks : stripes * ranks; }
};

bool aligned_model(const TokenLayout& layout, int64_t block, AlignedModel& m) {
  const int64_t n = layout.seq_len_tokens();
  const int64_t w = layout.ranks();
  m.ranks = w;
  if (n % block != 0) return false;
  m.blocks = n / block;
  switch (layout.kind()) {
    case LayoutKind::contiguous:
      if ((n / w) % block != 0) return false;
      m.g = n / w / block;
      m.stripes = 1;
      return true;
    case LayoutKind::zigzag:
      if (n % (2 * w) != 0 || (n / (2 * w)) % block != 0) return false;
      m.zigzag = true;
      m.g = n / (2 * w) / block;
      return true;
    case LayoutKind::striped:
      if (layout.granularity_tokens() % block != 0) return false;
      m.g = layout.granularity_tokens() / block;
      m.stripes = n / (layout.granularity_tokens() * w);
      return true;
  }
  return false;
}

std::vector<int64_t> aligned_list_table(const std::vector<const std::vector<int64_t>*>& diagonals, const AlignedModel& m);
std::vector<int64_t> aligned_key_table(const std::vector<const std::vector<int64_t>*>& diagonals, const AlignedModel& m);

/// Whether a unit diagonal lists as many keys as rows (contiguous and zigzag units: file comment of
/// work_lower_bound.hpp), so the key table is the list table.
bool keys_equal_rows(const AlignedModel& m) { return m.zigzag || m.stripes == 1; }

/// Striped layouts: a key block of stripe residue t (in [0, g)) of rank src meets, through
/// diagonal d, a row of rank src + u (mod W); the slot t x W + u of per-(t, u) tables.
size_t rank_offset_slot(const AlignedModel& m, int64_t t, int64_t d) {
  return static_cast<size_t>(t * m.ranks + ((t + d) % (m.g * m.ranks)) / m.g);
}

/// Striped with stripes finer than the block: G | b and whole local blocks.
bool fine_striped(const TokenLayout& layout, int64_t block) {
  return layout.kind() == LayoutKind::striped && layout.granularity_tokens() < block &&
         block % layout.granularity_tokens() == 0 && layout.local_len() % block == 0;
}

/// Adds, for every rank p, the count of blocks below `x` that p owns, into a difference array
/// over p (size W + 1), `sign` times.
void add_count_below(const AlignedModel& m, int64_t x, int64_t sign, std::vector<int64_t>& diff) {
  const auto add_range = [&](int64_t from, int64_t to, int64_t value) {  // ranks [from, to)
    from = clamp_to(from, 0, m.ranks);
    to = clamp_to(to, 0, m.ranks);
    if (from >= to || value == 0) return;
    diff[static_cast<size_t>(from)] += sign * value;
    diff[static_cast<size_t>(to)] -= sign * value;
  };
  if (m.zigzag) {
    // First unit of p covers blocks [p g, (p+1) g): full for p < x / g, partial for p = x / g.
    const int64_t u = x / m.g;
    add_range(0, u, m.g);
    add_range(u, u + 1, x % m.g);
    // Second unit 2W-1-p: full when 2W-1-p < u, i.e. p > 2W-1-u.
    add_range(2 * m.ranks - u, m.ranks, m.g);
    add_range(2 * m.ranks - 1 - u, 2 * m.ranks - u, x % m.g);
    return;
  }
  const int64_t period = m.g * m.ranks;
  add_range(0, m.ranks, (x / period) * m.g);
  const int64_t rest = x % period;
  add_range(0, rest / m.g, m.g);
  add_range(rest / m.g, rest / m.g + 1, rest % m.g);
}

/// Calls add(e, weight) for every stripe (or unit) diagonal e a touched diagonal d lands on:
/// the terms of F of the file comment, d = e g + rem giving g - rem to e and rem to e + 1.
template <class Add>
void stripe_weight_terms(const std::vector<const std::vector<int64_t>*>& diagonals, const AlignedModel& m, Add add) {
  for (const std::vector<int64_t>* set : diagonals) {
    for (const int64_t d : *set) {
      const int64_t e = d / m.g;
      const int64_t rem = d - e * m.g;
      if (e < m.diagonals()) add(e, m.g - rem);
      if (rem > 0 && e + 1 < m.diagonals()) add(e + 1, rem);
    }
  }
}

/// F over stripe (or unit) diagonals, summed over the heads (file comment).
std::vector<int64_t> stripe_weights(const std::vector<const std::vector<int64_t>*>& diagonals, const AlignedModel& m) {
  std::vector<int64_t> f(static_cast<size_t>(m.diagonals()), 0);
  stripe_weight_terms(diagonals, m, [&](int64_t e, int64_t weight) { f[static_cast<size_t>(e)] += weight; });
  return f;
}

/// Periodic layouts: tiles of (p, src) as a function of r = p - src, at [r + W - 1]: the sum over
/// stripes s of (stripes - s) F[s W + r]. F is sparse (the touched diagonals), so each of its
/// terms e = q W + u goes straight to r = u (s = q) and r = u - W (s = q + 1): O(|D|), not O(N/G).
std::vector<int64_t> periodic_offsets(const std::vector<const std::vector<int64_t>*>& diagonals, const AlignedModel& m) {
  const int64_t w = m.ranks;
  std::vector<int64_t> by_offset(static_cast<size_t>(2 * w - 1), 0);
  stripe_weight_terms(diagonals, m, [&](int64_t e, int64_t weight) {
    const int64_t q = e / w;
    const int64_t u = e - q * w;
    by_offset[static_cast<size_t>(u + w - 1)] += (m.stripes - q) * weight;
    if (u > 0) by_offset[static_cast<size_t>(u - 1)] += (m.stripes - q - 1) * weight;
  });
  return by_offset;
}

/// The given diagonal sets, or computed ones kept in `storage`.
std::vector<const std::vector<int64_t>*> diagonal_sets(const std::vector<const KeptPattern*>& heads,
                                                       const std::vector<const std::vector<int64_t>*>& given,
                                                       int64_t block, std::vector<std::vector<int64_t>>& storage) {
  if (!given.empty()) return given;
  std::vector<const std::vector<int64_t>*> out;
  storage.reserve(heads.size());
  for (const KeptPattern* head : heads) {
    storage.push_back(touched_diagonals(*head, block));
    out.push_back(&storage.back());
  }
  return out;
}

/// Rows with a tile between two units (stripes of g blocks) e = x - y >= 0 apart, per unit
/// diagonal e: a diagonal d = q g + rem lists the rows [rem, g) of unit diagonal q and the rows
/// [0, rem) of q + 1, so the rows of e are [0, prefix[e]) and [suffix[e], g) (file comment).
struct UnitRows {
  std::vector<int64_t> prefix;  // largest rem of the diagonals of unit diagonal e - 1 (0 if none)
  std::vector<int64_t> suffix;  // smallest rem of the diagonals of unit diagonal e (g if none)

  void build(const std::vector<int64_t>& d_set, int64_t g, int64_t units) {
    prefix.assign(static_cast<size_t>(units), 0);
    suffix.assign(static_cast<size_t>(units), g);
    for (const int64_t d : d_set) {
      const int64_t q = d / g;
      if (q >= units) break;  // ascending
      const int64_t rem = d - q * g;
      suffix[static_cast<size_t>(q)] = std::min(suffix[static_cast<size_t>(q)], rem);
      if (q + 1 < units) prefix[static_cast<size_t>(q + 1)] = std::max(prefix[static_cast<size_t>(q + 1)], rem);
    }
  }
  /// Rows of a unit with a tile e units back (0 for e < 0).
  int64_t rows(int64_t e, int64_t g) const {
    if (e < 0) return 0;
    return std::min(g, prefix[static_cast<size_t>(e)] + g - suffix[static_cast<size_t>(e)]);
  }
};

/// Key block of the earliest kept column of each rank (m.blocks if it has none).
void first_columns(const KeptPattern& head, const AlignedModel& m, int64_t block, std::vector<int64_t>& first) {
  first.assign(static_cast<size_t>(m.ranks), m.blocks);
  int64_t open = m.ranks;
  for (const int64_t v : head.vertical_positions) {  // ascending
    const int64_t key_block = v / block;
    int64_t& slot = first[static_cast<size_t>(m.owner(key_block))];
    if (slot == m.blocks) {
      slot = key_block;
      if (--open == 0) break;
    }
  }
}

constexpr int64_t kNone = std::numeric_limits<int64_t>::max();

/// Striped layouts: the smallest touched diagonal below the sequence's blocks of each residue
/// modulo the period P = g W (kNone if none). A diagonal lands row x on key block x - d, and
/// which rank owns that depends on d mod P alone, so the smallest diagonal landing x on a rank
/// is the smallest of these over the residues that do.
void smallest_by_residue(const std::vector<int64_t>& d_set, const AlignedModel& m, std::vector<int64_t>& by_residue) {
  const int64_t period = m.g * m.ranks;
  by_residue.assign(static_cast<size_t>(period), kNone);
  int64_t open = period;
  for (const int64_t d : d_set) {  // ascending: the first of a residue is its smallest
    if (d >= m.blocks || open == 0) break;
    int64_t& slot = by_residue[static_cast<size_t>(d % period)];
    if (slot == kNone) {
      slot = d;
      --open;
    }
  }
}

/// The smallest of `by_residue` over the g residues first, first + 1, .., first + g - 1 (mod P).
int64_t smallest_in_window(const std::vector<int64_t>& by_residue, const AlignedModel& m, int64_t first) {
  const int64_t period = m.g * m.ranks;
  first = (first % period + period) % period;
  int64_t best = kNone;
  for (int64_t t = 0; t < m.g; ++t) {
    const int64_t r = first + t;
    best = std::min(best, by_residue[static_cast<size_t>(r < period ? r : r - period)]);
  }
  return best;
}

/// Striped layouts: d_min[x x W + src], the smallest touched diagonal that lands row residue x
/// (modulo the period P = g W, x in [x_from, x_from + rows)) on a key block of src (kNone if none):
/// d mod P = (x - y) mod P for a key residue y of src. O(|D| + rows W g).
void smallest_diagonals(const std::vector<int64_t>& d_set, const AlignedModel& m, int64_t x_from, int64_t rows,
                        std::vector<int64_t>& d_min, std::vector<int64_t>& by_residue) {
  const int64_t w = m.ranks;
  const int64_t period = m.g * w;
  smallest_by_residue(d_set, m, by_residue);
  d_min.assign(static_cast<size_t>(rows * w), kNone);
  for (int64_t x = 0; x < rows; ++x) {
    const int64_t row = (x_from + x) % period;
    for (int64_t src = 0; src < w; ++src) {
      // Residues row - src g - t, t in [0, g).
      d_min[static_cast<size_t>(x * w + src)] = smallest_in_window(by_residue, m, row - src * m.g - m.g + 1);
    }
  }
}

/// Striped layouts: d_min[y x W + p], the smallest touched diagonal that lands key residue y
/// (modulo the period P = g W, y in [0, g): the key residues of rank 0) on a row block of p, that
/// is (y + d) mod P among p's residues (kNone if none).
void smallest_key_diagonals(const std::vector<int64_t>& d_set, const AlignedModel& m, std::vector<int64_t>& d_min,
                            std::vector<int64_t>& by_residue) {
  const int64_t w = m.ranks;
  smallest_by_residue(d_set, m, by_residue);
  d_min.assign(static_cast<size_t>(m.g * w), kNone);
  for (int64_t y = 0; y < m.g; ++y) {
    for (int64_t p = 0; p < w; ++p) {
      // d mod P = (z - y) mod P for a row residue z = p g + t of p.
      d_min[static_cast<size_t>(y * w + p)] = smallest_in_window(by_residue, m, p * m.g - y);
    }
  }
}

/// Lists of every cell, added to `out`, exact: a row (head, query block I) has a list on the
/// chunk of src iff it has a tile there or sees a kept column of src, i.e. I >= the key block K of
/// src's earliest column (the kernel's semantics: a row without a tile covers no column). Both
/// are unions of simple row sets:
///  - contiguous and zigzag: in a unit x of g rows, the rows with a tile on key unit y are
///    [0, prefix[x - y]) and [suffix[x - y], g) (UnitRows), the ones that see the column
///    [K - x g, g): a union of one prefix and one suffix per unit;
///  - striped: per row residue x modulo the period P = g W, the rows i = x + k P from the
///    smallest touched diagonal d landing x on src ((x - d) mod P among src's residues) and the
///    rows from K: the rows from the smaller of the two.
void aligned_lists(const std::vector<const KeptPattern*>& heads, const std::vector<const std::vector<int64_t>*>& diagonals,
                   const AlignedModel& m, int64_t block, WorkMatrix& out) {
  const int64_t w = m.ranks;
  std::vector<int64_t> first;
  if (m.zigzag || m.stripes == 1) {
    const int64_t units = m.zigzag ? 2 * w : w;
    UnitRows unit;
    for (size_t h = 0; h < heads.size(); ++h) {
      unit.build(*diagonals[h], m.g, units);
      first_columns(*heads[h], m, block, first);
      for (int64_t p = 0; p < w; ++p) {
        for (int64_t src = 0; src < w; ++src) {
          int64_t rows = 0;
          const int64_t row_units[2] = {p, 2 * w - 1 - p};
          const int64_t key_units[2] = {src, 2 * w - 1 - src};
          for (int i = 0; i < (m.zigzag ? 2 : 1); ++i) {
            const int64_t x = row_units[i];
            int64_t prefix = 0;
            int64_t suffix = m.g;
            for (int j = 0; j < (m.zigzag ? 2 : 1); ++j) {
              const int64_t e = x - key_units[j];
              if (e < 0) continue;
              prefix = std::max(prefix, unit.prefix[static_cast<size_t>(e)]);
              suffix = std::min(suffix, unit.suffix[static_cast<size_t>(e)]);
            }
            suffix = std::min(suffix, clamp_to(first[static_cast<size_t>(src)] - x * m.g, 0, m.g));
            rows += std::min(m.g, prefix + m.g - suffix);
          }
          out.at(static_cast<int32_t>(p), static_cast<int32_t>(src)).lists += rows;
        }
      }
    }
    return;
  }
  const int64_t period = m.g * w;
  std::vector<int64_t> d_min;
  std::vector<int64_t> by_residue;
  const auto rows_from = [&](int64_t x, int64_t lo) {  // rows i = x + k P with lo <= i < blocks
    if (lo == kNone) return int64_t{0};
    const int64_t all = (m.blocks - x + period - 1) / period;
    const int64_t below = lo > x ? (lo - x + period - 1) / period : 0;
    return std::max<int64_t>(0, all - below);
  };
  for (size_t h = 0; h < heads.size(); ++h) {
    smallest_diagonals(*diagonals[h], m, 0, period, d_min, by_residue);
    first_columns(*heads[h], m, block, first);
    for (int64_t p = 0; p < w; ++p) {
      for (int64_t src = 0; src < w; ++src) {
        const int64_t seen = first[static_cast<size_t>(src)] < m.blocks ? first[static_cast<size_t>(src)] : kNone;
        int64_t rows = 0;
        for (int64_t x = p * m.g; x < (p + 1) * m.g; ++x) {
          rows += rows_from(x, std::min(d_min[static_cast<size_t>(x * w + src)], seen));
        }
        out.at(static_cast<int32_t>(p), static_cast<int32_t>(src)).lists += rows;
      }
    }
  }
}

/// One head's column count bound, added to `out` ([p x W + src]): a row's columns are the visible
/// ones less those in its listed key blocks, so a cell's columns are the (row, column) pairs in
/// which the column is visible, less those in which it lies in a listed key block. The first is
/// exact: a column in key block K is visible to every row of p from K on. The second is at most,
/// per column in key block J, the touched diagonals d with J + d on a row of p: striped layouts
/// by the column's residue in its stripe (t) and (p - src) mod W, in O(|D| g); contiguous and
/// zigzag by the unit diagonal e = a - b of the units holding the row and the column, J + d in a
/// row unit e units on meaning d in [e g - g + 1, e g + g - 1] (a window two units wide). The
/// cell gets the difference, when positive. `columns` lists each K/V rank's key blocks of kept
/// columns (one entry per column), ascending.
void add_visible_minus_covered(const std::vector<std::vector<int64_t>>& columns, const std::vector<int64_t>& d_set,
                               const AlignedModel& m, std::vector<int64_t>& out) {
  const int64_t w = m.ranks;
  const auto ww = static_cast<size_t>(w);
  std::vector<int64_t> visible(ww + 1);
  const bool units = m.zigzag || m.stripes == 1;
  // Diagonal counts: units: per unit diagonal e, #D in [e g - g + 1, e g + g - 1]; striped: per
  // stripe residue t and rank offset u, #D with ((t + d) mod P) / g = u.
  std::vector<int64_t> window;
  std::vector<int64_t> by_offset;
  if (units) {
    const int64_t unit_count = m.zigzag ? 2 * w : w;
    window.assign(static_cast<size_t>(unit_count), 0);
    for (int64_t e = 0; e < unit_count; ++e) {
      const auto lo = std::lower_bound(d_set.begin(), d_set.end(), e * m.g - m.g + 1);
      const auto hi = std::lower_bound(d_set.begin(), d_set.end(), e * m.g + m.g);
      window[static_cast<size_t>(e)] = static_cast<int64_t>(hi - lo);
    }
  } else {
    by_offset.assign(static_cast<size_t>(m.g * w), 0);
    for (const int64_t d : d_set) {
      for (int64_t t = 0; t < m.g; ++t) ++by_offset[rank_offset_slot(m, t, d)];
    }
  }
  std::vector<int64_t> per_part;  // columns of src per unit (units) or per stripe residue (striped)
  for (size_t src = 0; src < ww; ++src) {
    const std::vector<int64_t>& key_blocks = columns[src];
    if (key_blocks.empty()) continue;
    std::fill(visible.begin(), visible.end(), 0);
    add_count_below(m, m.blocks, static_cast<int64_t>(key_blocks.size()), visible);
    per_part.assign(static_cast<size_t>(units ? 2 : m.g), 0);
    for (const int64_t k : key_blocks) {
      add_count_below(m, k, -1, visible);
      ++per_part[static_cast<size_t>(units ? (k / m.g == static_cast<int64_t>(src) ? 0 : 1) : k % m.g)];
    }
    int64_t seen = 0;
    for (size_t p = 0; p < ww; ++p) {
      seen += visible[p];
      int64_t covered = 0;
      if (units) {
        const int64_t a[2] = {static_cast<int64_t>(p), 2 * w - 1 - static_cast<int64_t>(p)};
        const int64_t b[2] = {static_cast<int64_t>(src), 2 * w - 1 - static_cast<int64_t>(src)};
        for (int j = 0; j < (m.zigzag ? 2 : 1); ++j) {
          for (int i = 0; i < (m.zigzag ? 2 : 1); ++i) {
            const int64_t e = a[i] - b[j];
            if (e >= 0) covered += per_part[static_cast<size_t>(j)] * window[static_cast<size_t>(e)];
          }
        }
      } else {
        const auto u = static_cast<size_t>((static_cast<int64_t>(p) - static_cast<int64_t>(src) + w) % w);
        for (int64_t t = 0; t < m.g; ++t) covered += per_part[static_cast<size_t>(t)] * by_offset[static_cast<size_t>(t) * ww + u];
      }
      out[p * ww + src] += std::max<int64_t>(0, seen - covered);
    }
  }
}

void aligned_bound(const std::vector<const KeptPattern*>& heads, const std::vector<const std::vector<int64_t>*>& given,
                   const AlignedModel& m, int64_t block, ColumnBound columns, const BackwardTerms& backward, WorkMatrix& out) {
  const bool column_counts = backward.columns;
  const bool column_units = backward.column_units;
  const int64_t w = m.ranks;
  const auto ww = static_cast<size_t>(w);
  std::vector<std::vector<int64_t>> computed;
  const std::vector<const std::vector<int64_t>*> diagonals = diagonal_sets(heads, given, block, computed);
  if (m.zigzag) {
    const std::vector<int64_t> f = stripe_weights(diagonals, m);
    const auto f_at = [&](int64_t e) { return e >= 0 && e < m.diagonals() ? f[static_cast<size_t>(e)] : int64_t{0}; };
    for (int64_t p = 0; p < w; ++p) {
      for (int64_t src = 0; src < w; ++src) {
        const int64_t a[2] = {p, 2 * w - 1 - p};
        const int64_t b[2] = {src, 2 * w - 1 - src};
        int64_t tiles = 0;
        for (const int64_t x : a) {
          for (const int64_t y : b) tiles += f_at(x - y);
        }
        out.at(static_cast<int32_t>(p), static_cast<int32_t>(src)).tiles = tiles;
      }
    }
  } else {
    const std::vector<int64_t> by_offset = periodic_offsets(diagonals, m);
    for (int64_t p = 0; p < w; ++p) {
      for (int64_t src = 0; src < w; ++src) {
        out.at(static_cast<int32_t>(p), static_cast<int32_t>(src)).tiles = by_offset[static_cast<size_t>(p - src + w - 1)];
      }
    }
  }

  aligned_lists(heads, diagonals, m, block, out);
  if (columns == ColumnBound::none) return;
  const bool dense_columns = columns == ColumnBound::dense;
  // Chunks, per (head, K/V rank src) with kept columns, K = key block of src's earliest column:
  //  - query blocks q in [K, Q) see fewer than block + 1 of src's columns (Q = the key block of
  //    src's (block + 1)-th column, or the end): one chunk where K's block is not covered, counted
  //    in aggregate (owned query blocks in [K, Q) minus touched diagonals d with K + d < Q);
  //  - query blocks q >= Q: the larger of that chunk and ceil((visible columns - covered-block
  //    bound x most columns per key block) / block).
  std::vector<int64_t> covered(ww * ww, 0);   // [src x W + p]
  std::vector<std::vector<int64_t>> below(ww, std::vector<int64_t>(ww + 1, 0));  // [src] diff over p
  // Rows from the (block + 1)-th column on, per [p x W + src]: their chunks, and for the
  // backward's column pass the rows with a chunk (column lists), the columns and 64-column items.
  struct ColumnTally {
    int64_t chunks = 0;
    int64_t lists = 0;
    int64_t columns = 0;
    int64_t items = 0;
  };
  std::vector<ColumnTally> heavy(ww * ww);
  std::vector<std::vector<int64_t>> column_blocks(ww);  // per src: key blocks of its columns, ascending
  std::vector<int64_t> top_columns;  // of the src being bounded: column counts of its key blocks, largest first, summed
  std::vector<uint64_t> d_bits;
  std::vector<int64_t> d_prefix;   // contiguous, zigzag: #D below x
  std::vector<int64_t> d_cyclic;   // striped: prefix over residues of D mod (g W), twice around
  std::vector<int64_t> events;     // rows where what a row counts may change
  std::vector<int64_t> by_residue;     // striped: a row's chunks by its residue modulo the period
  std::vector<int64_t> residue_cover;  // striped, per src: covered-block count by residue
  std::vector<int64_t> residue_owner;  // striped: owner rank by residue
  const int64_t period = m.g * w;
  int block_shift = 0;  // block is a power of two in the search; otherwise round up by division
  while ((int64_t{1} << block_shift) < block) ++block_shift;
  const bool power_of_two = (int64_t{1} << block_shift) == block;
  // The owner of every block, looked up instead of divided out in the loops below.
  std::vector<int32_t> owner_of(static_cast<size_t>(m.blocks));
  // Units in order; periodic layouts cycle through the ranks (counted, not divided out).
  int32_t cycle = 0;
  for (int64_t unit = 0, x = 0; x < m.blocks; ++unit) {
    const auto owner = m.zigzag ? static_cast<int32_t>(m.owner_of_unit(unit)) : cycle;
    if (!m.zigzag && ++cycle == m.ranks) cycle = 0;
    for (int64_t i = 0; i < m.g && x < m.blocks; ++i, ++x) owner_of[static_cast<size_t>(x)] = owner;
  }
  std::vector<int64_t> counted_columns(ww * ww, 0);  // [p x W + src]: visible minus covered, per head
  std::vector<std::vector<int64_t>> by_rank_offset;  // striped, per head: [t x W + u] the d landing t on offset u
  for (size_t hi = 0; hi < heads.size(); ++hi) {
    for (auto& list : column_blocks) list.clear();
    for (const int64_t v : heads[hi]->vertical_positions) {
      const int64_t key_block = power_of_two ? v >> block_shift : v / block;
      column_blocks[static_cast<size_t>(owner_of[static_cast<size_t>(key_block)])].push_back(key_block);
    }
    const std::vector<int64_t>& d_set = *diagonals[hi];
    if (column_counts) add_visible_minus_covered(column_blocks, d_set, m, counted_columns);
    by_rank_offset.clear();
    bool prepared = false;
    for (size_t src = 0; src < ww; ++src) {
      const std::vector<int64_t>& cols = column_blocks[src];
      if (cols.empty()) continue;
      const int64_t k = cols.front();
      const int64_t dense_from =
          dense_columns && static_cast<int64_t>(cols.size()) > block ? cols[static_cast<size_t>(block)] : m.blocks;
      add_count_below(m, dense_from, 1, below[src]);
      add_count_below(m, k, -1, below[src]);
      // Touched diagonals d with k + d before dense_from, by the rank owning block k + d: one by
      // one when they are few, else by the ranks' blocks (units) or the d's residues (striped).
      int64_t* cov = covered.data() + src * ww;
      const auto below_limit = std::lower_bound(d_set.begin(), d_set.end(), dense_from - k);
      if (below_limit - d_set.begin() <= 4 * w) {
        for (auto it = d_set.begin(); it != below_limit; ++it) ++cov[owner_of[static_cast<size_t>(k + *it)]];
      } else if (m.zigzag || m.stripes == 1) {
        // Unit a holds blocks [a g, a g + g): its d lie in [a g - k, a g + g - k).
        for (int64_t a = k / m.g; a * m.g < dense_from; ++a) {
          const int64_t from = std::max(a * m.g, k) - k;
          const int64_t to = std::min(a * m.g + m.g, dense_from) - k;
          const auto n = std::lower_bound(d_set.begin(), d_set.end(), to) - std::lower_bound(d_set.begin(), d_set.end(), from);
          cov[owner_of[static_cast<size_t>(a * m.g)]] += static_cast<int64_t>(n);
        }
      } else {
        // Block k + d lies on rank (src + ((t + d) mod P) / g) mod W, t = k mod g.
        if (by_rank_offset.empty()) {  // once per head
          by_rank_offset.assign(static_cast<size_t>(m.g * w), {});
          for (const int64_t d : d_set) {
            for (int64_t t = 0; t < m.g; ++t) by_rank_offset[rank_offset_slot(m, t, d)].push_back(d);
          }
        }
        const int64_t t = k % m.g;
        for (int64_t u = 0; u < w; ++u) {
          const std::vector<int64_t>& ds = by_rank_offset[static_cast<size_t>(t * w + u)];
          const auto n = std::lower_bound(ds.begin(), ds.end(), dense_from - k) - ds.begin();
          cov[(src + static_cast<size_t>(u)) % ww] += static_cast<int64_t>(n);
        }
      }
      if (dense_from >= m.blocks) continue;
      // c covered key blocks hold at most the c largest per-block column counts of src.
      top_columns.clear();
      for (size_t a = 0; a < cols.size();) {
        size_t b = a;
        while (b < cols.size() && cols[b] == cols[a]) ++b;
        top_columns.push_back(static_cast<int64_t>(b - a));
        a = b;
      }
      std::sort(top_columns.begin(), top_columns.end(), std::greater<>());
      for (size_t a = 1; a < top_columns.size(); ++a) top_columns[a] += top_columns[a - 1];
      const auto covered_columns = [&](int64_t covered_key_blocks) {
        if (covered_key_blocks <= 0) return int64_t{0};
        return top_columns[static_cast<size_t>(std::min<int64_t>(covered_key_blocks, static_cast<int64_t>(top_columns.size())) - 1)];
      };
      if (!prepared) {  // diagonal lookups of this head, built once
        prepared = true;
        d_bits.assign(static_cast<size_t>((m.blocks + 63) / 64), 0);
        for (const int64_t d : d_set) {
          if (d < m.blocks) d_bits[static_cast<size_t>(d >> 6)] |= uint64_t{1} << (d & 63);
        }
        if (m.zigzag || m.stripes == 1) {
          d_prefix.assign(static_cast<size_t>(m.blocks + 1), 0);
          for (const int64_t d : d_set) {
            if (d < m.blocks) ++d_prefix[static_cast<size_t>(d + 1)];
          }
          for (size_t x = 1; x < d_prefix.size(); ++x) d_prefix[x] += d_prefix[x - 1];
        } else {
          d_cyclic.assign(static_cast<size_t>(2 * period + 1), 0);
          for (const int64_t d : d_set) {
            const int64_t r = d % period;
            ++d_cyclic[static_cast<size_t>(r + 1)];
            ++d_cyclic[static_cast<size_t>(r + period + 1)];
          }
          for (size_t x = 1; x < d_cyclic.size(); ++x) d_cyclic[x] += d_cyclic[x - 1];
        }
      }
      // Touched diagonals d with q - d in a key block of src (for striped: modulo the stripe
      // period, any d): at least the covered key blocks of src in query block q.
      const auto prefix_count = [&](int64_t lo, int64_t hi_excl) {  // #D in [lo, hi_excl)
        lo = clamp_to(lo, 0, m.blocks);
        hi_excl = clamp_to(hi_excl, 0, m.blocks);
        return hi_excl > lo ? d_prefix[static_cast<size_t>(hi_excl)] - d_prefix[static_cast<size_t>(lo)] : int64_t{0};
      };
      const auto key = static_cast<int64_t>(src);
      const auto covered_blocks = [&](int64_t q) {
        if (m.zigzag) {
          const int64_t a = key * m.g;
          const int64_t b2 = (2 * w - 1 - key) * m.g;
          return prefix_count(q - a - m.g + 1, q - a + 1) + prefix_count(q - b2 - m.g + 1, q - b2 + 1);
        }
        if (m.stripes == 1) return prefix_count(q - key * m.g - m.g + 1, q - key * m.g + 1);
        // Residues r = d mod (g W) with (q - r) mod (g W) in [src g, src g + g): g of them.
        const int64_t hi_r = ((q - key * m.g) % period + period) % period;
        const int64_t from = hi_r - (m.g - 1) + period;  // shifted into [0, 2 period)
        return d_cyclic[static_cast<size_t>(from + m.g)] - d_cyclic[static_cast<size_t>(from)];
      };
      // Columns a row of `visible` columns gathers at least, given a bound of its covered key blocks.
      const auto rest_of = [&](int64_t visible, int64_t covered_key_blocks) {
        return std::max<int64_t>(0, visible - covered_columns(covered_key_blocks));
      };
      const auto chunks_of = [&](int64_t rest) -> int64_t {
        return power_of_two ? ((rest + block - 1) >> block_shift) : (rest + block - 1) / block;
      };
      const auto rep_uncovered = [&](int64_t q) {
        const int64_t d = q - k;
        return ((d_bits[static_cast<size_t>(d >> 6)] >> (d & 63)) & 1U) == 0;
      };
      // `rows` rows of rank `owner` that gather at least `rest` columns each, or, with rest 0,
      // rows whose representative column is uncovered (one column, one chunk, one item each).
      const auto add = [&](int64_t owner, int64_t rest, int64_t rows) {
        ColumnTally& tally = heavy[static_cast<size_t>(owner) * ww + src];
        const int64_t gathered = std::max<int64_t>(rest, 1);
        tally.chunks += chunks_of(gathered) * rows;
        if (!column_units) return;
        tally.lists += rows;
        tally.columns += gathered * rows;
        tally.items += (gathered + kColumnItem - 1) / kColumnItem * rows;
      };
      const auto rep_hits = [&](int64_t a, int64_t b) {  // rows in [a, b) whose representative is covered
        return static_cast<int64_t>(std::lower_bound(d_set.begin(), d_set.end(), b - k) -
                                    std::lower_bound(d_set.begin(), d_set.end(), a - k));
      };
      // Rows [a, b) in which src's visible column count is constant: row by row when short,
      // otherwise by what repeats (striped: residues of the stripe period; contiguous and zigzag:
      // the pieces between the rows where a covered-block window or the owner changes).
      const auto rows = [&](int64_t a, int64_t b, int64_t visible) {
        if (m.zigzag || m.stripes == 1) {
          if (b - a > 32) {
            events.assign({a, b});
            const int64_t windows[2] = {key * m.g, (2 * w - 1 - key) * m.g};
            for (int i = 0; i < (m.zigzag ? 2 : 1); ++i) {
              for (const int64_t shift : {windows[i], windows[i] + m.g}) {  // a diagonal enters, leaves
                auto from = std::upper_bound(d_set.begin(), d_set.end(), a - shift);
                const auto to = std::lower_bound(d_set.begin(), d_set.end(), b - shift);
                for (; from < to; ++from) events.push_back(*from + shift);
              }
            }
            for (int64_t u = a / m.g + 1; u * m.g < b; ++u) events.push_back(u * m.g);
            std::sort(events.begin(), events.end());
            events.erase(std::unique(events.begin(), events.end()), events.end());
            for (size_t e = 0; e + 1 < events.size(); ++e) {
              const int64_t from = events[e];
              const int64_t to = events[e + 1];
              const int64_t rest = rest_of(visible, covered_blocks(from));
              add(owner_of[static_cast<size_t>(from)], rest, rest >= 1 ? to - from : (to - from) - rep_hits(from, to));
            }
            return;
          }
        } else if (b - a > period) {
          // Covered blocks and owner depend on the row's residue modulo the period.
          if (residue_cover.empty()) {  // once per (head, src)
            residue_cover.resize(static_cast<size_t>(period));
            residue_owner.resize(static_cast<size_t>(period));
            const int64_t start = key * m.g;  // < period
            for (int64_t r = 0; r < period; ++r) {
              const int64_t hi_r = r >= start ? r - start : r - start + period;
              const int64_t from = hi_r - (m.g - 1) + period;
              residue_cover[static_cast<size_t>(r)] = d_cyclic[static_cast<size_t>(from + m.g)] - d_cyclic[static_cast<size_t>(from)];
              residue_owner[static_cast<size_t>(r)] = r / m.g;
            }
          }
          by_residue.resize(static_cast<size_t>(period));
          const int64_t a_mod = a % period;
          const int64_t full = (b - a) / period;
          const int64_t extra = (b - a) - full * period;
          for (int64_t r = 0; r < period; ++r) {
            const int64_t rest = rest_of(visible, residue_cover[static_cast<size_t>(r)]);
            by_residue[static_cast<size_t>(r)] = rest;
            const int64_t offset = r >= a_mod ? r - a_mod : r - a_mod + period;  // first row of residue r is a + offset
            add(residue_owner[static_cast<size_t>(r)], rest, full + (offset < extra ? 1 : 0));
          }
          // Rows counting their representative column lose it where a diagonal covers it.
          const auto first_d = std::lower_bound(d_set.begin(), d_set.end(), a - k);
          for (auto it = first_d; it != d_set.end() && k + *it < b; ++it) {
            const int64_t r = (k + *it) % period;
            if (by_residue[static_cast<size_t>(r)] == 0) add(residue_owner[static_cast<size_t>(r)], 0, -1);
          }
          return;
        }
        for (int64_t q = a; q < b; ++q) {
          const int64_t rest = rest_of(visible, covered_blocks(q));
          if (rest >= 1 || rep_uncovered(q)) add(owner_of[static_cast<size_t>(q)], rest, 1);
        }
      };
      residue_cover.clear();
      size_t next = static_cast<size_t>(block);  // columns of src in key blocks up to the row
      for (int64_t q = dense_from; q < m.blocks;) {
        while (next < cols.size() && cols[next] <= q) ++next;
        const int64_t end = next < cols.size() ? cols[next] : m.blocks;
        rows(q, end, static_cast<int64_t>(next));
        q = end;
      }
    }
  }
  // Rows before the (block + 1)-th column: one column, chunk and item each where counted.
  std::vector<int64_t> single(ww * ww);  // [p x W + src]
  for (size_t src = 0; src < ww; ++src) {
    int64_t visible = 0;
    for (size_t p = 0; p < ww; ++p) {
      visible += below[src][p];
      single[p * ww + src] = visible - covered[src * ww + p];
    }
  }
  for (size_t p = 0; p < ww; ++p) {
    for (size_t src = 0; src < ww; ++src) {
      const size_t at = p * ww + src;
      const ColumnTally& tally = heavy[at];
      WorkCounts& cell = out.at(static_cast<int32_t>(p), static_cast<int32_t>(src));
      cell.column_chunks = single[at] + tally.chunks;
      if (!column_units) continue;
      cell.column_lists = single[at] + tally.lists;
      cell.columns = std::max(single[at] + tally.columns, counted_columns[at]);
      cell.column_items = single[at] + tally.items;
    }
  }
}

/// Fine stripes: fills `out` (tiles, lists and, with `with_chunks`, the representative chunks)
/// and returns the tiles by rank offset r = p - src at [r + W - 1]; `lists_by_offset`, if not
/// null, gets the rows with a tile by offset (the lists of a cell without its columns). `out` may
/// be null. Row i of (p, src) has a tile iff i >= the smallest diagonal of D_r, and sees the
/// earliest kept column of src from the first block whose last stripe reaches its stripe: its
/// lists are the rows from the smaller of the two.
std::vector<int64_t> fine_striped_bound(const std::vector<const KeptPattern*>& heads, const TokenLayout& layout,
                                        int64_t block, WorkMatrix* out, bool with_chunks,
                                        std::vector<int64_t>* lists_by_offset = nullptr) {
  const int64_t w = layout.ranks();
  const auto ww = static_cast<size_t>(w);
  const int64_t grain = layout.granularity_tokens();
  const int64_t m = block / grain;
  const int64_t local_blocks = layout.local_len() / block;
  const bool chunks = with_chunks && out != nullptr && w <= 128;  // costs W^2 log per head
  std::vector<int64_t> by_offset(2 * ww, 0);
  if (lists_by_offset != nullptr) lists_by_offset->assign(2 * ww - 1, 0);
  std::vector<std::vector<int64_t>> d_r(2 * ww);  // per r + W - 1: the block diagonals, ascending
  std::vector<int64_t> largest(2 * ww);            // per r + W - 1: the largest block diagonal so far
  for (const KeptPattern* head : heads) {
    for (auto& list : d_r) list.clear();
    std::fill(largest.begin(), largest.end(), int64_t{-1});
    // Stripe diagonal e = u W + r with r = e mod W or r = e mod W - W. For a fixed r, u grows with
    // e, so floor(u/m) and ceil(u/m) only fall to or below the largest one recorded when they
    // were recorded already: keeping the values above `largest` keeps each once, ascending.
    const auto add = [&](int64_t u, int64_t r) {
      const auto at = static_cast<size_t>(r + w - 1);
      for (const int64_t delta : {u / m, (u + m - 1) / m}) {
        if (delta <= largest[at]) continue;
        largest[at] = delta;
        if (delta >= local_blocks) continue;
        by_offset[at] += local_blocks - delta;
        d_r[at].push_back(delta);
      }
    };
    for (const int64_t e : touched_diagonals(*head, grain)) {
      add(e / w, e % w);
      if (e % w != 0) add(e / w + 1, e % w - w);
    }
    const auto tiled_from = [&](int64_t r) {  // first row with a tile at offset r (local_blocks if none)
      const std::vector<int64_t>& list = d_r[static_cast<size_t>(r + w - 1)];
      return list.empty() ? local_blocks : list.front();
    };
    if (lists_by_offset != nullptr) {
      for (int64_t r = -(w - 1); r < w; ++r) (*lists_by_offset)[static_cast<size_t>(r + w - 1)] += local_blocks - tiled_from(r);
    }
    if (out == nullptr) continue;
    // Earliest kept column of each K/V rank.
    std::vector<int64_t> rep(ww, -1);
    for (const int64_t v : head->vertical_positions) {
      const TokenOwner o = layout.owner(v);
      if (rep[static_cast<size_t>(o.ring_rank)] < 0) rep[static_cast<size_t>(o.ring_rank)] = v;
    }
    const auto first_seen = [&](int64_t p, int64_t v) {  // first local q block of p whose last stripe reaches v's
      const int64_t t = v / grain - p - (m - 1) * w;
      return t <= 0 ? int64_t{0} : (t + m * w - 1) / (m * w);
    };
    for (int64_t p = 0; p < w; ++p) {
      for (int64_t src = 0; src < w; ++src) {
        const int64_t v = rep[static_cast<size_t>(src)];
        const int64_t from = std::min(tiled_from(p - src), v < 0 ? local_blocks : first_seen(p, v));
        out->at(static_cast<int32_t>(p), static_cast<int32_t>(src)).lists += std::max<int64_t>(0, local_blocks - from);
      }
    }
    if (!chunks) continue;
    for (int64_t src = 0; src < w; ++src) {
      const int64_t v = rep[static_cast<size_t>(src)];
      if (v < 0) continue;
      const int64_t j = layout.owner(v).local_index / block;
      for (int64_t p = 0; p < w; ++p) {
        const int64_t i0 = first_seen(p, v);
        if (i0 >= local_blocks) continue;
        const std::vector<int64_t>& list = d_r[static_cast<size_t>(p - src + w - 1)];
        const auto first = std::lower_bound(list.begin(), list.end(), i0 - j);
        const auto last = std::lower_bound(list.begin(), list.end(), local_blocks - j);
        const int64_t covered = last > first ? static_cast<int64_t>(last - first) : 0;
        out->at(static_cast<int32_t>(p), static_cast<int32_t>(src)).column_chunks += (local_blocks - i0) - covered;
      }
    }
  }
  for (int64_t p = 0; p < w && out != nullptr; ++p) {
    for (int64_t src = 0; src < w; ++src) {
      out->at(static_cast<int32_t>(p), static_cast<int32_t>(src)).tiles = by_offset[static_cast<size_t>(p - src + w - 1)];
    }
  }
  by_offset.pop_back();  // the table has one spare slot: offsets run from -(W-1) to W-1
  return by_offset;
}

}  // namespace

std::vector<int64_t> touched_diagonals(const KeptPattern& pattern, int64_t unit) {
  require(unit >= 1, "diagonal unit must be >= 1 token, got ", unit);
  std::vector<int64_t> out;
  out.reserve(2 * pattern.slash_offsets.size() + 1);
  out.push_back(0);
  // Offsets ascend, so floor(d/unit) and ceil(d/unit) never fall below the last one written.
  for (const int64_t d : pattern.slash_offsets) {
    const int64_t lo = d / unit;
    const int64_t hi = lo + (d % unit != 0 ? 1 : 0);
    if (lo > out.back()) out.push_back(lo);
    if (hi > out.back()) out.push_back(hi);
  }
  return out;
}

bool exact_tile_count(const TokenLayout& layout, int64_t block) {
  AlignedModel m;
  return aligned_model(layout, block, m) || fine_striped(layout, block);
}

WorkMatrix work_lower_bound(const std::vector<const KeptPattern*>& heads, const TokenLayout& layout, int64_t block,
                            const std::vector<const std::vector<int64_t>*>& diagonals, ColumnBound columns,
                            const BackwardTerms& backward) {
  require(block >= 1, "block size must be >= 1 token, got ", block);
  const int64_t key_group = backward.key_group;
  require(key_group >= 0, "work bound: heads per K/V head must be >= 0, got ", key_group);
  require(diagonals.empty() || diagonals.size() == heads.size(), "work bound: ", diagonals.size(),
          " diagonal sets for ", heads.size(), " heads");
  WorkMatrix out(layout.ranks());
  AlignedModel m;
  const bool aligned = aligned_model(layout, block, m);
  const bool fine = !aligned && fine_striped(layout, block);
  if (aligned) {
    aligned_bound(heads, diagonals, m, block, columns, backward, out);
  } else if (fine) {
    fine_striped_bound(heads, layout, block, &out, columns != ColumnBound::none);
  } else {
    return out;
  }
  // Key lists: per K/V head (runs of key_group heads), the largest of its heads' tables.
  RankPairTiles keys;
  std::vector<std::vector<int64_t>> computed;
  const std::vector<const std::vector<int64_t>*> sets =
      aligned && key_group > 0 ? diagonal_sets(heads, diagonals, block, computed) : std::vector<const std::vector<int64_t>*>{};
  for (size_t h = 0; h < heads.size() && key_group > 0; ++h) {
    RankPairTiles one;
    one.ranks = layout.ranks();
    if (aligned) {
      one.form = m.zigzag ? RankPairTiles::Form::zigzag : RankPairTiles::Form::offset;
      // A unit diagonal lists as many keys as rows (file comment of work_lower_bound.hpp).
      one.keys = keys_equal_rows(m) ? aligned_list_table({sets[h]}, m) : aligned_key_table({sets[h]}, m);
    } else {
      one = rank_pair_tiles({heads[h]}, layout, block);
    }
    if (h == 0) {
      keys = one;
    } else if (static_cast<int64_t>(h) % key_group == 0) {
      keys += one;
    } else {
      keys.merge_same_kv_head(one);
    }
  }
  const int32_t w = layout.ranks();
  for (int32_t q = 0; q < w; ++q) {
    for (int32_t kv = 0; kv < w; ++kv) {
      WorkCounts& cell = out.at(q, kv);
      if (!heads.empty() && key_group > 0) cell.key_lists = keys.keys_at(q, kv);
      if (fine && backward.column_units) {
        // Each row counted gathers one chunk: one column list, at least one column and one item.
        cell.column_lists = cell.column_chunks;
        cell.columns = cell.column_chunks;
        cell.column_items = cell.column_chunks;
      }
    }
  }
  return out;
}

namespace {

/// How a zigzag cell combines its four unit-diagonal terms (rank q's row units a and rank kv's
/// key units b, each x and 2W - 1 - x, meet at e = a - b): summed, or per row unit (per key unit)
/// the larger of its two.
enum class UnitTerms { sum, larger_per_row_unit, larger_per_key_unit };

int64_t zigzag_cell(const std::vector<int64_t>& by_unit_diagonal, int64_t w, int64_t q, int64_t kv, UnitTerms how) {
  const auto at = [&](int64_t e) { return e >= 0 && e < 2 * w ? by_unit_diagonal[static_cast<size_t>(e)] : int64_t{0}; };
  const int64_t a[2] = {q, 2 * w - 1 - q};
  const int64_t b[2] = {kv, 2 * w - 1 - kv};
  const int64_t t[2][2] = {{at(a[0] - b[0]), at(a[0] - b[1])}, {at(a[1] - b[0]), at(a[1] - b[1])}};  // [row unit][key unit]
  switch (how) {
    case UnitTerms::sum:
      return t[0][0] + t[0][1] + t[1][0] + t[1][1];
    case UnitTerms::larger_per_row_unit:
      return std::max(t[0][0], t[0][1]) + std::max(t[1][0], t[1][1]);
    case UnitTerms::larger_per_key_unit:
      return std::max(t[0][0], t[1][0]) + std::max(t[0][1], t[1][1]);
  }
  return 0;
}

}  // namespace

int64_t RankPairTiles::at(int32_t q, int32_t kv) const {
  if (form == Form::offset) return table[static_cast<size_t>(q - kv + ranks - 1)];
  return zigzag_cell(table, ranks, q, kv, UnitTerms::sum);
}

int64_t RankPairTiles::lists_at(int32_t q, int32_t kv) const {
  if (form == Form::offset) return lists[static_cast<size_t>(q - kv + ranks - 1)];
  return zigzag_cell(lists, ranks, q, kv, UnitTerms::larger_per_row_unit);
}

int64_t RankPairTiles::keys_at(int32_t q, int32_t kv) const {
  if (form == Form::offset) return keys[static_cast<size_t>(q - kv + ranks - 1)];
  return zigzag_cell(keys, ranks, q, kv, UnitTerms::larger_per_key_unit);
}

RankPairTiles::RowSums RankPairTiles::row_sums(int32_t q) const {
  RowSums sums;
  const int32_t w = ranks;
  if (form != Form::zigzag) {
    for (int32_t kv = 0; kv < w; ++kv) {
      const int64_t x = at(q, kv);
      sums.tiles += x;
      sums.cells_with_tiles += x > 0 ? 1 : 0;
      sums.lists += lists_at(q, kv);
      sums.keys += keys_at(q, kv);
    }
    return sums;
  }
  // zigzag_cell's four terms without its checks: q's first row unit q never reaches kv's second key
  // unit 2W - 1 - kv (e = q + kv - 2W + 1 < 0), its second unit 2W - 1 - q reaches kv's first at
  // e = 2W - 1 - q - kv in [1, 2W - 1], and the remaining two meet at e = q - kv or kv - q, whichever
  // is not negative. Every entry is a count (>= 0), so a max with an absent term is the other term.
  const int64_t* const t = table.data();
  const int64_t* const l = lists.data();
  const int64_t* const k = keys.data();
  const auto add = [&](int64_t first, int64_t cross, int64_t second) {
    // first: (row unit q, key unit kv) or 0; cross: (2W - 1 - q, kv); second: (2W - 1 - q, 2W - 1 - kv) or 0.
    const int64_t x = (first >= 0 ? t[first] : 0) + t[cross] + (second >= 0 ? t[second] : 0);
    sums.tiles += x;
    sums.cells_with_tiles += x > 0 ? 1 : 0;
    sums.lists += (first >= 0 ? l[first] : 0) + std::max(l[cross], second >= 0 ? l[second] : 0);
    sums.keys += std::max(first >= 0 ? k[first] : 0, k[cross]) + (second >= 0 ? k[second] : 0);
  };
  for (int32_t kv = 0; kv < w; ++kv) {
    const int64_t cross = 2 * static_cast<int64_t>(w) - 1 - q - kv;
    add(kv <= q ? q - kv : -1, cross, kv >= q ? kv - q : -1);
  }
  return sums;
}

RankPairTiles& RankPairTiles::operator+=(const RankPairTiles& other) {
  require(form == other.form && ranks == other.ranks && table.size() == other.table.size() &&
              lists.size() == other.lists.size() && keys.size() == other.keys.size(),
          "rank-pair tile tables of different layouts cannot be added");
  for (size_t k = 0; k < table.size(); ++k) table[k] += other.table[k];
  for (size_t k = 0; k < lists.size(); ++k) lists[k] += other.lists[k];
  for (size_t k = 0; k < keys.size(); ++k) keys[k] += other.keys[k];
  return *this;
}

RankPairTiles& RankPairTiles::merge_same_kv_head(const RankPairTiles& other) {
  const std::vector<int64_t> mine = keys;
  *this += other;
  for (size_t k = 0; k < keys.size(); ++k) keys[k] = std::max(mine[k], other.keys[k]);
  return *this;
}

namespace {

/// The rows-with-a-tile tables of RankPairTiles::lists for aligned layouts (work_lower_bound.hpp).
std::vector<int64_t> aligned_list_table(const std::vector<const std::vector<int64_t>*>& diagonals, const AlignedModel& m) {
  const int64_t w = m.ranks;
  if (m.zigzag || m.stripes == 1) {
    // Zigzag: rows per unit diagonal e in [0, 2W); contiguous: per offset r = e in [0, W) at [r + W - 1].
    const int64_t units = m.zigzag ? 2 * w : w;
    std::vector<int64_t> out(static_cast<size_t>(m.zigzag ? 2 * w : 2 * w - 1), 0);
    UnitRows unit;
    for (const std::vector<int64_t>* set : diagonals) {
      unit.build(*set, m.g, units);
      for (int64_t e = 0; e < units; ++e) out[static_cast<size_t>(m.zigzag ? e : e + w - 1)] += unit.rows(e, m.g);
    }
    return out;
  }
  // Striped: the rows of residue x >= d_min(x, src) number at least stripes - ceil(d_min / P), and
  // the multiset of d_min over p's residues depends on (p - src) mod W alone (shifting x by g and
  // src by one rank maps one onto the other): computed at p = 0.
  const int64_t period = m.g * w;
  std::vector<int64_t> out(static_cast<size_t>(2 * w - 1), 0);
  std::vector<int64_t> d_min;
  std::vector<int64_t> by_residue;
  for (const std::vector<int64_t>* set : diagonals) {
    smallest_diagonals(*set, m, 0, m.g, d_min, by_residue);
    for (int64_t src = 0; src < w; ++src) {
      int64_t rows = 0;
      for (int64_t x = 0; x < m.g; ++x) {
        const int64_t d = d_min[static_cast<size_t>(x * w + src)];
        if (d != kNone) rows += std::max<int64_t>(0, m.stripes - (d + period - 1) / period);
      }
      const int64_t r = (w - src) % w;  // (p - src) mod W at p = 0
      out[static_cast<size_t>(r + w - 1)] += rows;
      if (r > 0) out[static_cast<size_t>(r - 1)] += rows;  // offset r - W
    }
  }
  return out;
}

/// The key-blocks-with-a-tile table of RankPairTiles::keys for aligned striped layouts (several
/// stripes per rank): per key residue y of src, the keys from its smallest diagonal d number at
/// least stripes - ceil(d / P), and the multiset of those d over src's residues depends on
/// (p - src) mod W alone (shifting y by g and p by one rank maps one onto the other): computed at
/// src = 0, by offset.
std::vector<int64_t> aligned_key_table(const std::vector<const std::vector<int64_t>*>& diagonals, const AlignedModel& m) {
  const int64_t w = m.ranks;
  const int64_t period = m.g * w;
  std::vector<int64_t> out(static_cast<size_t>(2 * w - 1), 0);
  std::vector<int64_t> d_min;
  std::vector<int64_t> by_residue;
  for (const std::vector<int64_t>* set : diagonals) {
    smallest_key_diagonals(*set, m, d_min, by_residue);
    for (int64_t p = 0; p < w; ++p) {
      int64_t keys = 0;
      for (int64_t y = 0; y < m.g; ++y) {
        const int64_t d = d_min[static_cast<size_t>(y * w + p)];
        if (d != kNone) keys += std::max<int64_t>(0, m.stripes - (d + period - 1) / period);
      }
      out[static_cast<size_t>(p + w - 1)] += keys;  // offset p - 0
      if (p > 0) out[static_cast<size_t>(p - 1)] += keys;  // offset p - W
    }
  }
  return out;
}

}  // namespace

RankPairTiles rank_pair_tiles(const std::vector<const KeptPattern*>& heads, const TokenLayout& layout, int64_t block,
                              const std::vector<const std::vector<int64_t>*>& diagonals, bool with_keys) {
  require(block >= 1, "block size must be >= 1 token, got ", block);
  RankPairTiles out;
  out.ranks = layout.ranks();
  AlignedModel m;
  if (aligned_model(layout, block, m)) {
    std::vector<std::vector<int64_t>> computed;
    const std::vector<const std::vector<int64_t>*> sets = diagonal_sets(heads, diagonals, block, computed);
    out.form = m.zigzag ? RankPairTiles::Form::zigzag : RankPairTiles::Form::offset;
    out.table = m.zigzag ? stripe_weights(sets, m) : periodic_offsets(sets, m);
    out.lists = aligned_list_table(sets, m);
    // A unit diagonal lists as many keys as rows (file comment of work_lower_bound.hpp).
    out.keys = !with_keys ? std::vector<int64_t>(out.lists.size(), 0)
               : keys_equal_rows(m) ? out.lists : aligned_key_table(sets, m);
  } else if (fine_striped(layout, block)) {
    out.form = RankPairTiles::Form::offset;
    out.table = fine_striped_bound(heads, layout, block, nullptr, false, &out.lists);
    out.keys = with_keys ? out.lists : std::vector<int64_t>(out.lists.size(), 0);
  }
  return out;
}

}  // namespace sparsering
