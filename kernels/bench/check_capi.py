"""End-to-end check of libsparsering_kernels.so through the ctypes binding, on the GPU: the
benchmark's numpy index (kernels/bench/patterns.py) and our forward / backward must equal a dense
fp64 torch attention restricted to the pairs the contract defines (causal and (tile kept or key a
kept vertical)), built independently of the index; the index built into an allocated index
equals the exact-array build on ring layouts. Also checks that bad arguments raise.
Bounds as the C++ GPU tests: out rel L2 <= 5e-3, lse max err <= 2e-3, grads rel L2 <= 1e-2.

  python3 kernels/bench/check_capi.py --lib build/kernels/cuda/libsparsering_kernels.so
"""
from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from patterns import HeadPattern, pattern_index, qwen_like_pattern  # noqa: E402
from sparsering.capi import SR_INPUT_ERROR, DeviceIndex, RingPosition, SparseringError, SparseringKernels  # noqa: E402


def contract_mask(patterns, n: int, block: int) -> torch.Tensor:
    """(H, n, n) pairs straight from the definition: causal and (some kept offset d (or 0) has a
    pair in the (q block, k block) tile, or k is a kept vertical key)."""
    masks = []
    q = torch.arange(n).view(n, 1)
    k = torch.arange(n).view(1, n)
    for p in patterns:
        offsets = torch.as_tensor(np.union1d(p.slash_offsets, [0]))
        lo = (q // block) * block - (k // block) * block - (block - 1)  # smallest q - k in the tile
        hi = lo + 2 * (block - 1)
        # any kept offset in [lo, hi]: count of offsets <= hi minus count < lo
        tile = torch.searchsorted(offsets, hi, right=True) > torch.searchsorted(offsets, lo, right=False)
        vertical = torch.zeros(n, dtype=torch.bool)
        vertical[torch.as_tensor(p.vertical_keys, dtype=torch.int64)] = True
        masks.append((q >= k) & (tile | vertical.view(1, n)))
    return torch.stack(masks)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", required=True)
    args = parser.parse_args()
    lib = SparseringKernels(args.lib)
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    failures = []
    for n, heads, kv_heads, dim, block in ((1024, 4, 2, 128, 64), (1536, 8, 1, 64, 128), (768, 2, 2, 128, 128)):
        patterns = [qwen_like_pattern(rng, n, 0.9) for _ in range(heads - 1)]
        patterns.append(HeadPattern(np.zeros(0, np.int64), np.zeros(0, np.int64)))  # a row that keeps only itself
        h = pattern_index(patterns, n, block)
        index = DeviceIndex.from_numpy(block, block, h.q_blocks, h.tile_offsets, h.tile_block, h.tile_masked,
                                       h.column_offsets, h.column_index)
        q = torch.randn(1, heads, n, dim, device="cuda").bfloat16()
        k = torch.randn(1, kv_heads, n, dim, device="cuda").bfloat16()
        v = torch.randn(1, kv_heads, n, dim, device="cuda").bfloat16()
        dout = torch.randn(1, heads, n, dim, device="cuda").bfloat16()
        out = torch.zeros(1, heads, n, dim, device="cuda")
        lse = torch.full((1, heads, n), -math.inf, device="cuda")
        lib.sparse_attn_fwd(q, k, v, index, out, lse)
        delta = torch.empty(1, heads, n, device="cuda")
        dq = torch.zeros_like(out)
        dk = torch.zeros(1, kv_heads, n, dim, device="cuda")
        dv = torch.zeros_like(dk)
        lib.attn_bwd_delta(dout, out, delta)
        lib.sparse_attn_bwd(q, k, v, dout, lse, delta, index, dq, dk, dv)

        mask = contract_mask(patterns, n, block).cuda()
        group = heads // kv_heads
        qr, kr, vr = (t.double().requires_grad_(True) for t in (q, k, v))
        scores = (qr @ kr.repeat_interleave(group, 1).transpose(-1, -2)) / math.sqrt(dim)
        scores = scores.masked_fill(~mask.unsqueeze(0), -math.inf)
        ref_lse = torch.logsumexp(scores, -1).detach()
        ref = torch.softmax(scores, -1) @ vr.repeat_interleave(group, 1)
        ref.backward(dout.double())
        rel = lambda a, b: float((a.double() - b.detach()).norm() / b.detach().norm())  # noqa: E731
        checks = {"out": (rel(out, ref), 5e-3), "lse": (float((lse.double() - ref_lse).abs().max()), 2e-3),
                  "dq": (rel(dq, qr.grad), 1e-2), "dk": (rel(dk, kr.grad), 1e-2), "dv": (rel(dv, vr.grad), 1e-2)}
        for name, (value, bound) in checks.items():
            status = "ok" if value <= bound else "FAIL"
            print(f"capi N={n} H={heads}/{kv_heads} D={dim} B={block}: {name} error {value:.2e} (bound {bound:.0e}) {status}")
            if not value <= bound:
                failures.append(f"{name} N={n}")
    # Index builds: into an index allocated once (no sync) equals the exact-array build, at every
    # ring step of a zigzag ring of 2 (aligned blocks: the diagonal table) and a striped ring of 3
    # (stripes shorter than a block: the slash intervals).
    for position_args, ring_n, ring_block in ((dict(layout="zigzag", ranks=2), 2048, 64),
                                         (dict(layout="striped", ranks=3, granularity_tokens=16), 1536, 64)):
        patterns = [qwen_like_pattern(rng, ring_n, 0.9) for _ in range(3)]
        capacity = max(1, max(max(len(p.vertical_keys), len(p.slash_offsets)) for p in patterns))
        kept = [torch.zeros(3, dtype=torch.int32), torch.full((3, capacity), -1, dtype=torch.int32),
                torch.zeros(3, dtype=torch.int32), torch.full((3, capacity), -1, dtype=torch.int32)]
        for row, p in enumerate(patterns):
            kept[0][row], kept[2][row] = len(p.vertical_keys), len(p.slash_offsets)
            kept[1][row, : len(p.vertical_keys)] = torch.as_tensor(p.vertical_keys, dtype=torch.int32)
            kept[3][row, : len(p.slash_offsets)] = torch.as_tensor(p.slash_offsets, dtype=torch.int32)
        kept = tuple(t.cuda() for t in kept)
        for q_rank in range(position_args["ranks"]):
            for kv_rank in range(position_args["ranks"]):
                position = RingPosition(seq_len_tokens=ring_n, q_rank=q_rank, kv_rank=kv_rank, **position_args)
                exact = lib.build_index(kept, position, ring_block, ring_block).copy(torch.device("cuda"))
                into = lib.allocate_index(3, capacity, position, ring_block, ring_block)
                lib.build_index_into(kept, position, into)
                into.read_counts()
                got = into.copy(torch.device("cuda"))
                # Entries past the counts are unused (arrays hold at least one entry, never written).
                lists = len(exact.tile_offsets)
                lengths = (lists, exact.tiles(), exact.tiles(), lists, exact.columns())
                same = got.tiles() == exact.tiles() and got.columns() == exact.columns() and all(
                    torch.equal(a[:m], b[:m]) for a, b, m in zip(got.tensors(), exact.tensors(), lengths))
                where = f"{position_args['layout']} W={position_args['ranks']} step ({q_rank}, {kv_rank})"
                print(f"capi index build into an allocated index == exact arrays, {where} ({exact.tiles()} tiles, "
                      f"{exact.columns()} columns): {'ok' if same else 'FAIL'}")
                if not same:
                    failures.append(f"index into {where}")
    # Bad arguments: a dtype error in Python, an InputError from the library.
    try:
        lib.sparse_attn_fwd(q.float(), k, v, index, out, lse)
        failures.append("float32 q accepted")
    except ValueError as error:
        print("rejected as expected:", error)
    bad = torch.zeros(1, heads, n, 96, device="cuda", dtype=torch.bfloat16)
    try:
        lib.sparse_attn_fwd(bad, bad[:, :kv_heads].contiguous(), bad[:, :kv_heads].contiguous(), index,
                            torch.zeros(bad.shape, device="cuda"), lse)
        failures.append("head_dim 96 accepted")
    except SparseringError as error:
        print("rejected as expected:", error)
        if error.code != SR_INPUT_ERROR:
            failures.append("head_dim 96 gave the wrong error code")
    print("check_capi:", "FAILED " + ", ".join(failures) if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
