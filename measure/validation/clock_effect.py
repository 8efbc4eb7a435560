#!/usr/bin/env python3
"""How much of a replayed matrix's kernel times the SM clock explains, from validation.json files
alone (replays that probed the clock of every cell: `measured_sm_clock_mhz`).

    clock_effect.py ROOT [--grid KERNELS.csv] [--check DOC]

ROOT holds <kind>/<case>/validation.json. Prints, per GPU kind:
  - the distribution of the cells' clocks (1st, 10th, 50th, 90th and 99th percentile);
  - cells of identical work: within one case and pass, cells whose predicted times are equal
    (the prediction is a function of the work counts the model uses: equal work as it counts it)
    form a group; over the groups of 3 cells or more measured at 200 us or more, the median and
    mean coefficient of variation of the measured time and of the measured cycles (time x clock):
    what is left of a group's spread once the clock is accounted for;
  - the cells by clock band: how many, and their median measured / predicted time.
With --grid, also the clocks a calibration's launches ran at (its kernels CSV with the
`sm_clock_mhz` column, measure/calibration/calibration_output.cpp): per shape and direction, the
median clock and that of the launches of 1 ms or more, the calibration's own counterpart of the
replays' clocks. With --check DOC, exits 1 unless DOC holds the printed text verbatim. Exits 2
without clocks.
"""
import csv
import argparse
import collections
import json
import pathlib
import statistics
import sys

from page_text import print_or_check

BANDS = [(0, 1700), (1700, 1800), (1800, 1900), (1900, 1950), (1950, 10000)]
MIN_GROUP_US = 200.0


def percentile(sorted_values, q):
    """Linear interpolation between closest ranks (numpy's default)."""
    x = (len(sorted_values) - 1) * q
    lo = int(x)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (x - lo)


def cv(values):
    mean = statistics.fmean(values)
    return statistics.pstdev(values) / mean if mean > 0 else 0.0


def kind_text(kind, docs):
    cells = []  # (case, pass, predicted, measured, clock)
    for case, doc in docs:
        for direction in ("forward", "backward"):
            p = doc[direction]
            if "measured_sm_clock_mhz" not in p:
                raise SystemExit(f"{kind}/{case}: no measured_sm_clock_mhz in {direction} (replayed before the clock was probed)")
            for m, pr, c in zip(p["measured_compute_us"], p["predicted_compute_us"], p["measured_sm_clock_mhz"]):
                if m > 0 and pr > 0 and c > 0:
                    cells.append((case, direction, pr, m, c))
    clocks = sorted(c[4] for c in cells)
    lines = [f"{kind}: {len(cells)} cells with a clock; SM clock percentiles 1/10/50/90/99: "
             + " / ".join(f"{percentile(clocks, q):.0f}" for q in (0.01, 0.10, 0.50, 0.90, 0.99)) + " MHz."]
    groups = collections.defaultdict(list)
    for case, direction, pr, m, c in cells:
        groups[(case, direction, pr)].append((m, c))
    time_cv, cycle_cv = {"forward": [], "backward": []}, {"forward": [], "backward": []}
    for (case, direction, pr), members in groups.items():
        if len(members) >= 3 and min(m for m, _ in members) >= MIN_GROUP_US:
            time_cv[direction].append(cv([m for m, _ in members]))
            cycle_cv[direction].append(cv([m * c for m, c in members]))
    for direction in ("forward", "backward"):
        t, y = time_cv[direction], cycle_cv[direction]
        if t:
            lines.append(f"{kind} {direction}: {len(t)} groups of identical work (3+ cells of {MIN_GROUP_US:.0f} us+): "
                         f"spread of the time median {100 * statistics.median(t):.2f}%, mean {100 * statistics.fmean(t):.2f}%; "
                         f"of the cycles median {100 * statistics.median(y):.2f}%, mean {100 * statistics.fmean(y):.2f}%.")
    lines += ["", "| SM clock (MHz) | cells | median measured / predicted |", "|---|---|---|"]
    for lo, hi in BANDS:
        ratios = [m / pr for _, _, pr, m, c in cells if lo <= c < hi]
        label = f"< {hi}" if lo == 0 else (f">= {lo}" if hi == 10000 else f"{lo}-{hi - 1}")
        lines.append(f"| {label} | {len(ratios)} | {statistics.median(ratios):.3f} |" if ratios else f"| {label} | 0 | - |")
    return lines


def grid_text(path):
    rows = list(csv.DictReader(path.open()))
    if not rows or "sm_clock_mhz" not in rows[0]:
        raise SystemExit(f"{path}: no sm_clock_mhz column (measured before the clock was probed)")
    clocks = sorted(float(r["sm_clock_mhz"]) for r in rows)
    lines = [f"{path.name}: {len(rows)} calibration launches; SM clock percentiles 1/10/50/90/99: "
             + " / ".join(f"{percentile(clocks, q):.0f}" for q in (0.01, 0.10, 0.50, 0.90, 0.99)) + " MHz."]
    shapes = sorted({(int(r["block_q"]), int(r["block_k"]), int(r["head_dim"])) for r in rows})
    for shape in shapes:
        for direction in ("forward", "backward"):
            mine = [r for r in rows if r["direction"] == direction and
                    (int(r["block_q"]), int(r["block_k"]), int(r["head_dim"])) == shape]
            long = [float(r["sm_clock_mhz"]) for r in mine if float(r["median_us"]) >= 1000.0]
            if mine:
                lines.append(f"{path.name} {shape[0]}x{shape[1]}x{shape[2]} {direction}: median clock "
                             f"{statistics.median(float(r['sm_clock_mhz']) for r in mine):.0f} MHz over {len(mine)} launches; "
                             + (f"{len(long)} of 1 ms or more: median {statistics.median(long):.0f}, lowest {min(long):.0f} MHz."
                                if long else "none of 1 ms or more."))
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=pathlib.Path)
    parser.add_argument("--grid", type=pathlib.Path, help="a calibration's kernels CSV with clocks")
    parser.add_argument("--check", type=pathlib.Path, help="exit 1 unless this file holds the text verbatim")
    args = parser.parse_args()
    kinds = collections.defaultdict(list)
    for path in sorted(args.root.glob("*/*/validation.json")):
        kinds[path.parent.parent.name].append((path.parent.name, json.loads(path.read_text())))
    if not kinds:
        print(f"no <kind>/<case>/validation.json under {args.root}", file=sys.stderr)
        return 2
    out = []
    for kind in sorted(kinds):
        try:
            out += kind_text(kind, kinds[kind]) + [""]
        except SystemExit as error:
            print(error, file=sys.stderr)
            return 2
    if args.grid:
        if not args.grid.is_file():
            print(f"--grid {args.grid}: no such file", file=sys.stderr)
            return 2
        try:
            out += grid_text(args.grid) + [""]
        except SystemExit as error:
            print(error, file=sys.stderr)
            return 2
    text = "\n".join(out).rstrip() + "\n"
    return print_or_check(text, args.check, f"the clock effect of {args.root}", f"python3 {sys.argv[0]} {args.root}")


if __name__ == "__main__":
    sys.exit(main())
