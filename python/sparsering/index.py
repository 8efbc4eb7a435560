"""The compressed sparse index of one ring step (the contract of kernels/sparse_index.hpp) as torch
tensors, and its CPU builder from kept sets. For query slice `row` (batch x query head) and local
query block i, the tile list holds, ascending, every key block j that some kept slash offset (or
0) touches (a pair of tile (i, j) with global(q) - global(k) equal to it), flagged `masked` when
some pair of the tile is not causal; the column list holds, ascending, the kept vertical keys of
the held chunk whose block is not a tile of (row, i) and that some query of block i sees. The pairs
computed are the causal ones of listed tiles and columns (`pair_mask`).

The CUDA path builds the same arrays with sr_build_index; tests/python/op_cpu_test.py checks this
builder array for array against the C++ builder (kernels/index/build_sparse_index.hpp) on every
layout.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .kept_sets import KeptSets
from .layout import TokenLayout


@dataclass
class SparseIndex:
    """One ring step's index (int32 CSR over (row, query block); uint8 masked flags)."""

    block_q: int
    block_k: int
    q_blocks: int
    tile_offsets: torch.Tensor    # (rows * q_blocks + 1,) int32
    tile_block: torch.Tensor      # (tiles,) int32
    tile_masked: torch.Tensor     # (tiles,) uint8
    column_offsets: torch.Tensor  # (rows * q_blocks + 1,) int32
    column_index: torch.Tensor    # (columns,) int32

    @property
    def rows(self) -> int:
        return (self.tile_offsets.numel() - 1) // self.q_blocks

    def tensors(self) -> tuple:
        return self.tile_offsets, self.tile_block, self.tile_masked, self.column_offsets, self.column_index

    def tiles(self) -> int:
        """Listed tiles (the arrays may hold one pad slot more when empty)."""
        return int(self.tile_offsets[-1])

    def columns(self) -> int:
        return int(self.column_offsets[-1])


def _runs(positions: torch.Tensor, block: int) -> tuple:
    """Maximal runs of consecutive global positions inside each block of local tokens:
    (lo, hi, block index) per run."""
    n = positions.numel()
    blk = torch.arange(n, dtype=torch.int64) // block
    start = torch.ones(n, dtype=torch.bool)
    start[1:] = (positions[1:] != positions[:-1] + 1) | (blk[1:] != blk[:-1])
    starts = torch.nonzero(start).view(-1)
    ends = torch.cat([starts[1:] - 1, torch.tensor([n - 1])])
    return positions[starts], positions[ends], blk[starts]


def _csr(counts: torch.Tensor) -> torch.Tensor:
    return torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(counts.to(torch.int64), 0)]).to(torch.int32)


def build_index(kept: KeptSets, layout: TokenLayout, q_rank: int, kv_rank: int, block_q: int,
                block_k: int) -> SparseIndex:
    """Index of ring step (q_rank, kv_rank) on the CPU (kept sets on any device; result on the CPU)."""
    kept = kept.to("cpu")
    n = layout.seq_len_tokens
    if kept.seq_len_tokens != n:
        raise ValueError(f"kept sets are for {kept.seq_len_tokens} tokens, the layout has {n}")
    gq = layout.global_positions(q_rank)
    gk = layout.global_positions(kv_rank)
    length = layout.local_len
    qb_count = -(-length // block_q)
    kb_count = -(-length // block_k)
    rows = kept.rows
    verticals, slashes = kept.indicators()

    # Tiles: a (query run [a, b], key run [c, d]) pair reaches offsets [a - d, b - c].
    qlo, qhi, qblk = _runs(gq, block_q)
    klo, khi, kblk = _runs(gk, block_k)
    lo = (qlo.view(-1, 1) - khi.view(1, -1)).clamp(min=0).reshape(-1)
    hi = (qhi.view(-1, 1) - klo.view(1, -1)).reshape(-1)
    valid = hi >= lo
    lo_i, hi_i = lo.clamp(max=n), (hi + 1).clamp(min=0, max=n)
    below = torch.cat([torch.zeros(rows, 1, dtype=torch.int64), torch.cumsum(slashes.to(torch.int64), 1)], 1)
    hit = (below[:, hi_i] - below[:, lo_i] > 0) & valid.view(1, -1)  # (rows, run pairs)
    pair_tile = (qblk.view(-1, 1) * kb_count + kblk.view(1, -1)).reshape(-1)
    tile = torch.zeros(rows, qb_count * kb_count, dtype=torch.bool)
    r_idx, p_idx = torch.nonzero(hit, as_tuple=True)
    tile[r_idx, pair_tile[p_idx]] = True
    tile = tile.view(rows, qb_count, kb_count)

    q_first = gq[torch.arange(qb_count) * block_q]
    q_last = gq[torch.clamp((torch.arange(qb_count) + 1) * block_q, max=length) - 1]
    k_last = gk[torch.clamp((torch.arange(kb_count) + 1) * block_k, max=length) - 1]
    masked_grid = k_last.view(1, -1) > q_first.view(-1, 1)  # (qb, kb): some key after some query

    tr, ti, tj = torch.nonzero(tile, as_tuple=True)
    tile_counts = tile.sum(dim=2).reshape(-1)

    # Columns: kept vertical keys of this chunk outside the row's tiles that a query of the block sees.
    vr, vk = torch.nonzero(verticals[:, gk], as_tuple=True)  # (row, local key), row-major, k ascending
    if vr.numel():
        sees = gk[vk].view(-1, 1) <= q_last.view(1, -1)  # (pairs, qb)
        outside = ~tile[vr.view(-1, 1), torch.arange(qb_count).view(1, -1), (vk // block_k).view(-1, 1)]
        cp, ci = torch.nonzero(sees & outside, as_tuple=True)
        list_id = vr[cp] * qb_count + ci
        order = torch.argsort(list_id * length + vk[cp])
        column_index = vk[cp][order]
        column_counts = torch.bincount(list_id, minlength=rows * qb_count)
    else:
        column_index = torch.zeros(0, dtype=torch.int64)
        column_counts = torch.zeros(rows * qb_count, dtype=torch.int64)
    return SparseIndex(block_q, block_k, qb_count, _csr(tile_counts), tj.to(torch.int32),
                       masked_grid[ti, tj].to(torch.uint8), _csr(column_counts), column_index.to(torch.int32))


def pair_mask(index: SparseIndex, layout: TokenLayout, q_rank: int, kv_rank: int) -> torch.Tensor:
    """(rows, Lq, Lk) bool: the pairs a kernel computes over `index` (causal pairs of listed tiles
    and listed columns)."""
    length = layout.local_len
    rows, qb, kb = index.rows, index.q_blocks, -(-length // index.block_k)
    offsets = index.tile_offsets.to(torch.int64)
    lists = torch.repeat_interleave(torch.arange(rows * qb), offsets[1:] - offsets[:-1])
    tile = torch.zeros(rows * qb, kb, dtype=torch.bool)
    tile[lists, index.tile_block.to(torch.int64)] = True
    mask = tile.view(rows, qb, kb).repeat_interleave(index.block_q, 1)[:, :length]
    mask = mask.repeat_interleave(index.block_k, 2)[:, :, :length]
    coffsets = index.column_offsets.to(torch.int64)
    clists = torch.repeat_interleave(torch.arange(rows * qb), coffsets[1:] - coffsets[:-1])
    columns = torch.zeros(rows * qb, length, dtype=torch.bool)
    columns[clists, index.column_index.to(torch.int64)] = True
    mask = mask | columns.view(rows, qb, length).repeat_interleave(index.block_q, 1)[:, :length]
    gq = layout.global_positions(q_rank)
    gk = layout.global_positions(kv_rank)
    return mask & (gk.view(1, 1, -1) <= gq.view(1, -1, 1))
