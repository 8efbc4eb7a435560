"""One sparse attention forward or backward (B=1, 16 query / 2 KV heads, head dim 128, block 128) on
the dense-causal index, a vertical-slash index like the benchmark's (`--pattern vs`) or random
blocks, for profilers. Prints the time of every GPU kernel of the timed launch (torch.profiler),
so a backward splits into delta, index transposition, key-block pass and column pass; or run it
under Nsight Compute, e.g.

  ncu --kernel-name regex:sparse_attn_bwd --launch-skip 2 --launch-count 1 --section SpeedOfLight \\
      python3 kernels/bench/profile_attention.py --lib build/kernels/cuda/libsparsering_kernels.so --direction bwd

SPARSERING_FORWARD_KERNEL / SPARSERING_BACKWARD_KERNEL pick the kernel (mma_sync, wgmma) as for
every launch.
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
from patterns import index_from_diagonals, pattern_index, qwen_like_pattern, random_block_index  # noqa: E402
from sparsering.capi import DeviceIndex, SparseringKernels  # noqa: E402

HEADS, KV_HEADS, DIM, BLOCK = 16, 2, 128, 128


def host_index(pattern: str, n: int, rng: np.random.Generator):
    if pattern == "dense":
        return index_from_diagonals([np.ones(n // BLOCK, dtype=bool)] * HEADS, [np.zeros(0, np.int64)] * HEADS, n, BLOCK)
    if pattern == "vs":
        return pattern_index([qwen_like_pattern(rng, n, 0.95) for _ in range(HEADS)], n, BLOCK)
    return random_block_index(rng, HEADS, n, BLOCK, 0.05)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", required=True)
    parser.add_argument("--n", type=int, default=32768)
    parser.add_argument("--pattern", choices=["dense", "vs", "blocks"], default="dense")
    parser.add_argument("--direction", choices=["fwd", "bwd"], default="fwd")
    parser.add_argument("--launches", type=int, default=2, help="untimed launches first")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    lib = SparseringKernels(args.lib)
    n = args.n
    h = host_index(args.pattern, n, np.random.default_rng(args.seed))
    index = DeviceIndex.from_numpy(BLOCK, BLOCK, h.q_blocks, h.tile_offsets, h.tile_block, h.tile_masked,
                                   h.column_offsets, h.column_index)
    q, dout = (torch.randn(1, HEADS, n, DIM, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(1, KV_HEADS, n, DIM, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    out = torch.zeros(1, HEADS, n, DIM, device="cuda", dtype=torch.float32)
    lse = torch.full((1, HEADS, n), -math.inf, device="cuda", dtype=torch.float32)
    lib.sparse_attn_fwd(q, k, v, index, out, lse)
    delta = torch.empty(1, HEADS, n, device="cuda", dtype=torch.float32)
    dq = torch.zeros(1, HEADS, n, DIM, device="cuda", dtype=torch.float32)
    dk, dv = (torch.zeros(1, KV_HEADS, n, DIM, device="cuda", dtype=torch.float32) for _ in range(2))

    def launch():
        if args.direction == "fwd":
            lib.sparse_attn_fwd(q, k, v, index, out, lse)
        else:
            lib.attn_bwd_delta(dout, out, delta)
            lib.sparse_attn_bwd(q, k, v, dout, lse, delta, index, dq, dk, dv)

    for _ in range(args.launches):
        launch()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        launch()
        torch.cuda.synchronize()
    total_us = 0.0
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            total_us += event.device_time
            print(f"  {event.device_time:10.1f} us  {event.name[:110]}")
    flop = 4.0 * DIM * h.computed_pairs() * (1.0 if args.direction == "fwd" else 2.5)
    print(f"{args.pattern} {args.direction} N={n}: kernels {total_us / 1e3:.3f} ms, {flop / total_us / 1e6:.0f} TF/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
