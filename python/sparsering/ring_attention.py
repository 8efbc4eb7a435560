"""sparse_ring_attention: the distributed attention layer that executes a plan exported with
`sparsering export --to torch` (through a RingContext).

Per call: the head-parallel all-to-all (when the plan has head parallelism) gives each rank its
heads for all tokens of its ring position; the ring estimates the pattern from the last queries of
the whole sequence (ring_estimate.py) and every rank selects the same kept sets; the K/V chunks
then travel the plan's ring: per level, the hop to `next[l]` / from `prev[l]` is posted before the
levels below run (outer hop first), so a chunk is received while the current one computes (two
buffers per level); each step builds the index of (this position, the chunk's owner) and merges
its (out, LSE) into the running state (steps.py). The backward runs the same schedule: K/V hop
again, the dK/dV accumulator follows its chunk around each innermost ring (a separate group) and
at the end of that ring goes back to the chunk's owner; all returns are posted as one batch at
the end, so NCCL never orders a send behind an unmatched receive. Then the reverse all-to-all.

The schedule is the planner's (core/ring_schedule.hpp): at step t with mixed-radix digits t_l
(inner fastest), position p holds the chunk of the position with digits (p_l - t_l) mod s_l.
CPU tensors run with gloo through the torch step twin, CUDA tensors with NCCL through the kernels.
Covered by tests/python/ring_test.py (gloo: 2 and 4 processes, flat and 2x2 hierarchical, striped
and zigzag, head parallel 2; equal to the single-process steps on the same kept sets).
"""
from __future__ import annotations

import math

import torch

from . import steps
from .checks import check_qkv
from .index import SparseIndex
from .ring_comm import gather_heads, post, scatter_heads, wait
from .ring_context import RingContext
from .ring_estimate import dense_kept, ring_kept_sets
from .vs_attention import resolve_scale


def _digits(position: int, sizes: list) -> list:
    out = []
    for size in sizes:
        out.append(position % size)
        position //= size
    return out


def _position(digits: list, sizes: list) -> int:
    position, stride = 0, 1
    for digit, size in zip(digits, sizes):
        position += digit * stride
        stride *= size
    return position


def source_position(position: int, step: int, sizes: list) -> int:
    """The ring position whose K/V chunk `position` holds at `step`."""
    p, t = _digits(position, sizes), _digits(step, sizes)
    return _position([(pi - ti) % s for pi, ti, s in zip(p, t, sizes)], sizes)


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, rc: RingContext, scale: float):
        me, sizes, layout, sparse = rc.me, rc.level_sizes, rc.layout, rc.sparse
        b, h, length, _ = q.shape
        with torch.no_grad():
            if sparse.enabled:
                kept = ring_kept_sets(q, k, layout, rc.cp_rank, me.ring_group, sparse.last_q, sparse.recall,
                                      sparse.max_verticals, sparse.max_slashes, scale)
            else:
                kept = dense_kept(b * h, layout.seq_len_tokens, q.device)
        acc = steps.accumulator_dtype(q.dtype)
        out = torch.zeros(q.shape, dtype=acc, device=q.device)
        lse = torch.full(q.shape[:3], -math.inf, dtype=acc, device=q.device)
        indexes = {}

        def compute(chunk, owner):
            index = steps.build_step_index(kept, layout, rc.cp_rank, owner, sparse.block_q, sparse.block_k, q.device)
            indexes[owner] = index
            steps.forward(q, chunk[0], chunk[1], index, layout, rc.cp_rank, owner, scale, out, lse)

        def visit(level, chunk, digits):
            for step in range(sizes[level]):
                requests, received = [], None
                if step + 1 < sizes[level]:
                    received = torch.empty_like(chunk)
                    group = me.level_groups[level]
                    requests = post([("send", chunk, me.next[level], group), ("recv", received, me.prev[level], group)])
                if level == 0:
                    compute(chunk, _position(digits, sizes))
                else:
                    visit(level - 1, chunk, list(digits))
                if requests:
                    wait(requests)
                    chunk = received
                    digits[level] = (digits[level] - 1) % sizes[level]

        visit(len(sizes) - 1, torch.stack([k, v]).contiguous(), _digits(rc.cp_rank, sizes))
        owners = sorted(indexes)
        arrays = [t for owner in owners for t in indexes[owner].tensors()]
        result = out.to(q.dtype)
        ctx.save_for_backward(q, k, v, result, lse, *arrays)
        ctx.meta = (rc, scale, owners, [(indexes[o].block_q, indexes[o].block_k, indexes[o].q_blocks) for o in owners])
        return result

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse, *arrays = ctx.saved_tensors
        rc, scale, owners, shapes = ctx.meta
        me, sizes, layout = rc.me, rc.level_sizes, rc.layout
        indexes = {owner: SparseIndex(*shape, *arrays[5 * i:5 * i + 5]) for i, (owner, shape) in
                   enumerate(zip(owners, shapes))}
        acc = steps.accumulator_dtype(q.dtype)
        dout = dout.contiguous()
        delta = steps.backward_delta(dout, out.to(acc))
        dq = torch.zeros(q.shape, dtype=acc, device=q.device)
        own = torch.zeros((2,) + tuple(k.shape), dtype=acc, device=q.device)
        outgoing, incoming = [], []
        me_digits = _digits(rc.cp_rank, sizes)
        inner = sizes[0]
        for step in range(inner - 1, math.prod(sizes), inner):  # steps that end an innermost ring
            t = _digits(step, sizes)
            holder = _position([(d + s) % size for d, s, size in zip(me_digits, t, sizes)], sizes)
            if holder != rc.cp_rank:
                buffer = torch.empty_like(own)
                incoming.append(buffer)
                outgoing.append(("recv", buffer, rc.ring_ranks[holder], rc.return_group))

        def innermost(chunk, digits):
            partial = torch.zeros_like(own)
            for step in range(inner):
                requests, received = [], None
                if step + 1 < inner:
                    received = torch.empty_like(chunk)
                    group = me.level_groups[0]
                    requests = post([("send", chunk, me.next[0], group), ("recv", received, me.prev[0], group)])
                owner = _position(digits, sizes)
                steps.backward(q, chunk[0], chunk[1], dout, lse, delta, indexes[owner], layout, rc.cp_rank, owner,
                               scale, dq, partial[0], partial[1])
                if step + 1 < inner:
                    passed = torch.empty_like(partial)
                    requests += post([("send", partial, me.next[0], rc.acc_group),
                                      ("recv", passed, me.prev[0], rc.acc_group)])
                    wait(requests)
                    chunk, partial = received, passed
                    digits[0] = (digits[0] - 1) % inner
                elif owner == rc.cp_rank:
                    own.add_(partial)
                else:
                    outgoing.append(("send", partial, rc.ring_ranks[owner], rc.return_group))

        def visit(level, chunk, digits):
            if level == 0:
                innermost(chunk, digits)
                return
            for step in range(sizes[level]):
                requests, received = [], None
                if step + 1 < sizes[level]:
                    received = torch.empty_like(chunk)
                    group = me.level_groups[level]
                    requests = post([("send", chunk, me.next[level], group), ("recv", received, me.prev[level], group)])
                visit(level - 1, chunk, list(digits))
                if requests:
                    wait(requests)
                    chunk = received
                    digits[level] = (digits[level] - 1) % sizes[level]

        visit(len(sizes) - 1, torch.stack([k, v]).contiguous(), list(me_digits))
        wait(post(outgoing))
        for buffer in incoming:
            own.add_(buffer)
        return dq.to(q.dtype), own[0].to(k.dtype), own[1].to(v.dtype), None, None


def check_ring_inputs(q, k, v, rc: RingContext) -> None:
    """ValueError when the tensors do not fit the plan or the running world."""
    import torch.distributed as dist

    check_qkv(q, k, v, "sparse_ring_attention")
    if not isinstance(rc, RingContext):
        raise ValueError(f"sparse_ring_attention: plan_context must be a RingContext, got {type(rc).__name__}")
    backend = dist.get_backend()
    if q.is_cuda != (backend == "nccl"):
        raise ValueError(f"sparse_ring_attention: {q.device.type} tensors cannot travel a {backend} process group "
                         f"(CUDA tensors need nccl, CPU tensors gloo)")
    hp, cp = rc.head_parallel, rc.plan.context_parallel
    want = rc.seq_len_tokens // cp // hp
    if q.shape[2] != want:
        raise ValueError(f"sparse_ring_attention: the plan deals {rc.seq_len_tokens} tokens over {cp} ring positions"
                         + (f" and {hp} head-parallel ranks" if hp > 1 else "") + f", so each rank feeds {want} "
                         f"tokens; got {q.shape[2]}")
    hq, hkv = q.shape[1], k.shape[1]
    if hq % hp:
        raise ValueError(f"sparse_ring_attention: head_parallel {hp} does not divide the {hq} query heads")
    if hkv % hp and hp % hkv:
        raise ValueError(f"sparse_ring_attention: head_parallel {hp} neither divides the {hkv} key/value heads nor "
                         f"is a multiple of them (replication needs a multiple)")
    if hp > hkv and not rc.replicate_kv_heads:
        raise ValueError(f"sparse_ring_attention: head_parallel {hp} is larger than the {hkv} key/value heads and "
                         f"K/V head replication is off (RingContext.replicate_kv_heads)")
    sparse = rc.sparse
    for name in ("block_q", "block_k"):
        value = getattr(sparse, name)
        if value % 64:
            raise ValueError(f"sparse_ring_attention: the plan's sparse.{name} = {value} is not a multiple of 64 "
                             f"tokens (the kernels' tile)")


def sparse_ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan_context: RingContext, *,
                          softmax_scale: float | None = None) -> torch.Tensor:
    """Causal sparse attention of the whole sequence, split over the plan's ranks.

    q (B, Hq, T, D), k and v (B, Hkv, T, D): the T = N / (context_parallel x head_parallel) tokens
    this rank feeds (RingContext.local_tokens / position_ids give them), all heads, contiguous;
    CUDA bf16 with NCCL, CPU bf16 / fp32 / fp64 with gloo. Returns the attention output of the same
    tokens (B, Hq, T, D) in q's dtype; differentiable in q, k and v. The plan's sparse settings
    apply (RingContext.sparse). Raises ValueError when the tensors do not fit the plan.
    """
    rc = plan_context
    check_ring_inputs(q, k, v, rc)
    scale = resolve_scale(q.shape[3], softmax_scale)
    qh = scatter_heads(q, rc.head_ranks, rc.head_index)
    kh = scatter_heads(k, rc.head_ranks, rc.head_index)
    vh = scatter_heads(v, rc.head_ranks, rc.head_index)
    out = _RingAttention.apply(qh, kh, vh, rc, scale)
    return gather_heads(out, rc.head_ranks, rc.head_index, q.shape[1])
