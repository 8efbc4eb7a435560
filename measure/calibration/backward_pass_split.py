#!/usr/bin/env python3
"""Which pass of the backward its calibration error sits in, from a kernel calibration CSV whose
backward launches record the key-block pass alone (`key_pass_us`, measure/bench/kernel_bench.cu).

    backward_pass_split.py KERNELS_CSV [--check DOC]

For each kernel shape, over the launches the calibration fits (not under-filled), fits each pass
on its own units by least squares of the relative error (docs/calibration.md, "The backward in
its own units"):
  key-block pass = launch + per key list x key lists + per tile x tiles + per key block x key blocks
                   of the chunk                                  (the key_pass_us column)
  column pass    = launch + per column list x column lists + per item x column items + per column
                   x columns              (median_us - key_pass_us, launches with a column item)
and prints each fit's median and worst |error|, the key-block pass's median residual (fit -
measured) by local tokens and by tiles per list, and its time per tile on the lists of 16 tiles
or more by local tokens. With --check DOC, exits 1 unless DOC holds the printed table verbatim
(the ctest `backward_pass_split_page` keeps docs/calibration.md generated).
"""
import argparse
import csv
import pathlib
import statistics
import sys

import numpy


def fit(rows, features, target):
    """Least squares of the relative error; returns the relative errors (fit - measured) / measured."""
    y = numpy.array([target(r) for r in rows])
    x = numpy.array([[f(r) for f in features] for r in rows], dtype=float)
    weight = 1.0 / y
    coefficients, *_ = numpy.linalg.lstsq(x * weight[:, None], y * weight, rcond=None)
    return (x @ coefficients - y) / y


def percent(value):
    return f"{value * 100:.1f}%"


def signed(value):
    return f"{value * 100:+.1f}%"


def table(path):
    rows = [r for r in csv.DictReader(open(path)) if r["direction"] == "backward" and r.get("under_filled") == "0"
            and float(r.get("key_pass_us", "-1")) >= 0]
    if not rows:
        raise SystemExit(f"{path}: no backward launch with key_pass_us")
    lines = ["| shape | launches | key-block pass median / max \\|err\\| | by local tokens | by tiles per list "
             "| key-block pass ns per tile, lists of 16+ tiles, by local tokens | column pass: launches, median / max \\|err\\| |",
             "|---|---|---|---|---|---|---|"]
    shapes = sorted({(int(r["block_q"]), int(r["block_k"]), int(r["head_dim"])) for r in rows})
    for shape in shapes:
        launches = [r for r in rows if (int(r["block_q"]), int(r["block_k"]), int(r["head_dim"])) == shape]
        key_blocks = lambda r: int(r["kv_heads"]) * -(-int(r["local_tokens"]) // int(r["block_k"]))  # noqa: E731
        key_err = fit(launches, [lambda r: 1.0, lambda r: float(r["key_lists"]), lambda r: float(r["tiles"]), key_blocks],
                      lambda r: float(r["key_pass_us"]))

        def by(field):
            values = sorted({int(r[field]) for r in launches})
            return ", ".join(f"{v}: {signed(statistics.median(e for e, r in zip(key_err, launches) if int(r[field]) == v))}"
                             for v in values)
        long_lists = [r for r in launches if int(r["tiles_per_list"]) >= 16 and r["chunks_per_list"] == "0"]
        per_tile = ", ".join(
            f"{t}: {statistics.median(float(r['key_pass_us']) * 1000 / int(r['tiles']) for r in long_lists if int(r['local_tokens']) == t):.1f}"
            for t in sorted({int(r["local_tokens"]) for r in long_lists}))
        # The column pass is the rest of the backward; where noise leaves no positive rest, the
        # launch says nothing about it.
        with_columns = [r for r in launches
                        if int(r["column_items"]) > 0 and float(r["median_us"]) > float(r["key_pass_us"])]
        column_err = fit(with_columns, [lambda r: 1.0, lambda r: float(r["column_lists"]),
                                        lambda r: float(r["column_items"]), lambda r: float(r["columns"])],
                         lambda r: float(r["median_us"]) - float(r["key_pass_us"])) if with_columns else []
        column_cell = (f"{len(with_columns)}, {percent(statistics.median(abs(column_err)))} / "
                       f"{percent(max(abs(column_err)))}" if with_columns else "0, -")
        lines.append(f"| {shape[0]}x{shape[1]}x{shape[2]} | {len(launches)} | {percent(statistics.median(abs(key_err)))} / "
                     f"{percent(max(abs(key_err)))} | {by('local_tokens')} | {by('tiles_per_list')} | {per_tile} | "
                     f"{column_cell} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("--check", help="a document that must hold the table verbatim")
    args = parser.parse_args()
    text = table(args.csv)
    print(text, end="")
    if args.check and text not in pathlib.Path(args.check).read_text():
        print(f"{args.check} does not hold the table above verbatim", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
