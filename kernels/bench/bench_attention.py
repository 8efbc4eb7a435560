"""GPU benchmark of the sparse attention kernels against torch SDPA (flash, cuDNN; dense causal)
and FlexAttention (compiled, same pairs), on the same bf16 tensors, in one process.

For each configuration (sequence length, pattern), it builds Q/K/V (B=1, Qwen2.5-3B-like 16 query
heads / 2 KV heads, head dim 128), the sparse index (kernels/bench/patterns.py), checks our
forward and backward against FlexAttention on the same mask, then times with CUDA events
(warm-up, median of repeats): our fwd, our bwd (delta + transposed index + both passes), SDPA
flash / cuDNN fwd and bwd, FlexAttention fwd and bwd. TFLOP/s count 4*D per computed (q, k)
slot: whole tiles and gathered chunks for ours, whole 128x128 blocks for FlexAttention, S^2/2 for
dense causal; the backward counts 2.5x the forward (docs/PERF.md states this convention).
Writes JSON (every number) and prints a short table.

  python3 kernels/bench/bench_attention.py --lib build/kernels/cuda/libsparsering_kernels.so \
      --out bench.json --sizes 32768,131072 --time-budget-s 240
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from patterns import pattern_index, qwen_like_pattern, random_block_index  # noqa: E402
from sparsering.capi import DeviceIndex, RingPosition, SparseringKernels  # noqa: E402
from torch_peers import FlexPeer, sdpa_causal  # noqa: E402

HEADS, KV_HEADS, DIM, BLOCK = 16, 2, 128, 128


def time_ms(fn, warmup: int, repeats: int) -> dict:
    """Median / min / max milliseconds of fn() over `repeats` timed runs after `warmup` runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times), "repeats": repeats}


def rel_error(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().float(), b.detach().float()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


class Config:
    def __init__(self, name: str, n: int, index, density_note: str, patterns=None):
        self.name, self.n, self.index, self.note, self.patterns = name, n, index, density_note, patterns


def make_configs(args, rng) -> list:
    configs = []
    for n in args.sizes:
        for recall in args.recalls:
            if recall != args.recalls[0] and n != args.recall_size:
                continue
            patterns = [qwen_like_pattern(rng, n, recall) for _ in range(HEADS)]
            configs.append(Config(f"qwen-vs recall {recall:.2f}", n, pattern_index(patterns, n, BLOCK), f"recall {recall}",
                                  patterns))
    for density in args.densities:
        n = args.recall_size
        configs.append(Config(f"random blocks {density:.2f}", n, random_block_index(rng, HEADS, n, BLOCK, density),
                              f"density {density}"))
    if args.dense_check:
        n = args.sizes[0]
        diag = [np.ones(n // BLOCK, dtype=bool) for _ in range(HEADS)]
        from patterns import index_from_diagonals
        configs.insert(0, Config("all tiles (dense causal)", n,
                                 index_from_diagonals(diag, [np.zeros(0, np.int64)] * HEADS, n, BLOCK), "dense"))
    return configs


def run_config(lib, cfg: Config, args, results: list, dense_cache: dict) -> None:
    n = cfg.n
    torch.manual_seed(n)
    dev = "cuda"
    q = torch.randn(1, HEADS, n, DIM, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, KV_HEADS, n, DIM, device=dev, dtype=torch.bfloat16)
    v = torch.randn(1, KV_HEADS, n, DIM, device=dev, dtype=torch.bfloat16)
    dout = torch.randn(1, HEADS, n, DIM, device=dev, dtype=torch.bfloat16)
    h = cfg.index
    index = DeviceIndex.from_numpy(BLOCK, BLOCK, h.q_blocks, h.tile_offsets, h.tile_block, h.tile_masked,
                                   h.column_offsets, h.column_index)
    pairs = h.computed_pairs()
    causal_pairs = HEADS * n * (n + 1) / 2
    row = {"config": cfg.name, "seq_len": n, "heads": HEADS, "kv_heads": KV_HEADS, "head_dim": DIM, "block": BLOCK,
           "tiles": int(h.tile_block.size), "columns": int(h.column_index.size), "computed_pairs": pairs,
           "density_of_causal": pairs / causal_pairs}
    fwd_flop = 4.0 * DIM * pairs

    out = torch.zeros(1, HEADS, n, DIM, device=dev, dtype=torch.float32)
    lse = torch.full((1, HEADS, n), -math.inf, device=dev, dtype=torch.float32)
    lib.sparse_attn_fwd(q, k, v, index, out, lse)
    delta = torch.empty(1, HEADS, n, device=dev, dtype=torch.float32)
    dq = torch.zeros(1, HEADS, n, DIM, device=dev, dtype=torch.float32)
    dk = torch.zeros(1, KV_HEADS, n, DIM, device=dev, dtype=torch.float32)
    dv = torch.zeros_like(dk)
    lib.attn_bwd_delta(dout, out, delta)
    lib.sparse_attn_bwd(q, k, v, dout, lse, delta, index, dq, dk, dv)
    torch.cuda.synchronize()

    flex = None
    if args.flex:
        try:
            t0 = time.time()
            flex = FlexPeer(h, HEADS, n)
            qf, kf, vf = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
            ref = flex(qf, kf, vf)
            ref.backward(dout)
            torch.cuda.synchronize()
            row["flex_setup_s"] = time.time() - t0
            row["check_vs_flex"] = {"out_rel": rel_error(out, ref), "dq_rel": rel_error(dq, qf.grad),
                                    "dk_rel": rel_error(dk, kf.grad), "dv_rel": rel_error(dv, vf.grad)}
            row["flex_computed_pairs"] = flex.computed_blocks * BLOCK * BLOCK
            del ref, qf, kf, vf
        except Exception as error:  # the peer failing must not lose our numbers
            row["flex_error"] = repr(error)[:300]
            flex = None

    w, r = args.warmup, args.repeats
    row["ours_fwd"] = time_ms(lambda: lib.sparse_attn_fwd(q, k, v, index, out, lse), w, r)

    def ours_bwd():
        lib.attn_bwd_delta(dout, out, delta)
        lib.sparse_attn_bwd(q, k, v, dout, lse, delta, index, dq, dk, dv)
    row["ours_bwd"] = time_ms(ours_bwd, w, r)
    row["ours_fwd"]["tflops"] = fwd_flop / row["ours_fwd"]["median_ms"] / 1e9
    # The other kernels on the same tensors (the library reads SPARSERING_FORWARD_KERNEL and
    # SPARSERING_BACKWARD_KERNEL at every launch; "automatic" above is what a user gets).
    def ours_fwd():
        lib.sparse_attn_fwd(q, k, v, index, out, lse)
    for direction, variable, kernels, launch, flop in (
            ("fwd", "SPARSERING_FORWARD_KERNEL", args.forward_kernels, ours_fwd, fwd_flop),
            ("bwd", "SPARSERING_BACKWARD_KERNEL", args.backward_kernels, ours_bwd, 2.5 * fwd_flop)):
        for kernel in kernels:
            previous = os.environ.get(variable)
            os.environ[variable] = kernel
            try:
                timing = time_ms(launch, w, r)
                timing["tflops"] = flop / timing["median_ms"] / 1e9
                row[f"ours_{direction}_{kernel}"] = timing
            except Exception as error:  # e.g. wgmma asked for on a GPU that cannot run it
                row[f"ours_{direction}_{kernel}_error"] = repr(error)[:300]
            finally:
                if previous is None:
                    os.environ.pop(variable, None)
                else:
                    os.environ[variable] = previous
    row["ours_bwd"]["tflops"] = 2.5 * fwd_flop / row["ours_bwd"]["median_ms"] / 1e9

    if flex is not None:
        try:
            qf, kf, vf = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
            with torch.no_grad():
                row["flex_fwd"] = time_ms(lambda: flex(qf, kf, vf), w, r)
            o = flex(qf, kf, vf)
            row["flex_bwd"] = time_ms(lambda: torch.autograd.grad(o, (qf, kf, vf), dout, retain_graph=True), w, r)
            flex_flop = 4.0 * DIM * row["flex_computed_pairs"]
            row["flex_fwd"]["tflops"] = flex_flop / row["flex_fwd"]["median_ms"] / 1e9
            row["flex_bwd"]["tflops"] = 2.5 * flex_flop / row["flex_bwd"]["median_ms"] / 1e9
            del o
        except Exception as error:
            row["flex_error"] = repr(error)[:300]
            row.pop("flex_fwd", None)

    if args.pipeline and cfg.patterns is not None:
        # Index preparation on the GPU. Estimation + selection cost does not depend on the data;
        # the build is timed on this configuration's kept sets (random Q/K would give a dense
        # pattern), and at the benchmark's block its index must equal the numpy one the timings
        # above used. Two builds through the C API: into an index allocated once (no host
        # synchronization, what a training step runs) and the exact-array entry point (one stream
        # synchronization and the index's allocation inside the time).
        q_last = q[:, :, -64:].contiguous()
        recall = float(cfg.note.split()[-1])
        # Into kept sets allocated once, as a training step runs it (the kernels write every element).
        kept_out = lib.estimate_select(q_last, k, recall, 4096)
        row["estimate_select"] = time_ms(lambda: lib.estimate_select(q_last, k, recall, 4096, out=kept_out), w, r)
        capacity = max(1, max(max(len(p.vertical_keys), len(p.slash_offsets)) for p in cfg.patterns))
        kept = [torch.zeros(HEADS, dtype=torch.int32), torch.full((HEADS, capacity), -1, dtype=torch.int32),
                torch.zeros(HEADS, dtype=torch.int32), torch.full((HEADS, capacity), -1, dtype=torch.int32)]
        for hh, p in enumerate(cfg.patterns):
            kept[0][hh], kept[2][hh] = len(p.vertical_keys), len(p.slash_offsets)
            kept[1][hh, : len(p.vertical_keys)] = torch.as_tensor(p.vertical_keys, dtype=torch.int32)
            kept[3][hh, : len(p.slash_offsets)] = torch.as_tensor(p.slash_offsets, dtype=torch.int32)
        kept = tuple(t.cuda() for t in kept)
        position = RingPosition(seq_len_tokens=n)

        def same_forward(built) -> bool:
            """Our forward over a GPU-built index equals the numpy-index output (the same pairs)."""
            out2 = torch.zeros_like(out)
            lse2 = torch.full_like(lse, -math.inf)
            lib.sparse_attn_fwd(q, k, v, built, out2, lse2)
            ref_out = torch.zeros_like(out)
            ref_lse = torch.full_like(lse, -math.inf)
            lib.sparse_attn_fwd(q, k, v, index, ref_out, ref_lse)
            return bool(torch.equal(out2, ref_out))

        builds = {}
        for block in args.prep_blocks:
            times = []
            same = None
            for rep in range(w + r):
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                built = lib.build_index(kept, position, block, block)
                stop.record()
                stop.synchronize()
                if rep >= w:
                    times.append(start.elapsed_time(stop))
                if rep == 0 and block == BLOCK:
                    same = built.tiles() == h.tile_block.size and built.columns() == h.column_index.size and \
                        same_forward(built)
                tiles, columns = built.tiles(), built.columns()
                del built
            into = lib.allocate_index(HEADS, capacity, position, block, block)
            into_time = time_ms(lambda: lib.build_index_into(kept, position, into), w, r)
            into.read_counts()
            same_into = into.tiles() == tiles and into.columns() == columns and \
                (block != BLOCK or same_forward(into))
            del into
            builds[block] = {"median_ms": into_time["median_ms"], "min_ms": into_time["min_ms"], "repeats": r,
                             "exact_arrays_median_ms": statistics.median(times), "tiles": tiles, "columns": columns,
                             "into_equals_exact": same_into}
            if same is not None:
                builds[block]["matches_numpy_index"] = same
        row["index_build_by_block"] = builds
        build = builds.get(BLOCK, next(iter(builds.values())))
        row["index_build"] = build
        fwd_ms = row["ours_fwd"]["median_ms"]
        row["estimate_build_fraction_of_fwd"] = (row["estimate_select"]["median_ms"] + build["median_ms"]) / fwd_ms
        row["estimate_build_exact_fraction_of_fwd"] = \
            (row["estimate_select"]["median_ms"] + build["exact_arrays_median_ms"]) / fwd_ms

    dense_flop = 4.0 * DIM * HEADS * n * n / 2
    for backend in args.dense:
        key = (backend, n)
        if key not in dense_cache:
            run = sdpa_causal(backend)
            qd, kd, vd = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
            try:
                reps = max(1, r // 2) if n >= 131072 else r
                fwd = time_ms(lambda: run(qd, kd, vd), 1, reps)
                o = run(qd, kd, vd)
                bwd = time_ms(lambda: torch.autograd.grad(o, (qd, kd, vd), dout, retain_graph=True), 1, reps)
                fwd["tflops"] = dense_flop / fwd["median_ms"] / 1e9
                bwd["tflops"] = 2.5 * dense_flop / bwd["median_ms"] / 1e9
                dense_cache[key] = {"fwd": fwd, "bwd": bwd}
                del o
            except RuntimeError as error:
                dense_cache[key] = {"error": str(error)[:200]}
        row[f"sdpa_{backend}"] = dense_cache[key]
    results.append(row)
    del q, k, v, dout, out, lse, delta, dq, dk, dv, index, flex
    torch.cuda.empty_cache()


def table(results: list) -> str:
    head = (f"{'config':28} {'N':>7} {'dens':>6} | {'ours fwd ms':>11} {'TF/s':>5} {'bwd ms':>8} {'TF/s':>5} | "
            f"{'flex fwd':>8} {'bwd':>8} {'x fwd':>5} {'x bwd':>5} | {'mma f/b ms':>13} | {'flash f/b ms':>14} {'x dense':>7} | {'err out/dq':>11}")
    lines = [head, "-" * len(head)]
    for row in results:
        of, ob = row["ours_fwd"], row["ours_bwd"]
        ff, fb = row.get("flex_fwd"), row.get("flex_bwd")
        fl = row.get("sdpa_flash", {})
        flash = f"{fl['fwd']['median_ms']:.1f}/{fl['bwd']['median_ms']:.1f}" if "fwd" in fl else "-"
        speedup = f"{fl['fwd']['median_ms'] / of['median_ms']:.1f}" if "fwd" in fl else "-"
        mf, mb = row.get("ours_fwd_mma_sync"), row.get("ours_bwd_mma_sync")
        mma = f"{mf['median_ms'] if mf else float('nan'):.2f}/{mb['median_ms'] if mb else float('nan'):.2f}"
        chk = row.get("check_vs_flex", {})
        err = f"{chk.get('out_rel', float('nan')):.0e}/{chk.get('dq_rel', float('nan')):.0e}" if chk else "-"
        lines.append(
            f"{row['config']:28} {row['seq_len']:>7} {row['density_of_causal']:>6.3f} | {of['median_ms']:>11.3f} "
            f"{of['tflops']:>5.0f} {ob['median_ms']:>8.3f} {ob['tflops']:>5.0f} | "
            f"{(ff['median_ms'] if ff else float('nan')):>8.3f} {(fb['median_ms'] if fb else float('nan')):>8.3f} "
            f"{(ff['median_ms'] / of['median_ms'] if ff else float('nan')):>5.2f} "
            f"{(fb['median_ms'] / ob['median_ms'] if fb else float('nan')):>5.2f} | {mma:>13} | {flash:>14} {speedup:>7} | {err:>11}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", required=True, help="path of libsparsering_kernels.so")
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--sizes", default="32768,131072,262144", help="sequence lengths (tokens), comma-separated")
    parser.add_argument("--recalls", default="0.95,0.90", help="recall targets; the 2nd+ run only at --recall-size")
    parser.add_argument("--recall-size", type=int, default=131072, help="length for extra recalls and random blocks")
    parser.add_argument("--densities", default="0.05,0.20", help="random block densities (at --recall-size)")
    parser.add_argument("--dense", default="flash,cudnn", help="SDPA backends to time (dense causal)")
    parser.add_argument("--no-flex", dest="flex", action="store_false", help="skip FlexAttention")
    parser.add_argument("--dense-check", action="store_true", help="also run the all-tiles index (== dense causal)")
    parser.add_argument("--no-pipeline", dest="pipeline", action="store_false",
                        help="skip timing the GPU estimation + selection + index build")
    parser.add_argument("--prep-blocks", default=str(BLOCK),
                        help="block sizes (block_q = block_k) the GPU index build is timed at, comma-separated; "
                             "the forward runs at 128")
    parser.add_argument("--forward-kernels", default="mma_sync",
                        help="forward kernels also timed beside the automatic choice (mma_sync, wgmma), comma-separated")
    parser.add_argument("--backward-kernels", default="mma_sync",
                        help="backward kernels also timed beside the automatic choice (mma_sync, wgmma), comma-separated")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--time-budget-s", type=float, default=1e9, help="skip remaining configs after this")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    args.recalls = [float(s) for s in args.recalls.split(",") if s]
    args.densities = [float(s) for s in args.densities.split(",") if s]
    args.dense = [s for s in args.dense.split(",") if s]
    args.forward_kernels = [s for s in args.forward_kernels.split(",") if s]
    args.backward_kernels = [s for s in args.backward_kernels.split(",") if s]
    args.prep_blocks = [int(s) for s in args.prep_blocks.split(",") if s]

    start = time.time()
    # Timing a compiled backward repeatedly needs retain_graph, which donated buffers forbid.
    import torch._functorch.config
    torch._functorch.config.donated_buffer = False
    lib = SparseringKernels(args.lib)
    props = torch.cuda.get_device_properties(0)
    meta = {"gpu": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
            "cuda": torch.version.cuda, "library_version": lib.version(), "argv": sys.argv, "seed": args.seed}
    rng = np.random.default_rng(args.seed)
    configs = make_configs(args, rng)
    meta["index_build_s"] = time.time() - start
    results, skipped, dense_cache = [], [], {}
    for cfg in configs:
        if time.time() - start > args.time_budget_s:
            skipped.append(f"{cfg.name} N={cfg.n}")
            continue
        t0 = time.time()
        try:
            run_config(lib, cfg, args, results, dense_cache)
        except Exception as error:  # keep going: one failing peer must not lose the other numbers
            results.append({"config": cfg.name, "seq_len": cfg.n, "error": repr(error)[:400]})
            print(f"[bench] {cfg.name} N={cfg.n} failed: {error!r}", flush=True)
            continue
        print(f"[bench] {cfg.name} N={cfg.n} done in {time.time() - t0:.1f} s", flush=True)
        with open(args.out, "w") as f:
            json.dump({"meta": meta, "results": results, "skipped": skipped}, f, indent=1)
    meta["total_s"] = time.time() - start
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "results": results, "skipped": skipped}, f, indent=1)
    good = [r for r in results if "error" not in r]
    print(table(good))
    for r in results:
        for key in ("error", "flex_error"):
            if key in r:
                print(f"{key.upper()} {r['config']} N={r['seq_len']}: {r[key]}")
    for r in good:
        if "index_build" in r:
            es = r["estimate_select"]["median_ms"]
            fwd = r["ours_fwd"]["median_ms"]
            for block, b in r["index_build_by_block"].items():
                check = f", GPU index == numpy index: {b['matches_numpy_index']}" if "matches_numpy_index" in b else ""
                print(f"{r['config']} N={r['seq_len']} blocks {block}x{block}: estimate+select {es:.3f} ms + index "
                      f"build {b['median_ms']:.3f} ms (into an allocated index, no sync) = "
                      f"{100 * (es + b['median_ms']) / fwd:.1f}% of our sparse fwd ({fwd:.3f} ms); with the "
                      f"exact-array build {b['exact_arrays_median_ms']:.3f} ms (one sync + allocation) "
                      f"{100 * (es + b['exact_arrays_median_ms']) / fwd:.1f}%; same index both ways: "
                      f"{b['into_equals_exact']}{check}")
    if skipped:
        print("skipped (time budget):", ", ".join(skipped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
