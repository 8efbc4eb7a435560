#!/usr/bin/env python3
"""Benchmark on one GPU (run by python/run_on_device.sh): at one length (default 128K tokens,
Qwen2.5-3B heads: 16 query / 2 K/V heads, head dim 128, bf16) on inputs with a vertical-slash
structure, times forward + backward of
  - vs_sparse_attention (the package's op: estimation, selection, index build, kernels, autograd),
  - the same kernels through the C API directly (sr_estimate_select, sr_build_index,
    sr_sparse_attn_fwd, sr_attn_bwd_delta, sr_sparse_attn_bwd; no autograd),
  - SDPA flash (dense causal),
with CUDA events (median of repeats after warm-up). Writes JSON and prints a table.

    python3 python/bench_vs_attention.py --out bench.json [--seq-len 131072] [--recall 0.95]
"""
import argparse
import json
import math
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import sparsering  # noqa: E402
from sparsering.capi import RingPosition  # noqa: E402
from test_support import structured_qkv  # noqa: E402


def time_ms(fn, warmup=2, repeats=5):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def rotary_qkv(gen, heads, kv_heads, n, dim, window_tokens, sink_logit=12.0, peak_logit=24.0):
    """q, k, v, dout (1, H, N, D) bf16 on the GPU with the structure of real long-context heads:
    rotary position encodings over a band of frequencies make q_i . k_j a function of i - j that
    peaks on the diagonal and decays over about `window_tokens` (the slashes of a local window),
    and one attention sink at key 0 (a vertical), over small random content. `peak_logit` is the
    scaled logit on the diagonal, `sink_logit` the sink's."""
    half = dim // 2
    # Frequencies from 1/window down to 1/(64 window): coherent inside the window, decorrelated
    # beyond it (the sum of cosines of unrelated phases).
    omega = (1.0 / window_tokens) * torch.logspace(0, -math.log10(64.0), half, dtype=torch.float64)
    positions = torch.arange(n, dtype=torch.float64, device="cuda")[:, None] * omega.cuda()[None, :]
    rot = torch.cat([positions.cos(), positions.sin()], dim=-1)           # (N, D): rot_i . rot_j = sum cos(w (i - j))
    scale = 1.0 / math.sqrt(dim)
    amp = math.sqrt(peak_logit / (half * scale))                          # amp^2 * half * scale = peak logit
    sink = torch.randn(dim, generator=gen, dtype=torch.float64).cuda()
    sink = sink / sink.norm()
    sink_amp = math.sqrt(sink_logit / scale)
    g = torch.Generator(device="cuda").manual_seed(int(torch.randint(0, 2**31, (1,), generator=gen)))
    q = amp * rot[None, None] + 0.1 * torch.randn(1, heads, n, dim, generator=g, device="cuda", dtype=torch.float64)
    q = q + sink_amp * sink
    k = amp * rot[None, None].expand(1, kv_heads, n, dim).clone()
    k = k + 0.1 * torch.randn(1, kv_heads, n, dim, generator=g, device="cuda", dtype=torch.float64)
    k[:, :, 0] += sink_amp * sink
    v = torch.randn(1, kv_heads, n, dim, generator=g, device="cuda", dtype=torch.float64)
    dout = torch.randn(1, heads, n, dim, generator=g, device="cuda", dtype=torch.float64)
    return [t.to(torch.bfloat16) for t in (q, k, v, dout)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--seq-len", type=int, default=131072)
    p.add_argument("--recall", type=float, default=0.95)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--inputs", choices=("rotary", "structured"), default="rotary",
                   help="rotary: local-window slashes and a sink from rotary encodings (window --window-tokens); "
                        "structured: the test inputs (three offsets, three verticals)")
    p.add_argument("--window-tokens", type=float, default=2048.0)
    args = p.parse_args()
    n, heads, kv_heads, dim = args.seq_len, 16, 2, 128
    gen = torch.Generator().manual_seed(0)
    if args.inputs == "rotary":
        q, k, v, dout = rotary_qkv(gen, heads, kv_heads, n, dim, args.window_tokens)
    else:
        q, k, v, dout = (t.to(torch.bfloat16).cuda() for t in structured_qkv(torch, gen, 1, heads, kv_heads, n, dim,
                                                                             torch.float32))
    lib = sparsering.load_kernels()
    scale = 1.0 / math.sqrt(dim)
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "seq_len": n, "heads": heads,
              "inputs": args.inputs, "window_tokens": args.window_tokens if args.inputs == "rotary" else None,
              "kv_heads": kv_heads, "head_dim": dim, "recall": args.recall, "library": lib.version()}

    qa, ka, va = (t.clone().requires_grad_(True) for t in (q, k, v))

    def op_fwd():
        with torch.no_grad():
            return sparsering.vs_sparse_attention(qa, ka, va, recall=args.recall)

    def op_fwd_bwd():
        out = sparsering.vs_sparse_attention(qa, ka, va, recall=args.recall)
        torch.autograd.grad(out, (qa, ka, va), dout)

    result["op_fwd_ms"] = time_ms(op_fwd, repeats=args.repeats)
    result["op_fwd_bwd_ms"] = time_ms(op_fwd_bwd, repeats=args.repeats)

    def capi_fwd():
        kept = lib.estimate_select(q[:, :, n - 64:].contiguous(), k, args.recall, 4096, scale)
        index = lib.build_index(kept, RingPosition(seq_len_tokens=n), 64, 64)
        out = torch.zeros(q.shape, dtype=torch.float32, device="cuda")
        lse = torch.full(q.shape[:3], -math.inf, device="cuda")
        lib.sparse_attn_fwd(q, k, v, index, out, lse, None, scale)
        return index, out, lse

    def capi_fwd_bwd():
        index, out, lse = capi_fwd()
        delta = torch.empty(q.shape[:3], device="cuda")
        lib.attn_bwd_delta(dout, out, delta)
        dq = torch.zeros(q.shape, dtype=torch.float32, device="cuda")
        dk = torch.zeros(k.shape, dtype=torch.float32, device="cuda")
        dv = torch.zeros_like(dk)
        lib.sparse_attn_bwd(q, k, v, dout, lse, delta, index, dq, dk, dv, None, scale)
        return out, index

    result["capi_fwd_ms"] = time_ms(capi_fwd, repeats=args.repeats)
    result["capi_fwd_bwd_ms"] = time_ms(capi_fwd_bwd, repeats=args.repeats)
    out, index = capi_fwd_bwd()
    result["tiles"], result["columns"] = index.tiles(), index.columns()
    result["density_of_causal"] = index.tiles() * 64 * 64 / (heads * n * n / 2)
    with torch.no_grad():
        mine = op_fwd()
    result["op_vs_capi_out_rel"] = float((mine.float() - out).norm() / out.norm())

    from torch.nn.attention import SDPBackend, sdpa_kernel
    g = heads // kv_heads
    qs, ks, vs = (t.clone().requires_grad_(True) for t in (q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)))

    def sdpa_fwd():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION), torch.no_grad():
            return torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, is_causal=True)

    def sdpa_fwd_bwd():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            o = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, is_causal=True)
        torch.autograd.grad(o, (qs, ks, vs), dout)

    result["sdpa_flash_fwd_ms"] = time_ms(sdpa_fwd, repeats=args.repeats)
    result["sdpa_flash_fwd_bwd_ms"] = time_ms(sdpa_fwd_bwd, repeats=args.repeats)
    result["op_overhead_fwd_bwd"] = result["op_fwd_bwd_ms"] / result["capi_fwd_bwd_ms"] - 1
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"{n} tokens, H {heads}/{kv_heads}, D {dim}, recall {args.recall}, inputs {args.inputs}: tile density "
          f"{result['density_of_causal']:.3f} of causal, op vs C API out rel {result['op_vs_capi_out_rel']:.1e}")
    print(f"{'path':28} {'fwd ms':>9} {'fwd+bwd ms':>11}")
    for name, key in (("vs_sparse_attention", "op"), ("C API directly", "capi"), ("SDPA flash (dense)", "sdpa_flash")):
        print(f"{name:28} {result[key + '_fwd_ms']:9.2f} {result[key + '_fwd_bwd_ms']:11.2f}")
    result["speedup_vs_sdpa_flash_fwd"] = result["sdpa_flash_fwd_ms"] / result["op_fwd_ms"]
    result["speedup_vs_sdpa_flash_fwd_bwd"] = result["sdpa_flash_fwd_bwd_ms"] / result["op_fwd_bwd_ms"]
    print(f"vs_sparse_attention vs SDPA flash: {result['speedup_vs_sdpa_flash_fwd']:.2f}x forward, "
          f"{result['speedup_vs_sdpa_flash_fwd_bwd']:.2f}x forward+backward")
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
