"""vs_sparse_attention: single-device causal attention with online vertical-slash estimation, as a
differentiable op. Forward: the last `last_q` queries estimate vertical and slash masses, the
recall rule keeps the smallest mass-sorted prefix reaching `recall` (at most `capacity` of each
kind), the index of kept tiles and columns is built, and the sparse forward runs over it.
Backward: saved (q, k, v, out, lse, index); nothing is estimated again.

On CUDA the project's kernels run through the C API (sr_estimate_select, sr_build_index,
sr_sparse_attn_fwd, sr_attn_bwd_delta, sr_sparse_attn_bwd); on the CPU their torch twins (same
kept sets, same pairs). Where torch has torch.library.custom_op (>= 2.4) the op is registered as
sparsering::vs_attention_fwd / _bwd with a fake implementation and register_autograd, so
torch.compile traces around it; older torch gets an autograd.Function.

Covered by tests/python/op_cpu_test.py (CPU: C++ oracle, fp64 brute force, dense at recall 1),
tests/python/errors_test.py and tests/python/gpu_test.py (CUDA: CPU oracle, SDPA, torch.compile).
"""
import math
from typing import Optional, Tuple

import torch

from . import steps
from .checks import check_qkv, check_settings
from .index import SparseIndex
from .layout import single_rank

HAS_CUSTOM_OP = hasattr(torch, "library") and hasattr(torch.library, "custom_op")


def resolve_scale(head_dim: int, softmax_scale: Optional[float]) -> float:
    """1/sqrt(D) unless given (plain Python arithmetic, so torch.compile folds it; the kernels
    receive it as fp32)."""
    scale = 1.0 / math.sqrt(head_dim) if softmax_scale is None else float(softmax_scale)
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"softmax_scale must be a positive finite number, got {softmax_scale!r}")
    return scale


def _forward(q, k, v, recall, block_q, block_k, last_q, scale, capacity) -> Tuple[torch.Tensor, torch.Tensor,
                                                                                     SparseIndex]:
    """(out in q's dtype, lse (B, Hq, S) accumulator dtype, index)."""
    n = q.shape[2]
    layout = single_rank(n)
    kept = steps.estimate_single_rank(q, k, min(last_q, n), recall, capacity, scale)
    index = steps.build_step_index(kept, layout, 0, 0, block_q, block_k, q.device)
    acc = steps.accumulator_dtype(q.dtype)
    out = torch.zeros(q.shape, dtype=acc, device=q.device)
    lse = torch.full(q.shape[:3], -math.inf, dtype=acc, device=q.device)
    steps.forward(q, k, v, index, layout, 0, 0, scale, out, lse)
    return out.to(q.dtype), lse, index


def _backward(q, k, v, out, lse, dout, index: SparseIndex, scale) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    layout = single_rank(q.shape[2])
    acc = steps.accumulator_dtype(q.dtype)
    dout = dout.contiguous()
    delta = steps.backward_delta(dout, out.to(acc))
    dq = torch.zeros(q.shape, dtype=acc, device=q.device)
    dk = torch.zeros(k.shape, dtype=acc, device=q.device)
    dv = torch.zeros(v.shape, dtype=acc, device=q.device)
    steps.backward(q, k, v, dout, lse, delta, index, layout, 0, 0, scale, dq, dk, dv)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


class _VSAttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, recall, block_q, block_k, last_q, scale, capacity):
        out, lse, index = _forward(q, k, v, recall, block_q, block_k, last_q, scale, capacity)
        ctx.save_for_backward(q, k, v, out, lse, *index.tensors())
        ctx.settings = (block_q, block_k, index.q_blocks, scale)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, out, lse, *arrays = ctx.saved_tensors
        block_q, block_k, q_blocks, scale = ctx.settings
        index = SparseIndex(block_q, block_k, q_blocks, *arrays)
        dq, dk, dv = _backward(q, k, v, out, lse, dout, index, scale)
        return dq, dk, dv, None, None, None, None, None, None


if HAS_CUSTOM_OP:
    @torch.library.custom_op("sparsering::vs_attention_fwd", mutates_args=())
    def _fwd_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, recall: float, block_q: int, block_k: int,
                last_q: int, scale: float, capacity: int
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                           torch.Tensor]:
        out, lse, index = _forward(q, k, v, recall, block_q, block_k, last_q, scale, capacity)
        return (out, lse) + index.tensors()

    @_fwd_op.register_fake
    def _fwd_fake(q, k, v, recall, block_q, block_k, last_q, scale, capacity):
        ctx = torch.library.get_ctx()
        b, hq, s, _ = q.shape
        lists = b * hq * (-(-s // block_q)) + 1
        tiles, columns = ctx.new_dynamic_size(), ctx.new_dynamic_size()
        acc = steps.accumulator_dtype(q.dtype)
        return (torch.empty_like(q), q.new_empty((b, hq, s), dtype=acc), q.new_empty((lists,), dtype=torch.int32),
                q.new_empty((tiles,), dtype=torch.int32), q.new_empty((tiles,), dtype=torch.uint8),
                q.new_empty((lists,), dtype=torch.int32), q.new_empty((columns,), dtype=torch.int32))

    @torch.library.custom_op("sparsering::vs_attention_bwd", mutates_args=())
    def _bwd_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                dout: torch.Tensor, tile_offsets: torch.Tensor, tile_block: torch.Tensor, tile_masked: torch.Tensor,
                column_offsets: torch.Tensor, column_index: torch.Tensor, block_q: int, block_k: int, scale: float
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        q_blocks = -(-q.shape[2] // block_q)
        index = SparseIndex(block_q, block_k, q_blocks, tile_offsets, tile_block, tile_masked, column_offsets,
                            column_index)
        return _backward(q, k, v, out, lse, dout, index, scale)

    @_bwd_op.register_fake
    def _bwd_fake(q, k, v, out, lse, dout, tile_offsets, tile_block, tile_masked, column_offsets, column_index,
                  block_q, block_k, scale):
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

    def _setup_context(ctx, inputs, output):
        q, k, v, _recall, block_q, block_k, _last_q, scale, _capacity = inputs
        out, lse, *arrays = output
        ctx.save_for_backward(q, k, v, out, lse, *arrays)
        ctx.settings = (block_q, block_k, scale)

    def _op_backward(ctx, dout, *_unused):
        q, k, v, out, lse, *arrays = ctx.saved_tensors
        block_q, block_k, scale = ctx.settings
        dq, dk, dv = _bwd_op(q, k, v, out, lse, dout, *arrays, block_q, block_k, scale)
        return dq, dk, dv, None, None, None, None, None, None

    _fwd_op.register_autograd(_op_backward, setup_context=_setup_context)


def vs_sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, recall: float = 0.95,
                        block_q: int = 64, block_k: int = 64, last_q: int = 64, softmax_scale: Optional[float] = None,
                        capacity: int = 4096, return_lse: bool = False):
    """Causal vertical-slash sparse attention of one device.

    q (B, Hq, S, D), k and v (B, Hkv, S, D), contiguous; Hq a multiple of Hkv (GQA); any S >= 1.
    CUDA: bf16, D 64 or 128 (the kernels). CPU: bf16, fp32 or fp64, any D (the torch twin; fp64
    inputs are computed in fp64). `recall` in (0, 1] is the top-p mass target of verticals and
    slashes, `capacity` caps each kind per row; `last_q` queries (at most S) estimate the pattern;
    `block_q` / `block_k` (multiples of 64 tokens) are the tiles. Returns out (B, Hq, S, D) in q's
    dtype, and with return_lse the natural-log LSE (B, Hq, S) (fp32; fp64 for fp64 inputs).
    Raises ValueError on bad input; KernelsLibraryMissing for CUDA tensors without the library.
    """
    check_qkv(q, k, v, "vs_sparse_attention")
    check_settings(recall, block_q, block_k, last_q, capacity)
    scale = resolve_scale(q.shape[3], softmax_scale)
    last_q = min(last_q, q.shape[2])
    if HAS_CUSTOM_OP:
        out, lse = _fwd_op(q, k, v, float(recall), block_q, block_k, last_q, scale, capacity)[:2]
    else:
        out, lse = _VSAttentionFunction.apply(q, k, v, float(recall), block_q, block_k, last_q, scale, capacity)
    return (out, lse) if return_lse else out
