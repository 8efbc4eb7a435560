#!/usr/bin/python3
"""The CPU path of the sparsering package against the project's C++ CPU oracles and fp64 brute
force (ctest labels torch, cpu).

1. Oracle agreement (vs_oracle_tool runs estimate_pattern_ref, the recall rule of
   traces/recall.hpp, build_sparse_index, sparse_attn_fwd_ref and sparse_attn_bwd_ref) on
   contiguous, zigzag and striped rings of 1 to 4 ranks, lengths not multiples of the blocks, GQA:
   masses (rel 1e-6), kept sets (equal: torch selection on the oracle's masses, and end to end),
   index arrays of every ring step (equal), merged out / lse / dq / dk / dv over all steps (rel L2
   1e-5; the oracle stores fp32) with the torch steps run on the same bf16 values in fp64.
2. vs_sparse_attention end to end (fp64 inputs) equals the oracle (rel L2 1e-5).
3. vs_sparse_attention on sparse kept sets equals an fp64 brute force over the pair set written
   from the definition (tests/python/test_support.py): out and dq, dk, dv within 1e-10 relative.
4. At recall 1.0 every causal pair is kept: fp64 equals dense causal attention within 1e-10; bf16
   inputs within rel L2 1e-2 (out) and 2e-2 (gradients) of the fp64 dense result.

    op_cpu_test.py --oracle BUILD/tests/python/vs_oracle_tool --workdir DIR
"""
import argparse
import math
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_support import Checks, dense_attention_f64, import_torch, kept_pair_mask, rel, structured_qkv, test_seed  # noqa: E402

torch = import_torch()
import numpy as np  # noqa: E402

from sparsering import estimate, steps, vs_sparse_attention  # noqa: E402
from sparsering.index import build_index  # noqa: E402
from sparsering.kept_sets import KeptSets  # noqa: E402
from sparsering.layout import TokenLayout  # noqa: E402
from sparsering.select import select_recall  # noqa: E402

CASES = [  # batch, q_heads, kv_heads, dim, n, layout, ranks, granularity, block_q, block_k, last_q, recall
    (1, 4, 2, 64, 700, "contiguous", 1, 0, 64, 64, 64, 0.9),
    (2, 2, 1, 32, 520, "contiguous", 1, 0, 128, 64, 40, 0.95),
    (1, 2, 2, 32, 512, "zigzag", 2, 0, 64, 64, 64, 0.9),
    (1, 4, 1, 32, 1024, "striped", 4, 16, 64, 128, 64, 0.9),
    (1, 2, 1, 64, 768, "striped", 2, 64, 64, 64, 32, 0.8),
    (1, 2, 2, 16, 384, "contiguous", 3, 0, 64, 64, 64, 0.9),
]


def bf16_bits(t):
    return (t.to(torch.bfloat16).contiguous().view(torch.int16).numpy().astype(np.uint16))


def run_oracle(tool, workdir, case, tensors, scale, capacity):
    b, hq, hkv, d, n, kind, w, g, bq, bk, last_q, recall = case
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    meta = dict(batch=b, q_heads=hq, kv_heads=hkv, head_dim=d, seq_len=n, layout=kind, ranks=w, granularity=g,
                block_q=bq, block_k=bk, last_q=last_q, recall=repr(recall), capacity=capacity, scale=repr(scale))
    with open(os.path.join(workdir, "meta.txt"), "w") as f:
        f.write("".join(f"{key} {value}\n" for key, value in meta.items()))
    for name, t in zip(("q", "k", "v", "dout"), tensors):
        bf16_bits(t).tofile(os.path.join(workdir, f"{name}.bin"))
    subprocess.run([tool, workdir], check=True)
    read = lambda name: torch.from_numpy(np.fromfile(os.path.join(workdir, name), dtype=np.float32))  # noqa: E731
    kept = []
    with open(os.path.join(workdir, "kept.txt")) as f:
        for line in f:
            values = [int(x) for x in line.split()]
            nv = values[0]
            kept.append((values[1:1 + nv], values[2 + nv:]))
    index = {}
    with open(os.path.join(workdir, "index.txt")) as f:
        step = None
        for line in f:
            parts = line.split()
            if parts[0] == "step":
                step = (int(parts[1]), int(parts[2]))
                index[step] = {}
            else:
                index[step][parts[0]] = [int(x) for x in parts[1:]]
    rows = b * hq
    return {"vertical": read("vertical_mass.f32").view(rows, n), "slash": read("slash_mass.f32").view(rows, n),
            "kept": kept, "index": index, "out": read("out.f32").view(w, b, hq, n // w, d),
            "lse": read("lse.f32").view(w, b, hq, n // w), "dq": read("dq.f32").view(w, b, hq, n // w, d),
            "dk": read("dk.f32").view(w, b, hkv, n // w, d), "dv": read("dv.f32").view(w, b, hkv, n // w, d)}


def kept_from_lists(lists, n, capacity):
    rows = len(lists)
    vc = torch.tensor([len(v) for v, _ in lists], dtype=torch.int32)
    sc = torch.tensor([len(s) for _, s in lists], dtype=torch.int32)
    vk = torch.full((rows, capacity), -1, dtype=torch.int32)
    so = torch.full((rows, capacity), -1, dtype=torch.int32)
    for r, (v, s) in enumerate(lists):
        vk[r, :len(v)] = torch.tensor(v, dtype=torch.int32)
        so[r, :len(s)] = torch.tensor(s, dtype=torch.int32)
    return KeptSets(vc, vk, sc, so, n)


def sharded_masses(q, k, layout, last_q, scale):
    """Both estimation passes per shard of the layout, combined as the ring layer does."""
    n = layout.seq_len_tokens
    q_last = q[:, :, n - last_q:]
    stats = None
    for r in range(layout.ranks):
        pos = layout.global_positions(r)
        part = estimate.row_statistics(q_last, k[:, :, pos], pos, n, scale)
        stats = part if stats is None else estimate.combine_statistics(*stats, *part)
    stats = estimate.round_statistics(*stats)
    b, hq = q.shape[:2]
    vertical = torch.zeros(b, hq, n, dtype=torch.float64)
    slash = torch.zeros(b, hq, n, dtype=torch.float32)
    for r in range(layout.ranks):
        pos = layout.global_positions(r)
        vloc, sl = estimate.pattern_masses(q_last, k[:, :, pos], pos, n, scale, *stats)
        vertical[:, :, pos] = vloc
        slash = (slash.double() + sl).float()
    return vertical.float().view(b * hq, n), slash.view(b * hq, n)


def oracle_case(args, checks, case, gen, number):
    b, hq, hkv, d, n, kind, w, g, bq, bk, last_q, recall = case
    print(f"case {number}: B={b} H={hq}/{hkv} D={d} N={n} {kind} W={w} G={g} blocks {bq}x{bk} last_q={last_q} "
          f"recall={recall}", flush=True)
    capacity = n
    q, k, v, dout = structured_qkv(torch, gen, b, hq, hkv, n, d, torch.float64)
    scale = float(torch.tensor(1.0 / math.sqrt(d), dtype=torch.float32))
    oracle = run_oracle(args.oracle, os.path.join(args.workdir, f"case{number}"), case, (q, k, v, dout), scale,
                        capacity)
    layout = TokenLayout(kind, n, w, g)
    vertical, slash = sharded_masses(q, k, layout, last_q, scale)
    checks.bound(f"case {number} vertical mass rel", rel(torch, vertical, oracle["vertical"]), 1e-6)
    checks.bound(f"case {number} slash mass rel", rel(torch, slash, oracle["slash"]), 1e-6)
    oracle_kept = kept_from_lists(oracle["kept"], n, capacity)
    mine = steps.select_kept(oracle["vertical"], oracle["slash"], n, recall, capacity, capacity)
    checks.true(f"case {number} selection on the oracle's masses equals the oracle's kept sets",
                mine.row_lists() == oracle["kept"])
    ours = steps.select_kept(vertical, slash, n, recall, capacity, capacity)
    checks.true(f"case {number} kept sets end to end equal", ours.row_lists() == oracle["kept"])
    density = np.mean([(len(vv) + len(ss)) / (2 * n) for vv, ss in oracle["kept"]])
    print(f"  kept share of entries {density:.3f}")
    same_index = True
    out = torch.zeros(w, b, hq, n // w, d, dtype=torch.float64)
    lse = torch.full((w, b, hq, n // w), -math.inf, dtype=torch.float64)
    dq = torch.zeros_like(out)
    dk = torch.zeros(w, b, hkv, n // w, d, dtype=torch.float64)
    dv = torch.zeros_like(dk)
    local = lambda t, r: t[:, :, layout.global_positions(r)].contiguous()  # noqa: E731
    indexes = {}
    for qr in range(w):
        for kr in range(w):
            ix = build_index(oracle_kept, layout, qr, kr, bq, bk)
            indexes[qr, kr] = ix
            expect = oracle["index"][qr, kr]
            got = {"tile_offsets": ix.tile_offsets, "tile_block": ix.tile_block[:ix.tiles()],
                   "tile_masked": ix.tile_masked[:ix.tiles()], "column_offsets": ix.column_offsets,
                   "column_index": ix.column_index[:ix.columns()]}
            for name, values in got.items():
                if values.tolist() != expect[name]:
                    same_index = False
                    print(f"  step ({qr}, {kr}) {name} differs", flush=True)
            steps.forward(local(q, qr), local(k, kr), local(v, kr), ix, layout, qr, kr, scale, out[qr], lse[qr])
    checks.true(f"case {number} index arrays of all {w * w} steps equal", same_index)
    for qr in range(w):
        delta = steps.backward_delta(local(dout, qr), out[qr])
        for kr in range(w):
            steps.backward(local(q, qr), local(k, kr), local(v, kr), local(dout, qr), lse[qr], delta, indexes[qr, kr],
                           layout, qr, kr, scale, dq[qr], dk[kr], dv[kr])
    for name, value in (("out", out), ("lse", lse), ("dq", dq), ("dk", dk), ("dv", dv)):
        checks.bound(f"case {number} {name} rel L2 vs oracle", rel(torch, value, oracle[name]), 1e-5)
    if w == 1:
        qa, ka, va = (t.clone().requires_grad_(True) for t in (q, k, v))
        o = vs_sparse_attention(qa, ka, va, recall=recall, block_q=bq, block_k=bk, last_q=last_q, capacity=capacity,
                                softmax_scale=scale)
        o.backward(dout)
        for name, value, ref in (("out", o, oracle["out"][0]), ("dq", qa.grad, oracle["dq"][0]),
                                 ("dk", ka.grad, oracle["dk"][0]), ("dv", va.grad, oracle["dv"][0])):
            checks.bound(f"case {number} vs_sparse_attention {name} rel L2 vs oracle", rel(torch, value, ref), 1e-5)


def brute_force_checks(checks, gen):
    n, d, bq, bk, recall = 1024, 32, 64, 64, 0.7
    print(f"brute force: N={n} H=4/2 D={d} recall {recall}", flush=True)
    q, k, v, dout = structured_qkv(torch, gen, 1, 4, 2, n, d, torch.float64, contrast=14.0)
    scale = 1.0 / math.sqrt(d)
    kept = steps.estimate_single_rank(q, k, 64, recall, n, scale)
    mask = kept_pair_mask(torch, kept.row_lists(), n, bq, bk)
    causal = n * (n + 1) / 2
    print(f"  kept pairs per row: {mask.sum().item() / mask.shape[0] / causal:.3f} of causal")
    checks.true("brute force mask is sparse", mask.sum().item() < 0.9 * causal * mask.shape[0])
    qa, ka, va = (t.clone().requires_grad_(True) for t in (q, k, v))
    out = vs_sparse_attention(qa, ka, va, recall=recall, block_q=bq, block_k=bk, capacity=n)
    out.backward(dout)
    qb, kb, vb = (t.clone().requires_grad_(True) for t in (q, k, v))
    ref = dense_attention_f64(torch, qb, kb, vb, mask, scale)
    ref.backward(dout)
    for name, a, r in (("out", out, ref), ("dq", qa.grad, qb.grad), ("dk", ka.grad, kb.grad), ("dv", va.grad, vb.grad)):
        checks.bound(f"brute force {name} rel L2", rel(torch, a, r), 1e-10)


def dense_checks(checks, gen):
    n, d = 333, 64
    print(f"recall 1.0 vs dense causal: N={n} H=4/1 D={d}", flush=True)
    q, k, v, dout = (torch.randn(shape, generator=gen, dtype=torch.float64).to(torch.bfloat16).double()
                     for shape in ((2, 4, n, d), (2, 1, n, d), (2, 1, n, d), (2, 4, n, d)))
    kept = steps.estimate_single_rank(q, k, 64, 1.0, n, 1.0 / math.sqrt(d))
    mask = kept_pair_mask(torch, kept.row_lists(), n, 64, 64)
    checks.true("recall 1.0 keeps every causal pair", bool(mask.sum() == mask.shape[0] * n * (n + 1) // 2))
    causal = torch.ones(n, n, dtype=torch.bool).tril().expand(8, n, n)
    results = {}
    for dtype in (torch.float64, torch.bfloat16):
        qa, ka, va = (t.detach().to(dtype).clone().requires_grad_(True) for t in (q, k, v))
        out = vs_sparse_attention(qa, ka, va, recall=1.0)
        out.backward(dout.to(dtype))
        results[dtype] = (out, qa.grad, ka.grad, va.grad)
    qb, kb, vb = (t.clone().requires_grad_(True) for t in (q, k, v))
    ref = dense_attention_f64(torch, qb, kb, vb, causal, 1.0 / math.sqrt(d))
    ref.backward(dout)
    refs = (ref, qb.grad, kb.grad, vb.grad)
    for i, name in enumerate(("out", "dq", "dk", "dv")):
        checks.bound(f"dense fp64 {name} rel L2", rel(torch, results[torch.float64][i], refs[i]), 1e-10)
        checks.bound(f"dense bf16 {name} rel L2", rel(torch, results[torch.bfloat16][i], refs[i]),
                     1e-2 if name == "out" else 2e-2)
        checks.true(f"dense bf16 {name} dtype", results[torch.bfloat16][i].dtype == torch.bfloat16)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--oracle", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    torch.set_num_threads(2)
    seed = test_seed("op_cpu_test")
    gen = torch.Generator().manual_seed(seed)
    checks = Checks("op_cpu_test")
    for number, case in enumerate(CASES):
        oracle_case(args, checks, case, gen, number)
    brute_force_checks(checks, gen)
    dense_checks(checks, gen)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
