"""What a (head, query block) list costs the forward beyond its tiles, measured.

The forward launches one CTA per (head, query-block tile), listed or not; an empty list returns at
once. On short lists (far ring steps, sparse masks) the fixed cost of a CTA can be a large share of
a launch, so this separates three figures on synthetic indices that differ in one count at a time
(16 query / 2 K/V heads, head dim 128, bf16; every tile off the diagonal, so none is masked):

  half      odd query blocks list T tiles (the T key blocks just below the diagonal), even ones none
  half 2T   odd query blocks list 2T tiles: the same CTAs, twice the tiles
  full      every query block lists T tiles: as many tiles as "half 2T", twice the lists, no empty CTA
  compact   the problem of half the tokens, every query block listing T tiles: "half"'s lists
            and tiles without its empty CTAs

  per tile           = (half 2T - half) / (tiles of half 2T - tiles of half)
  per empty CTA      = (half - compact) / (empty CTAs of half - those of compact)
  per non-empty list = ((full - half 2T) - per empty CTA x (empty CTAs of full - those of half 2T))
                       / (lists of full - lists of half 2T)
(every variant lists query blocks from 2T on only, so the lists compared are alike).

Run after the library is built (kernels/bench/run_on_device.sh builds it):

    python3 kernels/bench/bench_list_overheads.py --lib build-device/kernels/cuda/libsparsering_kernels.so \\
        --out OUT/list_overheads.json

It prints one row per (block, forward kernel, T) and writes the raw times as JSON.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

HEADS, KV_HEADS, DIM = 16, 2, 128  # query and K/V heads: --heads / --kv-heads


def lists_index(q_blocks: int, tiles_of, columns_of=None) -> tuple:
    """CSR arrays of HEADS rows whose query block i lists the key blocks tiles_of(i) and the
    gathered keys columns_of(row, i) (ascending, outside the listed blocks; none by default)."""
    offsets, blocks, column_offsets, columns = [0], [], [0], []
    for row in range(HEADS):
        for i in range(q_blocks):
            js = tiles_of(i)
            blocks.extend(js)
            offsets.append(offsets[-1] + len(js))
            keys = columns_of(row, i) if columns_of is not None and js else []
            columns.extend(keys)
            column_offsets.append(column_offsets[-1] + len(keys))
    tile_block = np.asarray(blocks, np.int32)
    return (np.asarray(offsets, np.int32), tile_block, np.zeros(tile_block.size, np.uint8),
            np.asarray(column_offsets, np.int32), np.asarray(columns, np.int32))


def below(i: int, count: int, need: int, odd_only: bool) -> list:
    """The `count` key blocks just below query block i, if i has `need` of them (and is odd when asked)."""
    if i < need or (odd_only and i % 2 == 0):
        return []
    return list(range(i - count, i))


def variants(q_blocks: int, t: int) -> dict:
    """(q_blocks of the problem, index arrays) of the four variants."""
    need = 2 * t  # every variant lists query blocks from 2T on, so the lists compared are the same ones
    return {
        "half": (q_blocks, lists_index(q_blocks, lambda i: below(i, t, need, True))),
        "half 2T": (q_blocks, lists_index(q_blocks, lambda i: below(i, 2 * t, need, True))),
        "full": (q_blocks, lists_index(q_blocks, lambda i: below(i, t, need, False))),
        "compact": (q_blocks // 2, lists_index(q_blocks // 2, lambda i: below(i, t, t, False))),
    }


def column_variants(q_blocks: int, block: int, t: int, chunks: int, seed: int) -> dict:
    """Every query block from 2T on lists T tiles ("tiles only"), plus `chunks` x 64 gathered keys
    below its tiles: one run of consecutive keys at a random start ("+ consecutive columns") or
    keys drawn at random without repeats ("+ scattered columns"), per (head, query block)."""
    keys = 64 * chunks
    need = max(2 * t, t + -(-keys // block))
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, 1 << 30, size=(HEADS, q_blocks))
    tiles_of = lambda i: below(i, t, need, False)  # noqa: E731

    def consecutive(row, i):
        span = (i - t) * block
        start = int(starts[row, i] % (span - keys + 1))
        return list(range(start, start + keys))

    def scattered(row, i):
        picked = np.random.default_rng([seed, row, i]).choice((i - t) * block, size=keys, replace=False)
        return sorted(int(x) for x in picked)

    return {"tiles only": (q_blocks, lists_index(q_blocks, tiles_of)),
            "+ consecutive columns": (q_blocks, lists_index(q_blocks, tiles_of, consecutive)),
            "+ scattered columns": (q_blocks, lists_index(q_blocks, tiles_of, scattered))}


def index_counts(q_blocks: int, arrays: tuple) -> dict:
    """CTAs (one per row and query block), non-empty lists, tiles and gathered columns of an index."""
    offsets, tile_block, _, _, columns = arrays
    return {"ctas": HEADS * q_blocks, "lists": int((np.diff(offsets) > 0).sum()), "tiles": int(tile_block.size),
            "columns": int(columns.size)}


def time_variant(lib, block: int, q_blocks: int, arrays: tuple, args) -> dict:
    from bench_attention import time_ms  # the GPU harness (imports the peers, which need a recent torch)
    from sparsering.capi import DeviceIndex
    n = q_blocks * block
    q = torch.randn(1, HEADS, n, DIM, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, KV_HEADS, n, DIM, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, KV_HEADS, n, DIM, device="cuda", dtype=torch.bfloat16)
    out = torch.zeros(1, HEADS, n, DIM, device="cuda", dtype=torch.float32)
    lse = torch.full((1, HEADS, n), -math.inf, device="cuda", dtype=torch.float32)
    index = DeviceIndex.from_numpy(block, block, q_blocks, *arrays)
    timing = time_ms(lambda: lib.sparse_attn_fwd(q, k, v, index, out, lse), args.warmup, args.repeats)
    return {"tokens": n, **index_counts(q_blocks, arrays), "median_us": 1e3 * timing["median_ms"],
            "min_us": 1e3 * timing["min_ms"], "max_us": 1e3 * timing["max_ms"]}


def derive(m: dict) -> dict:
    """The three costs from the four variants' times and counts (each variant's CTAs are its lists
    plus its empty ones)."""
    h, h2, f, c = m["half"], m["half 2T"], m["full"], m["compact"]
    empty = {name: v["ctas"] - v["lists"] for name, v in m.items()}
    per_tile = (h2["median_us"] - h["median_us"]) / (h2["tiles"] - h["tiles"])
    per_empty = (h["median_us"] - c["median_us"]) / (empty["half"] - empty["compact"])
    per_list = ((f["median_us"] - h2["median_us"]) - per_empty * (empty["full"] - empty["half 2T"])) / (
        f["lists"] - h2["lists"])
    return {"per_tile_ns": 1e3 * per_tile, "per_empty_cta_ns": 1e3 * per_empty, "per_list_ns": 1e3 * per_list,
            "list_in_tiles": per_list / per_tile}


def per_chunk_ns(m: dict, chunks: int) -> dict:
    """Cost of 64 gathered keys, consecutive and scattered, from the column variants' times: what a
    list's `chunks` chunks add to "tiles only", per chunk."""
    base = m["tiles only"]
    return {name: 1e3 * (m[name]["median_us"] - base["median_us"]) / (base["lists"] * chunks)
            for name in ("+ consecutive columns", "+ scattered columns")}


def print_table(head: str, lines: list) -> None:
    print(head)
    print("-" * len(head))
    for line in lines:
        print(line)


def print_results(runs: list, column_runs: list) -> None:
    """The two tables: per-list, per-tile and per-empty-CTA costs, then per-chunk costs."""
    print_table(f"{'block':>5} {'kernel':>8} {'T':>3} | {'half':>8} {'half 2T':>8} {'full':>8} {'compact':>8} us | "
                f"{'tile ns':>7} {'empty CTA ns':>12} {'list ns':>8} {'list / tile':>11}",
                [f"{r['block']:>5} {r['kernel']:>8} {r['tiles_per_list']:>3} | {r['variants']['half']['median_us']:>8.1f} "
                 f"{r['variants']['half 2T']['median_us']:>8.1f} {r['variants']['full']['median_us']:>8.1f} "
                 f"{r['variants']['compact']['median_us']:>8.1f}    | {r['derived']['per_tile_ns']:>7.2f} "
                 f"{r['derived']['per_empty_cta_ns']:>12.2f} {r['derived']['per_list_ns']:>8.2f} "
                 f"{r['derived']['list_in_tiles']:>11.2f}" for r in runs])
    print_table(f"{'block':>5} {'kernel':>8} {'chunks':>6} | {'tiles only':>10} {'+ consec.':>9} {'+ scatt.':>9} us | "
                f"{'consecutive chunk ns':>20} {'scattered chunk ns':>18}",
                [f"{r['block']:>5} {r['kernel']:>8} {r['chunks_per_list']:>6} | "
                 f"{r['variants']['tiles only']['median_us']:>10.1f} "
                 f"{r['variants']['+ consecutive columns']['median_us']:>9.1f} "
                 f"{r['variants']['+ scattered columns']['median_us']:>9.1f}    | "
                 f"{r['per_chunk_ns']['+ consecutive columns']:>20.2f} {r['per_chunk_ns']['+ scattered columns']:>18.2f}"
                 for r in column_runs])


def main() -> int:
    global HEADS, KV_HEADS  # the index builders and the timing read them
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lib", required=True, help="path of libsparsering_kernels.so")
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--q-blocks", type=int, default=1024, help="query blocks per head (even)")
    parser.add_argument("--tiles", default="2,8", help="T values, comma-separated")
    parser.add_argument("--heads", type=int, default=HEADS, help="query heads")
    parser.add_argument("--kv-heads", type=int, default=KV_HEADS, help="K/V heads (dividing --heads)")
    parser.add_argument("--blocks", default="64,128", help="block sizes to run, comma-separated (64, 128)")
    parser.add_argument("--column-chunks", default="1,4", help="64-key chunks per list in the column runs")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=11)
    args = parser.parse_args()
    if args.q_blocks < 8 or args.q_blocks % 2:
        print(f"--q-blocks must be even and >= 8, got {args.q_blocks}", file=sys.stderr)
        return 2
    if args.heads < 1 or args.kv_heads < 1 or args.heads % args.kv_heads:
        print(f"--heads ({args.heads}) must be a positive multiple of --kv-heads ({args.kv_heads})", file=sys.stderr)
        return 2
    blocks = [int(b) for b in args.blocks.split(",") if b]
    if not blocks or any(b not in (64, 128) for b in blocks):
        print(f"--blocks must list 64 and/or 128, got {args.blocks!r}", file=sys.stderr)
        return 2
    HEADS, KV_HEADS = args.heads, args.kv_heads
    from sparsering.capi import SparseringKernels
    lib = SparseringKernels(args.lib)
    torch.manual_seed(0)
    runs, column_runs = [], []
    for block, kernels in ((b, ["mma_sync"] if b == 64 else ["mma_sync", "wgmma"]) for b in blocks):
        for kernel in kernels:
            os.environ["SPARSERING_FORWARD_KERNEL"] = kernel
            for t in (int(s) for s in args.tiles.split(",") if s):
                if 4 * t > args.q_blocks:
                    print(f"T = {t} needs at least {4 * t} query blocks; skipped", file=sys.stderr)
                    continue
                measured = {name: time_variant(lib, block, qb, arrays, args)
                            for name, (qb, arrays) in variants(args.q_blocks, t).items()}
                runs.append({"block": block, "kernel": kernel, "tiles_per_list": t, "variants": measured,
                             "derived": derive(measured)})
            for chunks in (int(s) for s in args.column_chunks.split(",") if s):
                measured = {name: time_variant(lib, block, qb, arrays, args)
                            for name, (qb, arrays) in column_variants(args.q_blocks, block, 2, chunks, 1).items()}
                column_runs.append({"block": block, "kernel": kernel, "tiles_per_list": 2, "chunks_per_list": chunks,
                                    "variants": measured, "per_chunk_ns": per_chunk_ns(measured, chunks)})
    os.environ.pop("SPARSERING_FORWARD_KERNEL", None)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "heads": HEADS, "kv_heads": KV_HEADS,
            "head_dim": DIM, "q_blocks": args.q_blocks, "warmup": args.warmup, "repeats": args.repeats}
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "runs": runs, "column_runs": column_runs}, f, indent=1)
    print_results(runs, column_runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
