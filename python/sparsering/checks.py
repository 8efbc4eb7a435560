"""Input checks shared by the single-device op and the ring layer: every bad argument raises a
ValueError naming it before any kernel runs. Covered by tests/python/errors_test.py.
"""
from __future__ import annotations

import torch

CUDA_DTYPES = (torch.bfloat16,)
CPU_DTYPES = (torch.bfloat16, torch.float32, torch.float64)
CUDA_HEAD_DIMS = (64, 128)


def check_qkv(q, k, v, what: str = "attention") -> None:
    """q (B, Hq, S, D), k and v (B, Hkv, S, D), contiguous, one device; Hq a multiple of Hkv; on CUDA
    bf16 and D in {64, 128}; on the CPU bf16, fp32 or fp64."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{what}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{what}: {name} must be 4-D (batch, heads, tokens, head_dim), got shape {tuple(t.shape)}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"{what}: q, k and v must be on one device, got {q.device}, {k.device}, {v.device}")
    if q.device.type not in ("cpu", "cuda"):
        raise ValueError(f"{what}: tensors must be on the CPU or a CUDA device, got {q.device}")
    allowed = CUDA_DTYPES if q.is_cuda else CPU_DTYPES
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype not in allowed:
            raise ValueError(f"{what}: {name} is {t.dtype}; {q.device.type} tensors must be "
                             f"{' or '.join(str(d) for d in allowed)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"{what}: q, k and v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    b, hq, s, d = q.shape
    if k.shape != v.shape:
        raise ValueError(f"{what}: k {tuple(k.shape)} and v {tuple(v.shape)} must have one shape")
    if k.shape[0] != b or k.shape[2] != s or k.shape[3] != d:
        raise ValueError(f"{what}: k/v shape {tuple(k.shape)} does not match q {tuple(q.shape)} in batch, tokens "
                         f"or head_dim")
    hkv = k.shape[1]
    if hkv < 1 or hq % hkv:
        raise ValueError(f"{what}: query heads {hq} must be a multiple of key/value heads {hkv}")
    if s < 1 or b < 1:
        raise ValueError(f"{what}: batch and tokens must be >= 1, got shape {tuple(q.shape)}")
    if q.is_cuda and d not in CUDA_HEAD_DIMS:
        raise ValueError(f"{what}: head_dim {d} is not supported by the CUDA kernels (64 or 128)")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not t.is_contiguous():
            raise ValueError(f"{what}: {name} must be contiguous in (batch, heads, tokens, head_dim) order, got "
                             f"strides {t.stride()}; call .contiguous()")


def check_settings(recall: float, block_q: int, block_k: int, last_q: int, capacity: int) -> None:
    if not (isinstance(recall, (int, float)) and 0.0 < recall <= 1.0):
        raise ValueError(f"recall must be in (0, 1], got {recall!r}")
    for name, value in (("block_q", block_q), ("block_k", block_k)):
        if not (isinstance(value, int) and value >= 64 and value % 64 == 0):
            raise ValueError(f"{name} must be a positive multiple of 64 tokens, got {value!r}")
    if not (isinstance(last_q, int) and last_q >= 1):
        raise ValueError(f"last_q must be an integer >= 1, got {last_q!r}")
    if not (isinstance(capacity, int) and capacity >= 1):
        raise ValueError(f"capacity must be an integer >= 1, got {capacity!r}")
