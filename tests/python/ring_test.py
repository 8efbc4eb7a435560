#!/usr/bin/python3
"""sparse_ring_attention in real torch.distributed on the CPU (gloo; ctest labels torch, cpu).

For plans exported with `sparsering export --to torch` (tests/python/data/plans/): a flat striped
ring of 2, a flat zigzag ring of 4, a 2 x 2 hierarchical striped ring and head parallel 2 x a
striped ring of 2 (one K/V head replicated to both head-parallel ranks), each process feeds its
tokens (RingContext.local_tokens) in fp64; the outputs and dq, dk, dv of every rank must equal the
single-process steps (sparsering.steps, every (query, K/V) position pair of the layout) over the
kept sets that the single-rank estimation selects on the whole sequence, within 1e-10 relative;
the ring's own estimation must select exactly those kept sets. A bf16 run of the flat ring stays
within 2e-2 of the fp64 result. Plan and input mismatches raise ValueError (a world of 2 loading
the 4-rank plan, a wrong token count, head parallelism beyond the K/V heads without replication).

    ring_test.py --cli BUILD/cli/sparsering --source REPO --workdir DIR
"""
import argparse
import datetime
import math
import os
import shutil
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_support import import_torch, rel, structured_qkv, test_seed  # noqa: E402

torch = import_torch()
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from sparsering import steps  # noqa: E402
from sparsering.ring_attention import sparse_ring_attention  # noqa: E402
from sparsering.ring_context import RingContext  # noqa: E402
from sparsering.ring_estimate import ring_kept_sets  # noqa: E402

CASES = [  # plan, world, q heads, kv heads, dtypes
    ("flat-striped-2", 2, 4, 2, ("float64", "bfloat16")),
    ("flat-zigzag-4", 4, 2, 1, ("float64",)),
    ("hier-striped-4", 4, 4, 2, ("float64",)),
    ("hp2-striped-4", 4, 4, 1, ("float64",)),
]
HEAD_DIM = 16


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reference(rc, q, k, v, dout, scale):
    """Every (query position, K/V position) step in one process over the single-rank kept sets."""
    layout, sparse = rc.layout, rc.sparse
    n, w = layout.seq_len_tokens, layout.ranks
    kept = steps.estimate_single_rank(q, k, sparse.last_q, sparse.recall, n, scale)
    local = lambda t, r: t[:, :, layout.global_positions(r)].contiguous()  # noqa: E731
    outs, lses, dqs = [], [], []
    dks = [torch.zeros_like(local(k, r)) for r in range(w)]
    dvs = [torch.zeros_like(local(v, r)) for r in range(w)]
    indexes = {}
    for qr in range(w):
        out = torch.zeros_like(local(q, qr))
        lse = torch.full(out.shape[:3], -math.inf, dtype=out.dtype)
        for kr in range(w):
            indexes[qr, kr] = steps.build_step_index(kept, layout, qr, kr, sparse.block_q, sparse.block_k,
                                                     torch.device("cpu"))
            steps.forward(local(q, qr), local(k, kr), local(v, kr), indexes[qr, kr], layout, qr, kr, scale, out, lse)
        outs.append(out)
        lses.append(lse)
    for qr in range(w):
        delta = steps.backward_delta(local(dout, qr), outs[qr])
        dq = torch.zeros_like(outs[qr])
        for kr in range(w):
            steps.backward(local(q, qr), local(k, kr), local(v, kr), local(dout, qr), lses[qr], delta,
                           indexes[qr, kr], layout, qr, kr, scale, dq, dks[kr], dvs[kr])
        dqs.append(dq)
    return kept, outs, dqs, dks, dvs


def worker(rank, world, port, export_dir, heads, kv_heads, dtypes, seed, results):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
    rc = RingContext.from_export(export_dir)
    n = rc.seq_len_tokens
    gen = torch.Generator().manual_seed(seed)
    q, k, v, dout = structured_qkv(torch, gen, 1, heads, kv_heads, n, HEAD_DIM, torch.float64)
    scale = float(torch.tensor(1.0 / math.sqrt(HEAD_DIM), dtype=torch.float32))
    lines, failures = [], []

    def check(what, value, bound):
        ok = value <= bound
        lines.append(f"  rank {rank} {what}: {value:.2e} (bound {bound:.0e}) {'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(what)

    got = {}
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        leaves = [rc.local_tokens(t, dim=2).to(dtype).contiguous().requires_grad_(True) for t in (q, k, v)]
        out = sparse_ring_attention(*leaves, rc)
        out.backward(rc.local_tokens(dout, dim=2).to(dtype))
        got[dtype_name] = [out.detach()] + [t.grad for t in leaves]
    kept, outs, dqs, dks, dvs = reference(rc, q, k, v, dout, scale)
    start, end = rc.token_slice
    p = rc.cp_rank
    expect = [outs[p][:, :, start:end], dqs[p][:, :, start:end], dks[p][:, :, start:end], dvs[p][:, :, start:end]]
    for name, a, b in zip(("out", "dq", "dk", "dv"), got["float64"], expect):
        check(f"fp64 {name} (norm {float(b.norm()):.3g}) rel vs single process", rel(torch, a, b), 1e-10)
    if "bfloat16" in got:
        for name, a, b in zip(("out", "dq", "dk", "dv"), got["bfloat16"], got["float64"]):
            check(f"bf16 {name} rel vs fp64", rel(torch, a, b), 2e-2)
    if rc.head_parallel == 1:
        local = [rc.local_tokens(t, dim=2).contiguous() for t in (q, k)]
        ring_kept = ring_kept_sets(*local, rc.layout, rc.cp_rank, rc.me.ring_group, rc.sparse.last_q,
                                   rc.sparse.recall, n, n, scale)
        same = ring_kept.row_lists() == kept.row_lists()
        lines.append(f"  rank {rank} ring estimation selects the single-rank kept sets: {'ok' if same else 'FAIL'}")
        if not same:
            failures.append("kept sets")
    density = sum(len(a) + len(b) for a, b in kept.row_lists()) / (2 * n * kept.rows)
    lines.append(f"  rank {rank} (cp {rc.cp_rank}, head {rc.head_index}): kept share of entries {density:.3f}")
    # A wrong token count and a plan that does not fit the heads raise before anything runs.
    try:
        sparse_ring_attention(*[rc.local_tokens(t, dim=2)[:, :, :-1].contiguous() for t in (q, k, v)], rc)
        failures.append("short input accepted")
    except ValueError as error:
        lines.append(f"  rank {rank} short input rejected: {error}")
    if rc.head_parallel > 1:
        rc.replicate_kv_heads = False
        try:
            sparse_ring_attention(*[rc.local_tokens(t, dim=2).contiguous() for t in (q, k, v)], rc)
            failures.append("head_parallel > kv heads accepted without replication")
        except ValueError as error:
            lines.append(f"  rank {rank} without replication rejected: {error}")
    other = os.path.join(os.path.dirname(export_dir), "flat-zigzag-4")
    if world != 4 and os.path.isdir(other):  # the world check runs before any group is created
        try:
            RingContext.from_export(other)
            failures.append("a plan for another world size accepted")
        except ValueError as error:
            lines.append(f"  rank {rank} plan for 4 ranks rejected: {error}")
    results.put((rank, lines, failures))
    dist.barrier()
    dist.destroy_process_group()


def run(target, world, args, seed):
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=target, args=(r, world) + tuple(args) + (seed, results)) for r in range(world)]
    for p in procs:
        p.start()
    collected = [results.get(timeout=240) for _ in range(world)]
    for p in procs:
        p.join(60)
    failures = []
    for rank, lines, fails in sorted(collected, key=lambda x: x[0]):
        print("\n".join(lines), flush=True)
        failures += [f"rank {rank}: {f}" for f in fails]
    if any(p.exitcode != 0 for p in procs):
        failures.append(f"exit codes {[p.exitcode for p in procs]}")
    return failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    if not dist.is_available() or not dist.is_gloo_available():
        print("FAILED: torch.distributed with gloo is not available")
        return 1
    seed = test_seed("ring_test")
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    failures = []
    for plan, _, _, _, _ in CASES:
        subprocess.run([args.cli, "export", os.path.join(args.source, "tests", "python", "data", "plans", plan + ".yaml"),
                        "--to", "torch", "--out", os.path.join(args.workdir, plan)], check=True,
                       stdout=subprocess.DEVNULL)
    for plan, world, heads, kv_heads, dtypes in CASES:
        export_dir = os.path.join(args.workdir, plan)
        print(f"{plan}: {world} processes, heads {heads}/{kv_heads}, {', '.join(dtypes)}", flush=True)
        failures += [f"{plan} {f}" for f in run(worker, world, (free_port(), export_dir, heads, kv_heads, dtypes),
                                                 seed)]
    if failures:
        print("ring_test: FAILED:", "; ".join(failures))
        return 1
    print("ring_test: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
