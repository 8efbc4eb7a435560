"""Index preparation and one ring step of sparse attention, on the device of the tensors: the CUDA
kernels through the C API for CUDA tensors (libsparsering_kernels.so; a missing library raises
KernelsLibraryMissing, never a switch to the torch path), the torch twin (step_cpu.py, index.py,
estimate.py, select.py) for CPU tensors. The single-device op and the ring layer both run through
these functions, so they compute the same pairs. Covered by tests/python/op_cpu_test.py,
tests/python/ring_test.py and, on CUDA, tests/python/gpu_test.py.
"""
from __future__ import annotations

import torch

from . import estimate, step_cpu
from ._library import load_kernels
from .index import SparseIndex, build_index
from .kept_sets import KeptSets
from .layout import TokenLayout
from .select import select_recall


def _lib():
    return load_kernels()


def _position(layout: TokenLayout, q_rank: int, kv_rank: int):
    from .capi import RingPosition
    return RingPosition(layout.kind, layout.ranks, layout.seq_len_tokens, layout.granularity_tokens, q_rank, kv_rank)


def select_kept(vertical_mass: torch.Tensor, slash_mass: torch.Tensor, seq_len_tokens: int, recall: float,
                max_verticals: int, max_slashes: int) -> KeptSets:
    """Recall selection of both kinds from (rows, N) masses (torch, any device)."""
    vc, vk = select_recall(vertical_mass.reshape(-1, seq_len_tokens), recall, max_verticals)
    sc, so = select_recall(slash_mass.reshape(-1, seq_len_tokens), recall, max_slashes)
    capacity = max(vk.shape[1], so.shape[1])
    pad = lambda t: torch.nn.functional.pad(t, (0, capacity - t.shape[1]), value=-1)  # noqa: E731
    return KeptSets(vc, pad(vk), sc, pad(so), seq_len_tokens)


def estimate_single_rank(q: torch.Tensor, k: torch.Tensor, last_q: int, recall: float, capacity: int,
                         softmax_scale: float) -> KeptSets:
    """Kept sets of one rank holding the whole sequence (B, H, N, D): the C API's
    sr_estimate_select on CUDA, estimate.py + select.py on the CPU (same semantics)."""
    n = q.shape[2]
    capacity = min(capacity, n)
    if q.is_cuda:
        q_last = q[:, :, n - last_q:].contiguous()
        counts_keys = _lib().estimate_select(q_last, k, recall, capacity, softmax_scale)
        return KeptSets(*counts_keys, n)
    vertical, slash = estimate.single_rank_masses(q, k, last_q, softmax_scale)
    return select_kept(vertical, slash, n, recall, capacity, capacity)


def build_step_index(kept: KeptSets, layout: TokenLayout, q_rank: int, kv_rank: int, block_q: int, block_k: int,
                     device: torch.device) -> SparseIndex:
    """The index of ring step (q_rank, kv_rank), as tensors on `device`."""
    if device.type == "cuda":
        kept = kept.to(device)
        gpu = _lib().build_index(kept.tensors(), _position(layout, q_rank, kv_rank), block_q, block_k)
        return gpu.copy(device)
    return build_index(kept, layout, q_rank, kv_rank, block_q, block_k)


def forward(q, k, v, index: SparseIndex, layout: TokenLayout, q_rank: int, kv_rank: int, softmax_scale: float,
            out: torch.Tensor, lse: torch.Tensor) -> None:
    """Merges one ring step into the running (out, lse) in place."""
    if q.is_cuda:
        _lib().sparse_attn_fwd(q, k, v, index, out, lse, _position(layout, q_rank, kv_rank), softmax_scale)
    else:
        step_cpu.sparse_attn_fwd(q, k, v, index, layout, q_rank, kv_rank, softmax_scale, out, lse)


def backward_delta(dout: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """delta = rowsum(dout * out) with out in the accumulator dtype (fp32 on CUDA)."""
    if dout.is_cuda:
        delta = torch.empty(out.shape[:-1], dtype=torch.float32, device=out.device)
        _lib().attn_bwd_delta(dout.contiguous(), out.contiguous(), delta)
        return delta
    return step_cpu.attn_bwd_delta(dout, out)


def backward(q, k, v, dout, lse, delta, index: SparseIndex, layout: TokenLayout, q_rank: int, kv_rank: int,
             softmax_scale: float, dq, dk, dv) -> None:
    """dq, dk, dv += one ring step's gradients."""
    if q.is_cuda:
        _lib().sparse_attn_bwd(q, k, v, dout, lse, delta, index, dq, dk, dv, _position(layout, q_rank, kv_rank),
                               softmax_scale)
    else:
        step_cpu.sparse_attn_bwd(q, k, v, dout, lse, delta, index, layout, q_rank, kv_rank, softmax_scale, dq, dk, dv)


def accumulator_dtype(dtype: torch.dtype) -> torch.dtype:
    return step_cpu.accumulator_dtype(dtype)
