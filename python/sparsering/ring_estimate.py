"""Pattern estimation of a ring: the last `last_q` queries of the whole sequence score every rank's
keys (kernels/reference/estimate_pattern_ref.hpp, sharded). The ranks holding those queries
contribute them to an all-reduce (each query lives on exactly one rank); pass-1 statistics combine
through a max and a rescaled-sum all-reduce; pass-2 slash masses are summed over the ring and the
vertical masses (each rank owns its keys) all-gathered into global key order; every rank then
selects the same kept sets. Runs in torch on either device (the C API's estimator covers one rank
holding all keys). Covered by tests/python/ring_test.py (equal to the single-rank estimation).
"""
from __future__ import annotations


import torch
import torch.distributed as dist

from . import estimate
from .kept_sets import KeptSets
from .layout import TokenLayout
from .steps import select_kept


def dense_kept(rows: int, seq_len_tokens: int, device) -> KeptSets:
    """Every slash offset kept: all causal pairs (a plan with sparse.enabled false)."""
    offsets = torch.arange(seq_len_tokens, dtype=torch.int32, device=device).expand(rows, -1).contiguous()
    count = torch.full((rows,), seq_len_tokens, dtype=torch.int32, device=device)
    return KeptSets(torch.zeros(rows, dtype=torch.int32, device=device),
                    torch.full((rows, seq_len_tokens), -1, dtype=torch.int32, device=device), count, offsets,
                    seq_len_tokens)


def ring_kept_sets(q: torch.Tensor, k: torch.Tensor, layout: TokenLayout, cp_rank: int, group, last_q: int,
                   recall: float, max_verticals: int, max_slashes: int, softmax_scale: float) -> KeptSets:
    """q (B, H, N/W, D), k (B, Hkv, N/W, D): this ring position's tokens in local order."""
    n = layout.seq_len_tokens
    last_q = min(last_q, n)
    dtype = estimate.compute_dtype(q.device)
    positions = layout.global_positions(cp_rank, q.device)
    b, h, _, d = q.shape
    q_last = torch.zeros((b, h, last_q, d), dtype=dtype, device=q.device)
    mine = positions >= n - last_q
    q_last[:, :, positions[mine] - (n - last_q)] = q[:, :, mine].to(dtype)
    ring = group is not None
    if ring:
        dist.all_reduce(q_last, group=group)
    row_max, row_sum = estimate.row_statistics(q_last, k, positions, n, softmax_scale)
    if ring:
        global_max = row_max.clone()
        dist.all_reduce(global_max, op=dist.ReduceOp.MAX, group=group)
        safe = torch.where(torch.isfinite(global_max), global_max, torch.zeros_like(global_max))
        row_sum = torch.where(torch.isfinite(row_max), row_sum * torch.exp(row_max - safe), torch.zeros_like(row_sum))
        dist.all_reduce(row_sum, group=group)
        row_max = global_max
    row_max, row_sum = estimate.round_statistics(row_max, row_sum)
    vertical_local, slash = estimate.pattern_masses(q_last, k, positions, n, softmax_scale, row_max, row_sum)
    vertical = torch.zeros((b, h, n), dtype=torch.float32, device=q.device)
    if ring:
        dist.all_reduce(slash, group=group)
        pieces = [torch.empty_like(vertical_local) for _ in range(layout.ranks)]
        dist.all_gather(pieces, vertical_local.contiguous(), group=group)
        for r, piece in enumerate(pieces):
            vertical[:, :, layout.global_positions(r, q.device)] = piece.to(torch.float32)
    else:
        vertical[:, :, positions] = vertical_local.to(torch.float32)
    cap_v, cap_s = min(max_verticals, n), min(max_slashes, n)
    return select_kept(vertical, slash.to(torch.float32), n, recall, cap_v, cap_s)
