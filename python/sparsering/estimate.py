"""Vertical-slash pattern estimation in torch, the semantics of kernels/reference/
estimate_pattern_ref.hpp: the last `last_q` queries of the sequence (global positions N - last_q
.. N - 1) score a shard of keys under the causal mask; pass 1 gives per-query (max, sum of exp)
row statistics, shards combine them (max, then rescaled sums), pass 2 adds each softmax
probability to its key's vertical mass and to its offset's slash mass. A single rank is one shard
holding every key; the ring layer runs the passes per shard with collectives in between.
Computed in fp64 on CPU (as the oracle) and fp32 on CUDA, over key chunks to bound memory.
Covered by tests/python/op_cpu_test.py (against the C++ oracle) and tests/python/ring_test.py.
"""
from __future__ import annotations

import math

import torch

KEY_CHUNK_TOKENS = 8192


def compute_dtype(device: torch.device) -> torch.dtype:
    return torch.float64 if device.type == "cpu" else torch.float32


def _scores(q_last: torch.Tensor, k: torch.Tensor, scale: float, dtype: torch.dtype) -> torch.Tensor:
    """(B, Hq, T, Lc) scale q.k with GQA (query head h reads K/V head h / (Hq / Hkv))."""
    b, hq, t, d = q_last.shape
    hkv = k.shape[1]
    q = q_last.to(dtype).reshape(b, hkv, (hq // hkv) * t, d)
    s = torch.matmul(q, k.to(dtype).transpose(-1, -2)) * scale
    return s.reshape(b, hq, t, k.shape[2])


def _query_positions(t: int, seq_len_tokens: int, device) -> torch.Tensor:
    return torch.arange(seq_len_tokens - t, seq_len_tokens, dtype=torch.int64, device=device)


def row_statistics(q_last, k, key_positions, seq_len_tokens: int, softmax_scale: float) -> tuple:
    """Pass 1 on one shard. q_last (B, Hq, T, D), k (B, Hkv, L, D), key_positions (L,) int64
    global positions. Returns (row_max, row_sum), (B, Hq, T) in the compute dtype; a query that
    sees no key of the shard gets (-inf, 0)."""
    dtype = compute_dtype(q_last.device)
    b, hq, t, _ = q_last.shape
    qpos = _query_positions(t, seq_len_tokens, q_last.device)
    row_max = torch.full((b, hq, t), -math.inf, dtype=dtype, device=q_last.device)
    row_sum = torch.zeros((b, hq, t), dtype=dtype, device=q_last.device)
    for start in range(0, k.shape[2], KEY_CHUNK_TOKENS):
        kc = k[:, :, start:start + KEY_CHUNK_TOKENS]
        kpos = key_positions[start:start + KEY_CHUNK_TOKENS]
        s = _scores(q_last, kc, softmax_scale, dtype)
        s = s.masked_fill(kpos.view(1, -1) > qpos.view(-1, 1), -math.inf)
        chunk_max = s.amax(dim=-1)
        chunk_sum = torch.exp(s - _finite_or_zero(chunk_max).unsqueeze(-1)).sum(dim=-1)
        row_max, row_sum = combine_statistics(row_max, row_sum, chunk_max, chunk_sum)
    return row_max, row_sum


def _finite_or_zero(x: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isfinite(x), x, torch.zeros_like(x))


def combine_statistics(max_a, sum_a, max_b, sum_b) -> tuple:
    """m = max(m_a, m_b), s = s_a e^(m_a - m) + s_b e^(m_b - m); (-inf, 0) is the identity."""
    m = torch.maximum(max_a, max_b)
    safe = _finite_or_zero(m)
    s = sum_a * torch.exp(max_a - safe) + sum_b * torch.exp(max_b - safe)
    s = torch.where(torch.isfinite(m), s, torch.zeros_like(s))
    return m, s


def round_statistics(row_max, row_sum) -> tuple:
    """The statistics as pass 2 reads them: stored in fp32 between the passes (as the oracle and
    the kernels do), back in the compute dtype."""
    return row_max.to(torch.float32).to(row_max.dtype), row_sum.to(torch.float32).to(row_sum.dtype)


def pattern_masses(q_last, k, key_positions, seq_len_tokens: int, softmax_scale: float, row_max, row_sum) -> tuple:
    """Pass 2 on one shard with the combined statistics. Returns (vertical_mass (B, Hq, L) per local
    key, slash_mass (B, Hq, N) per global offset this shard contributes), in the compute dtype."""
    dtype = compute_dtype(q_last.device)
    b, hq, t, _ = q_last.shape
    device = q_last.device
    qpos = _query_positions(t, seq_len_tokens, device)
    vertical = torch.zeros((b, hq, k.shape[2]), dtype=dtype, device=device)
    slash = torch.zeros((b * hq, seq_len_tokens), dtype=dtype, device=device)
    usable = row_sum > 0
    inv_sum = torch.where(usable, 1.0 / torch.where(usable, row_sum, torch.ones_like(row_sum)), torch.zeros_like(row_sum))
    shift = _finite_or_zero(row_max)
    for start in range(0, k.shape[2], KEY_CHUNK_TOKENS):
        kc = k[:, :, start:start + KEY_CHUNK_TOKENS]
        kpos = key_positions[start:start + KEY_CHUNK_TOKENS]
        offsets = qpos.view(-1, 1) - kpos.view(1, -1)  # (T, Lc)
        s = _scores(q_last, kc, softmax_scale, dtype)
        s = s.masked_fill(offsets < 0, -math.inf)
        p = torch.exp(s - shift.unsqueeze(-1)) * inv_sum.unsqueeze(-1)
        vertical[:, :, start:start + kc.shape[2]] = p.sum(dim=2)
        # One row at a time: a row's offsets are distinct (masked keys add exact zeros at 0), so
        # no two additions meet in one call and the sums do not depend on the order in which
        # CUDA's atomics land. Recomputation under activation checkpointing then selects the
        # same kept sets as the forward pass did.
        rows = p.reshape(b * hq, t, -1)
        clamped = offsets.clamp(min=0)
        for row in range(t):
            slash.index_add_(1, clamped[row], rows[:, row])
    return vertical, slash.view(b, hq, seq_len_tokens)


def single_rank_masses(q, k, last_q: int, softmax_scale: float) -> tuple:
    """Both passes with one shard holding all N keys (contiguous, one rank). q (B, Hq, N, D).
    Returns (vertical_mass, slash_mass), each (B, Hq, N) fp32."""
    n = q.shape[2]
    q_last = q[:, :, n - last_q:]
    positions = torch.arange(n, dtype=torch.int64, device=q.device)
    row_max, row_sum = round_statistics(*row_statistics(q_last, k, positions, n, softmax_scale))
    vertical, slash = pattern_masses(q_last, k, positions, n, softmax_scale, row_max, row_sum)
    return vertical.to(torch.float32), slash.to(torch.float32)
