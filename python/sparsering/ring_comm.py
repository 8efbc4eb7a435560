"""Point-to-point transport of the ring layer through torch.distributed: non-blocking sends and
receives (batched with batch_isend_irecv on NCCL, plain isend / irecv on gloo, whose P2P ops are
not batched), and the head-parallel all-to-all written with them (differentiable: its backward is
the reverse exchange, summing gradients of K/V heads that were replicated to several ranks).
Covered by tests/python/ring_test.py.
"""
from __future__ import annotations

import torch
import torch.distributed as dist


def post(ops: list) -> list:
    """ops: (kind "send" | "recv", tensor, global peer rank, group). Returns the requests."""
    if not ops:
        return []
    if dist.get_backend() == "nccl":
        return dist.batch_isend_irecv([dist.P2POp(dist.isend if kind == "send" else dist.irecv, t, peer, group)
                                       for kind, t, peer, group in ops])
    return [dist.isend(t, peer, group=group) if kind == "send" else dist.irecv(t, peer, group=group)
            for kind, t, peer, group in ops]


def wait(requests: list) -> None:
    for request in requests:
        request.wait()


def heads_of(head_index: int, heads: int, head_parallel: int) -> range:
    """The heads that head-parallel rank `head_index` attends: an equal share, or (more ranks than
    heads) the one head its query heads read, replicated."""
    if heads >= head_parallel:
        share = heads // head_parallel
        return range(head_index * share, (head_index + 1) * share)
    return range(head_index * heads // head_parallel, head_index * heads // head_parallel + 1)


class _HeadExchange(torch.autograd.Function):
    """(B, H, L/hp, D) all heads of this rank's token slice -> (B, H_i, L, D) this rank's heads of all
    tokens of its ring position (slices ordered by head index)."""

    @staticmethod
    def forward(ctx, x, head_ranks, head_index, heads):
        hp = len(head_ranks)
        ctx.meta = (head_ranks, head_index, heads, x.shape)
        mine = heads_of(head_index, heads, hp)
        ops, received = [], []
        for j, peer in enumerate(head_ranks):
            theirs = heads_of(j, heads, hp)
            if j == head_index:
                received.append(x[:, mine.start:mine.stop])
                continue
            ops.append(("send", x[:, theirs.start:theirs.stop].contiguous(), peer, None))
            buffer = x.new_empty((x.shape[0], len(mine), x.shape[2], x.shape[3]))
            ops.append(("recv", buffer, peer, None))
            received.append(buffer)
        wait(post(ops))
        return torch.cat(received, dim=2).contiguous()

    @staticmethod
    def backward(ctx, grad):
        head_ranks, head_index, heads, shape = ctx.meta
        hp = len(head_ranks)
        part = shape[2]
        out = grad.new_zeros(shape)
        ops, received = [], []
        for j, peer in enumerate(head_ranks):
            theirs = heads_of(j, heads, hp)
            if j == head_index:
                received.append((theirs, grad[:, :, j * part:(j + 1) * part]))
                continue
            ops.append(("send", grad[:, :, j * part:(j + 1) * part].contiguous(), peer, None))
            buffer = grad.new_empty((shape[0], len(theirs), part, shape[3]))
            ops.append(("recv", buffer, peer, None))
            received.append((theirs, buffer))
        wait(post(ops))
        for theirs, g in received:
            out[:, theirs.start:theirs.stop] += g
        return out, None, None, None


class _HeadGather(torch.autograd.Function):
    """Inverse of the exchange for the attention output: (B, H_i, L, D) -> (B, H, L/hp, D)."""

    @staticmethod
    def forward(ctx, y, head_ranks, head_index, heads):
        hp = len(head_ranks)
        ctx.meta = (head_ranks, head_index, heads)
        part = y.shape[2] // hp
        ops, pieces = [], []
        for j, peer in enumerate(head_ranks):
            theirs = heads_of(j, heads, hp)
            if j == head_index:
                pieces.append(y[:, :, j * part:(j + 1) * part])
                continue
            ops.append(("send", y[:, :, j * part:(j + 1) * part].contiguous(), peer, None))
            buffer = y.new_empty((y.shape[0], len(theirs), part, y.shape[3]))
            ops.append(("recv", buffer, peer, None))
            pieces.append(buffer)
        wait(post(ops))
        return torch.cat(pieces, dim=1).contiguous()

    @staticmethod
    def backward(ctx, grad):
        head_ranks, head_index, heads = ctx.meta
        return _HeadExchange.apply(grad.contiguous(), head_ranks, head_index, heads), None, None, None


def scatter_heads(x: torch.Tensor, head_ranks: list, head_index: int) -> torch.Tensor:
    """All-to-all before attention (identity without head parallelism)."""
    if len(head_ranks) == 1:
        return x
    return _HeadExchange.apply(x, head_ranks, head_index, x.shape[1])


def gather_heads(y: torch.Tensor, head_ranks: list, head_index: int, heads: int) -> torch.Tensor:
    """All-to-all after attention (identity without head parallelism)."""
    if len(head_ranks) == 1:
        return y
    return _HeadGather.apply(y, head_ranks, head_index, heads)
