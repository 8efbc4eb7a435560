"""Synthetic vertical-slash patterns and their sparse index, in numpy, for the GPU benchmark.

Patterns are "Qwen2.5-3B-like": each head takes a (vertical, slash) budget type with the
frequencies of MInference's published Qwen2.5-3B search (docs/algorithm.md section 2), from which it
draws estimated masses the way pass 2 of the estimation would report them (a sink column and a
Zipf tail of content columns; a decaying local window plus a few distant diagonals). Top-p
selection at a recall target (0.90, 0.95), capped at 4096, then gives the kept sets, so budgets
differ per head as in training. `random_block_index` gives plain block-sparse indexes instead.

The index follows kernels/sparse_index.hpp for one rank holding the whole sequence (W = 1,
contiguous layout, kv = q) with block_q == block_k == B and N a multiple of B: key block j is a
tile of query block i when a kept offset d (or 0) has a pair in the tile, i.e. |d - (i-j)B| < B;
masked only on the diagonal; columns are kept keys of earlier blocks not covered by a tile.
Checked against the C++ builder by kernels/bench/check_capi.py (same pairs as a dense mask).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# (vertical budget, slash budget, heads out of 576) in MInference's Qwen2.5-3B search.
QWEN25_3B_BUDGETS = [(1000, 6096, 310), (3500, 100, 107), (30, 800, 96), (100, 800, 44), (500, 700, 17)]
CAP = 4096


@dataclass
class HeadPattern:
    slash_offsets: np.ndarray  # kept global offsets q - k (sorted, includes 0)
    vertical_keys: np.ndarray  # kept key positions (sorted)


def top_p(mass: np.ndarray, recall: float, cap: int = CAP) -> np.ndarray:
    """Smallest set of indices whose mass reaches `recall` of the total, at most `cap`, sorted."""
    order = np.argsort(-mass, kind="stable")
    cumulative = np.cumsum(mass[order])
    total = cumulative[-1]
    if total <= 0:
        return np.zeros(0, dtype=np.int64)
    count = int(np.searchsorted(cumulative, recall * total, side="left")) + 1
    count = min(count, cap, int(np.count_nonzero(mass)))
    return np.sort(order[:count])


def qwen_like_pattern(rng: np.random.Generator, n: int, recall: float) -> HeadPattern:
    """One head's kept sets for a sequence of n tokens at the given recall."""
    weights = np.array([b[2] for b in QWEN25_3B_BUDGETS], dtype=np.float64)
    v_budget, s_budget, _ = QWEN25_3B_BUDGETS[rng.choice(len(weights), p=weights / weights.sum())]
    # Slash mass: local window decaying over ~s_budget/3 offsets, plus a few distant diagonals.
    d = np.arange(n, dtype=np.float64)
    slash = np.exp(-d / max(4.0, s_budget / 3.0))
    far = rng.integers(0, n, size=max(1, s_budget // 200))
    slash[far] += rng.uniform(0.02, 0.2, size=far.size) * slash[: max(1, s_budget // 8)].sum() / far.size
    # Vertical mass: the sink, then a Zipf tail over ~2 x v_budget content columns.
    vertical = np.zeros(n)
    candidates = rng.choice(n, size=min(n, 2 * v_budget), replace=False)
    vertical[candidates] = 1.0 / np.arange(1, candidates.size + 1) ** 0.8
    vertical[0] += vertical.sum() * 0.5
    offsets = np.union1d(top_p(slash, recall), [0])
    return HeadPattern(slash_offsets=offsets.astype(np.int64), vertical_keys=top_p(vertical, recall).astype(np.int64))


@dataclass
class HostIndex:
    """A SparseIndex (kernels/sparse_index.hpp) in numpy arrays, plus the dense tile map for FlexAttention."""

    block: int
    q_blocks: int
    tile_offsets: np.ndarray
    tile_block: np.ndarray
    tile_masked: np.ndarray
    column_offsets: np.ndarray
    column_index: np.ndarray
    kept_diagonals: list  # per row: bool over block diagonals i - j (Toeplitz tile map)

    def computed_pairs(self, chunk: int = 64) -> int:
        """(query, key) slots the kernel computes: whole tiles plus whole gathered chunks."""
        counts = np.diff(self.column_offsets)
        chunks = int(((counts + chunk - 1) // chunk).sum())
        return self.tile_block.size * self.block * self.block + chunks * self.block * chunk


def index_from_diagonals(kept_diagonals: list, verticals: list, n: int, block: int) -> HostIndex:
    """Builds the CSR index from per-row kept block diagonals and kept vertical keys."""
    assert n % block == 0, "the benchmark index needs N to be a multiple of the block"
    qb = n // block
    tile_offsets, tile_block, tile_masked = [0], [], []
    column_offsets, column_index = [0], []
    for diag, keys in zip(kept_diagonals, verticals):
        deltas = np.nonzero(diag)[0]  # ascending; 0 always kept
        counts = np.searchsorted(deltas, np.arange(qb), side="right")
        for i in range(qb):
            ds = deltas[: counts[i]][::-1]  # j = i - d ascending
            tile_block.append(i - ds)
            tile_masked.append((ds == 0).astype(np.uint8))
            tile_offsets.append(tile_offsets[-1] + ds.size)
        key_blocks = keys // block
        upto = np.searchsorted(keys, np.arange(qb) * block, side="left")  # keys in blocks < i
        for i in range(qb):
            cand = keys[: upto[i]]
            cols = cand[~diag[i - key_blocks[: upto[i]]]]
            column_index.append(cols)
            column_offsets.append(column_offsets[-1] + cols.size)
    cat = lambda parts, dtype: np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)  # noqa: E731
    return HostIndex(block, qb, np.asarray(tile_offsets, np.int32), cat(tile_block, np.int32),
                     cat(tile_masked, np.uint8), np.asarray(column_offsets, np.int32), cat(column_index, np.int32),
                     kept_diagonals)


def pattern_index(patterns: list, n: int, block: int) -> HostIndex:
    """Index of vertical-slash patterns: offset d touches diagonals floor(d/B) and ceil(d/B)."""
    qb = n // block
    diagonals, verticals = [], []
    for p in patterns:
        diag = np.zeros(qb, dtype=bool)
        diag[0] = True
        d = p.slash_offsets
        diag[np.minimum(d // block, qb - 1)] = True
        diag[np.minimum(-(-d // block), qb - 1)] = True
        diagonals.append(diag)
        verticals.append(np.unique(p.vertical_keys))
    return index_from_diagonals(diagonals, verticals, n, block)


def random_block_index(rng: np.random.Generator, rows: int, n: int, block: int, density: float) -> HostIndex:
    """Block-sparse index: each causal off-diagonal tile kept with probability `density`
    (independently per row and query block), the diagonal always; no vertical columns."""
    qb = n // block
    tile_offsets, tile_block, tile_masked = [0], [], []
    for _ in range(rows):
        keep = rng.random((qb, qb)) < density
        for i in range(qb):
            js = np.nonzero(keep[i, :i])[0]
            js = np.append(js, i)
            tile_block.append(js)
            tile_masked.append((js == i).astype(np.uint8))
            tile_offsets.append(tile_offsets[-1] + js.size)
    zeros = np.zeros(rows * qb + 1, np.int32)
    return HostIndex(block, qb, np.asarray(tile_offsets, np.int32), np.concatenate(tile_block).astype(np.int32),
                     np.concatenate(tile_masked).astype(np.uint8), zeros, np.zeros(0, np.int32), [])
