"""One ring step of sparse attention on the CPU, in torch, over the pairs of a SparseIndex: the
CPU twin of the C API's sr_sparse_attn_fwd, sr_attn_bwd_delta and sr_sparse_attn_bwd, with the
same conventions (kernels/attention_params.hpp): the forward merges the step's (O, LSE) into a
running (out, lse) that starts at (0, -inf), a row with no computed pair leaves it untouched; the
backward recomputes P = exp(scale q.k - lse) from the final LSE and accumulates dq, dk, dv (+=),
dk and dv summed over the query heads of a GQA group. Scores in fp64 for fp64 inputs, fp32
otherwise. Covered by tests/python/op_cpu_test.py (against the C++ oracle and an fp64 brute
force) and tests/python/ring_test.py.
"""
from __future__ import annotations

import math

import torch

from .index import SparseIndex, pair_mask
from .layout import TokenLayout


def accumulator_dtype(dtype: torch.dtype) -> torch.dtype:
    """fp64 for fp64 inputs (exact tests), fp32 otherwise (as the kernels)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _expand_kv(t: torch.Tensor, q_heads: int, dtype) -> torch.Tensor:
    return t.to(dtype).repeat_interleave(q_heads // t.shape[1], dim=1)


def _group_sum(t: torch.Tensor, kv_heads: int) -> torch.Tensor:
    b, hq, length, d = t.shape
    return t.view(b, kv_heads, hq // kv_heads, length, d).sum(dim=2)


def _masked_scores(q, k, mask, scale, dtype):
    b, hq = q.shape[:2]
    s = torch.matmul(q.to(dtype), _expand_kv(k, hq, dtype).transpose(-1, -2)) * scale
    return s.masked_fill(~mask.view(b, hq, mask.shape[1], mask.shape[2]), -math.inf)


def sparse_attn_fwd(q, k, v, index: SparseIndex, layout: TokenLayout, q_rank: int, kv_rank: int,
                    softmax_scale: float, out: torch.Tensor, lse: torch.Tensor) -> None:
    """Merges this step into (out (B, Hq, Lq, D), lse (B, Hq, Lq)), both accumulator dtype, in place."""
    dtype = out.dtype
    mask = pair_mask(index, layout, q_rank, kv_rank)
    s = _masked_scores(q, k, mask, softmax_scale, dtype)
    step_lse = torch.logsumexp(s, dim=-1)
    finite = torch.isfinite(step_lse)
    p = torch.exp(s - torch.where(finite, step_lse, torch.zeros_like(step_lse)).unsqueeze(-1))
    step_out = torch.matmul(p, _expand_kv(v, q.shape[1], dtype))
    new_lse = torch.logaddexp(lse, step_lse)
    ok = torch.isfinite(new_lse)
    safe = torch.where(ok, new_lse, torch.zeros_like(new_lse))
    w_old = torch.where(ok & torch.isfinite(lse), torch.exp(lse - safe), torch.zeros_like(lse))
    w_new = torch.where(ok & finite, torch.exp(step_lse - safe), torch.zeros_like(lse))
    out.mul_(w_old.unsqueeze(-1)).add_(step_out * w_new.unsqueeze(-1))
    lse.copy_(torch.where(ok, new_lse, lse))


def attn_bwd_delta(dout: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """delta = rowsum(dout * out), in out's dtype."""
    return (dout.to(out.dtype) * out).sum(dim=-1)


def sparse_attn_bwd(q, k, v, dout, lse, delta, index: SparseIndex, layout: TokenLayout, q_rank: int,
                    kv_rank: int, softmax_scale: float, dq, dk, dv) -> None:
    """dq (B, Hq, Lq, D), dk and dv (B, Hkv, Lk, D) += this step's gradients (accumulator dtype)."""
    dtype = dq.dtype
    hq, hkv = q.shape[1], k.shape[1]
    mask = pair_mask(index, layout, q_rank, kv_rank)
    s = _masked_scores(q, k, mask, softmax_scale, dtype)
    ok = torch.isfinite(lse)
    p = torch.exp(s - torch.where(ok, lse, torch.zeros_like(lse)).unsqueeze(-1))
    p = torch.where(ok.unsqueeze(-1), p, torch.zeros_like(p))
    g = dout.to(dtype)
    dv.add_(_group_sum(torch.matmul(p.transpose(-1, -2), g), hkv))
    dp = torch.matmul(g, _expand_kv(v, hq, dtype).transpose(-1, -2))
    ds = p * (dp - delta.to(dtype).unsqueeze(-1))
    dq.add_(torch.matmul(ds, _expand_kv(k, hq, dtype)) * softmax_scale)
    dk.add_(_group_sum(torch.matmul(ds.transpose(-1, -2), q.to(dtype)) * softmax_scale, hkv))
