#!/usr/bin/python3
"""GPU tests of the sparsering package (run by python/run_on_device.sh; exit 77 without CUDA or
the kernels library). On fresh structured inputs, bf16, head dim 64 and 128, GQA, lengths not
multiples of the blocks:
1. the CUDA path against the CPU oracle path: the GPU's index (sr_build_index, copied to tensors)
   equals the CPU builder's array for array on the GPU's kept sets; the GPU's kept sets agree with
   the CPU estimation (fp32 vs fp64 masses: at least 99% of the kept entries shared); out / dq / dk
   / dv against the fp64 CPU steps over the GPU's kept sets: rel L2 <= 5e-3 (out), 1e-2 (grads);
2. recall 1.0 against SDPA (flash, dense causal): rel L2 <= 1e-2 (out), 2e-2 (grads);
3. torch.compile of a function calling vs_sparse_attention (custom op) equals eager (rel 1e-2)
   where torch has torch.library.custom_op;
4. CUDA tensors of the wrong dtype raise ValueError;
5. estimate_select into reused outputs (filled with garbage) equals a fresh call element for
   element, -1 past each row's count included.
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_support import SKIP, Checks, import_torch, rel, structured_qkv, test_seed  # noqa: E402

torch = import_torch()
if not torch.cuda.is_available():
    print("SKIPPED: no CUDA device")
    sys.exit(SKIP)
import sparsering  # noqa: E402
from sparsering import steps  # noqa: E402
from sparsering.index import build_index  # noqa: E402
from sparsering.layout import single_rank  # noqa: E402
from sparsering.vs_attention import HAS_CUSTOM_OP  # noqa: E402

try:
    sparsering.load_kernels()
except sparsering.KernelsLibraryMissing as error:
    print(f"SKIPPED: {error}")
    sys.exit(SKIP)


def cpu_vs_gpu(checks, gen, n, heads, kv_heads, dim, block_q, recall):
    what = f"N={n} H={heads}/{kv_heads} D={dim} block_q={block_q} recall={recall}"
    print(what, flush=True)
    q, k, v, dout = structured_qkv(torch, gen, 1, heads, kv_heads, n, dim, torch.float64)
    scale = float(torch.tensor(1.0 / math.sqrt(dim), dtype=torch.float32))
    qg, kg, vg = (t.to(torch.bfloat16).cuda().requires_grad_(True) for t in (q, k, v))
    kept_gpu = steps.estimate_single_rank(qg.detach(), kg.detach(), 64, recall, 4096, scale)
    kept_cpu = steps.estimate_single_rank(q, k, 64, recall, 4096, scale)
    shared = total = 0
    for (gv, gs), (cv, cs) in zip(kept_gpu.to("cpu").row_lists(), kept_cpu.row_lists()):
        shared += len(set(gv) & set(cv)) + len(set(gs) & set(cs))
        total += max(len(gv), len(cv)) + max(len(gs), len(cs))
    checks.bound(f"{what}: kept entries not shared by GPU and CPU estimation", 1 - shared / max(total, 1), 1e-2)
    layout = single_rank(n)
    gpu_index = steps.build_step_index(kept_gpu, layout, 0, 0, block_q, 64, torch.device("cuda"))
    cpu_index = build_index(kept_gpu.to("cpu"), layout, 0, 0, block_q, 64)
    same = all(torch.equal(a.cpu()[:m], b[:m]) for a, b, m in zip(
        gpu_index.tensors(), cpu_index.tensors(),
        (len(cpu_index.tile_offsets), cpu_index.tiles(), cpu_index.tiles(), len(cpu_index.column_offsets),
         cpu_index.columns())))
    checks.true(f"{what}: GPU index equals the CPU builder's", same)
    out = sparsering.vs_sparse_attention(qg, kg, vg, recall=recall, block_q=block_q, capacity=4096)
    out.backward(dout.to(torch.bfloat16).cuda())
    # fp64 CPU steps over the kept sets the GPU selected
    o = torch.zeros(q.shape, dtype=torch.float64)
    lse = torch.full(q.shape[:3], -math.inf, dtype=torch.float64)
    steps.forward(q, k, v, cpu_index, layout, 0, 0, scale, o, lse)
    delta = steps.backward_delta(dout, o)
    dq, dk, dv = torch.zeros_like(o), torch.zeros_like(k), torch.zeros_like(v)
    steps.backward(q, k, v, dout, lse, delta, cpu_index, layout, 0, 0, scale, dq, dk, dv)
    for name, a, b, bound in (("out", out, o, 5e-3), ("dq", qg.grad, dq, 1e-2), ("dk", kg.grad, dk, 1e-2),
                              ("dv", vg.grad, dv, 1e-2)):
        checks.bound(f"{what}: {name} vs CPU oracle path", rel(torch, a.cpu(), b), bound)


def against_sdpa(checks, gen, n, heads, kv_heads, dim):
    what = f"recall 1.0 vs SDPA flash N={n} H={heads}/{kv_heads} D={dim}"
    print(what, flush=True)
    q, k, v, dout = (torch.randn(s, generator=gen).to(torch.bfloat16).cuda()
                     for s in ((1, heads, n, dim), (1, kv_heads, n, dim), (1, kv_heads, n, dim), (1, heads, n, dim)))
    qa, ka, va = (t.clone().requires_grad_(True) for t in (q, k, v))
    out = sparsering.vs_sparse_attention(qa, ka, va, recall=1.0)
    out.backward(dout)
    qb, kb, vb = (t.clone().requires_grad_(True) for t in (q, k, v))
    g = heads // kv_heads
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        ref = torch.nn.functional.scaled_dot_product_attention(qb, kb.repeat_interleave(g, 1),
                                                               vb.repeat_interleave(g, 1), is_causal=True)
    ref.backward(dout)
    for name, a, b, bound in (("out", out, ref, 1e-2), ("dq", qa.grad, qb.grad, 2e-2), ("dk", ka.grad, kb.grad, 2e-2),
                              ("dv", va.grad, vb.grad, 2e-2)):
        checks.bound(f"{what}: {name}", rel(torch, a, b), bound)


def compiled(checks, gen):
    if not HAS_CUSTOM_OP:
        print("torch.compile check skipped: no torch.library.custom_op in this torch")
        return
    n, heads, kv_heads, dim = 4096, 8, 2, 128
    q, k, v, dout = (t.cuda().to(torch.bfloat16) for t in structured_qkv(torch, gen, 1, heads, kv_heads, n, dim,
                                                                          torch.float32))

    def layer(q, k, v):
        return sparsering.vs_sparse_attention(q * 1.0, k, v, recall=0.9) * 2.0

    results = []
    for fn in (layer, torch.compile(layer, fullgraph=True)):
        qa, ka, va = (t.clone().requires_grad_(True) for t in (q, k, v))
        out = fn(qa, ka, va)
        out.backward(dout)
        results.append((out, qa.grad, ka.grad, va.grad))
    for i, name in enumerate(("out", "dq", "dk", "dv")):
        checks.bound(f"torch.compile(fullgraph) {name} vs eager", rel(torch, results[1][i], results[0][i]), 1e-2)


def estimate_into_reused_outputs(checks, gen):
    q, k, _, _ = structured_qkv(torch, gen, 1, 4, 2, 3000, 128, torch.float64)
    q_last = q[:, :, -64:].to(torch.bfloat16).cuda().contiguous()
    kg = k.to(torch.bfloat16).cuda()
    lib = sparsering.load_kernels()
    fresh = lib.estimate_select(q_last, kg, 0.9, 512)
    reused = tuple(torch.full_like(t, 12345) for t in fresh)
    got = lib.estimate_select(q_last, kg, 0.9, 512, out=reused)
    checks.true("estimate_select returns the out tensors", all(a is b for a, b in zip(got, reused)))
    checks.true("estimate_select into reused outputs equals a fresh call",
                all(torch.equal(a, b) for a, b in zip(fresh, reused)))
    counts, keys = fresh[0].cpu(), fresh[1].cpu()
    padded = all(bool((keys[r, int(counts[r]):] == -1).all()) for r in range(keys.shape[0]))
    checks.true("estimate_select pads with -1 past each row's count", padded)


def main():
    seed = test_seed("gpu_test")
    gen = torch.Generator().manual_seed(seed)
    checks = Checks("gpu_test")
    cpu_vs_gpu(checks, gen, 2000, 4, 2, 128, 64, 0.9)
    cpu_vs_gpu(checks, gen, 1536, 8, 1, 64, 128, 0.95)
    cpu_vs_gpu(checks, gen, 777, 2, 2, 128, 64, 0.8)
    against_sdpa(checks, gen, 4096, 8, 2, 128)
    against_sdpa(checks, gen, 3000, 4, 4, 64)
    estimate_into_reused_outputs(checks, gen)
    try:
        compiled(checks, gen)
    except Exception as error:  # pylint: disable=broad-except
        checks.true("torch.compile", False, repr(error)[:400])
    try:
        x = torch.zeros(1, 2, 128, 64, device="cuda")
        sparsering.vs_sparse_attention(x, x, x)
        checks.true("fp32 CUDA rejected", False, "accepted")
    except ValueError as error:
        checks.true(f"fp32 CUDA rejected: {error}", True)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
