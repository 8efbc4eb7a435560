#!/usr/bin/python3
"""The indices of kernels/bench/bench_list_overheads.py differ in the one count each derived figure
needs (ctest labels torch, cpu), and its formulas give back the per-tile, per-list and per-empty-CTA
costs of launch times made from known costs.
"""
import contextlib
import io
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_support import Checks, import_torch, test_seed  # noqa: E402

import_torch()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "kernels", "bench"))
import numpy as np  # noqa: E402
import bench_list_overheads as bench  # noqa: E402


def main():
    checks = Checks("bench_list_overheads_test")
    seed = test_seed("bench_list_overheads_test")
    rng = random.Random(seed)
    for q_blocks, t in ((16, 1), (16, 2), (64, 8), (2 * rng.randint(4, 40), rng.randint(1, 3))):
        v = {name: bench.index_counts(qb, arrays) for name, (qb, arrays) in bench.variants(q_blocks, t).items()}
        what = f"q_blocks {q_blocks}, T {t}"
        checks.true(f"{what}: half and compact list the same tiles",
                    v["half"]["lists"] == v["compact"]["lists"] and v["half"]["tiles"] == v["compact"]["tiles"], str(v))
        checks.true(f"{what}: compact leaves only its first T query blocks empty",
                    v["compact"]["ctas"] - v["compact"]["lists"] == bench.HEADS * t, str(v))
        checks.true(f"{what}: half 2T doubles half's tiles on the same lists",
                    v["half 2T"]["lists"] == v["half"]["lists"] and v["half 2T"]["tiles"] == 2 * v["half"]["tiles"], str(v))
        checks.true(f"{what}: full has half 2T's tiles on twice its lists",
                    v["full"]["tiles"] == v["half 2T"]["tiles"] and v["full"]["lists"] == 2 * v["half 2T"]["lists"], str(v))
        # Launch times made from known costs give them back.
        tile_us, list_us, empty_us, launch_us = rng.uniform(0.01, 0.03), rng.uniform(0.02, 0.06), rng.uniform(0, 0.005), 5.0
        timed = {name: dict(c, median_us=launch_us + tile_us * c["tiles"] + list_us * c["lists"]
                            + empty_us * (c["ctas"] - c["lists"])) for name, c in v.items()}
        d = bench.derive(timed)
        checks.bound(f"{what}: per tile", abs(d["per_tile_ns"] - 1e3 * tile_us), 1e-6)
        checks.bound(f"{what}: per empty CTA", abs(d["per_empty_cta_ns"] - 1e3 * empty_us), 1e-6)
        checks.bound(f"{what}: per list", abs(d["per_list_ns"] - 1e3 * list_us), 1e-6)
    for block, t, chunks in ((64, 2, 1), (64, 2, 4), (128, 2, 4), (rng.choice((64, 128)), rng.randint(1, 3), rng.randint(1, 5))):
        q_blocks = 32
        what = f"block {block}, T {t}, {chunks} chunks"
        runs = bench.column_variants(q_blocks, block, t, chunks, seed)
        base = bench.index_counts(*runs["tiles only"])
        for name in ("+ consecutive columns", "+ scattered columns"):
            qb, arrays = runs[name]
            c = bench.index_counts(qb, arrays)
            checks.true(f"{what}, {name}: the tiles-only lists and tiles",
                        c["lists"] == base["lists"] and c["tiles"] == base["tiles"], f"{c} vs {base}")
            checks.true(f"{what}, {name}: {64 * chunks} columns per list", c["columns"] == base["lists"] * 64 * chunks, str(c))
            offsets, tile_block, _, column_offsets, columns = arrays
            ok = True
            for r in range(bench.HEADS * q_blocks):
                keys = columns[column_offsets[r]:column_offsets[r + 1]]
                tiles = tile_block[offsets[r]:offsets[r + 1]]
                if keys.size == 0:
                    continue
                ok = ok and bool(np.all(np.diff(keys) > 0)) and keys[0] >= 0 and keys[-1] < tiles.min() * block
                if name == "+ consecutive columns":
                    ok = ok and bool(np.all(np.diff(keys) == 1))
            checks.true(f"{what}, {name}: ascending, unique, below the list's tiles", ok)
        # Times made from a known cost per chunk of 64 keys give it back.
        chunk_us = rng.uniform(0.01, 0.03)
        counted = {name: bench.index_counts(qb, arrays) for name, (qb, arrays) in runs.items()}
        timed = {name: dict(c, median_us=5.0 + 0.02 * c["tiles"] + chunk_us * c["columns"] / 64)
                 for name, c in counted.items()}
        for name, got in bench.per_chunk_ns(timed, chunks).items():
            checks.bound(f"{what}, {name}: per chunk", abs(got - 1e3 * chunk_us), 1e-6)
    # The recorded H200 runs print a row per run under each header.
    recorded = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "perf",
                            "h200-list-overheads", "first.json")
    with open(recorded) as f:
        data = json.load(f)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        bench.print_results(data["runs"], data["column_runs"])
    lines = printed.getvalue().splitlines()
    checks.true("the recorded runs print one row each under two headers",
                len(lines) == 4 + len(data["runs"]) + len(data["column_runs"]), f"{len(lines)} lines")
    checks.true("a printed row carries its derived figure",
                f"{data['runs'][0]['derived']['per_list_ns']:.2f}" in lines[2], lines[2])
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
