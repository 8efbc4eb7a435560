"""One sparse attention forward on the dense-causal index (B=1, 16 query / 2 KV heads, head dim 128,
block 128), for profilers: run it under Nsight Compute, e.g.

  ncu --kernel-name regex:sparse_attn_fwd --launch-skip 1 --launch-count 1 --section SpeedOfLight \
      python3 kernels/bench/profile_forward.py --lib build/kernels/cuda/libsparsering_kernels.so --n 32768

SPARSERING_FORWARD_KERNEL picks the kernel (mma_sync, wgmma) as for every launch.
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
from patterns import index_from_diagonals  # noqa: E402
from sparsering.capi import DeviceIndex, SparseringKernels  # noqa: E402

HEADS, KV_HEADS, DIM, BLOCK = 16, 2, 128, 128


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", required=True)
    parser.add_argument("--n", type=int, default=32768)
    parser.add_argument("--launches", type=int, default=2)
    args = parser.parse_args()
    lib = SparseringKernels(args.lib)
    n = args.n
    h = index_from_diagonals([np.ones(n // BLOCK, dtype=bool)] * HEADS, [np.zeros(0, np.int64)] * HEADS, n, BLOCK)
    index = DeviceIndex.from_numpy(BLOCK, BLOCK, h.q_blocks, h.tile_offsets, h.tile_block, h.tile_masked,
                                   h.column_offsets, h.column_index)
    q = torch.randn(1, HEADS, n, DIM, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, KV_HEADS, n, DIM, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, KV_HEADS, n, DIM, device="cuda", dtype=torch.bfloat16)
    out = torch.zeros(1, HEADS, n, DIM, device="cuda", dtype=torch.float32)
    lse = torch.full((1, HEADS, n), -math.inf, device="cuda", dtype=torch.float32)
    for _ in range(args.launches):
        lib.sparse_attn_fwd(q, k, v, index, out, lse)
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    lib.sparse_attn_fwd(q, k, v, index, out, lse)
    stop.record()
    stop.synchronize()
    pairs = h.computed_pairs()
    print(f"forward {start.elapsed_time(stop):.3f} ms, {4.0 * DIM * pairs / start.elapsed_time(stop) / 1e9:.0f} TF/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
