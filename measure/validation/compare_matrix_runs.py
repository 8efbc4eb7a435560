#!/usr/bin/env python3
"""Two measurements of the same validation matrix, side by side: how far a replay's measured
per-layer time moves between runs of the same kernels, against the error the prediction shows.

    compare_matrix_runs.py FIRST SECOND [--clocks CLOCKS.txt] [--over PERCENT] [--check DOC]

FIRST and SECOND hold <kind>/<case>/validation.json (measure/device/run_matrix_on_device.sh);
cases present in both are compared, pass by pass, on the predicted per-layer time of SECOND (the
same for both when they were predicted by one version with one calibration; a case whose two
predictions differ is refused, since its errors would not be comparable). Prints, per GPU kind,
the run-to-run difference of the measured per-layer time (median and largest |difference|), the
per-layer error of each run and of the two runs' mean measurement (median and worst |error|), and
one row per pass whose error or run-to-run difference exceeds --over percent (default 5), with
the SM clock each case ran at in SECOND when --clocks names the summary
measure/device/gpu_clock_summary.py wrote for it. With --check DOC, exits 1 unless DOC holds the
printed text verbatim.
"""
import argparse
import json
import pathlib
import re
import statistics
import sys

from page_text import print_or_check

CLOCK_LINE = re.compile(r"^(\S+): SM clock median (\d+) MHz, lowest (\d+) MHz, power up to (\d+) W, "
                        r"power-capped (\d+)% of (\d+) samples")


def clocks_of(path):
    out = {}
    if path:
        for line in path.read_text().splitlines():
            m = CLOCK_LINE.match(line)
            if m:
                out[m.group(1)] = f"{m.group(2)} MHz ({m.group(5)}% capped)"
    return out


def pct(x):
    return f"{100 * x:+.1f}%"


def kind_text(kind, first, second, clocks, over):
    rows, moves, errors = [], [], {"first": [], "second": [], "mean": []}
    for case in sorted(set(first) & set(second)):
        a, b = first[case], second[case]
        for direction in ("forward", "backward"):
            pa, pb = a[direction]["predicted_ms"], b[direction]["predicted_ms"]
            if abs(pa - pb) > 1e-9 * max(abs(pa), abs(pb), 1.0):
                raise SystemExit(f"{kind}/{case} {direction}: the two runs were predicted differently "
                                 f"({pa} and {pb} ms); predict both with one version first")
            ma, mb = a[direction]["measured_ms"], b[direction]["measured_ms"]
            move = mb / ma - 1
            err = {"first": pb / ma - 1, "second": pb / mb - 1, "mean": pb / (0.5 * (ma + mb)) - 1}
            moves.append(abs(move))
            for k, v in err.items():
                errors[k].append(abs(v))
            if round(100 * max(abs(move), abs(err["first"]), abs(err["second"])), 1) > over:  # as printed
                rows.append(f"| {case} | {direction} | {ma:.2f} / {mb:.2f} ({pct(move)}) | {pb:.2f} | "
                            f"{pct(err['first'])} / {pct(err['second'])} / {pct(err['mean'])} | "
                            f"{clocks.get(case, '-')} |")
    if not moves:
        return []
    lines = [f"{kind}: {len(moves) // 2} cases in both runs; measured per-layer time, second run against the first: "
             f"median |difference| {100 * statistics.median(moves):.1f}%, largest {100 * max(moves):.1f}%."]
    for k, label in (("first", "first run"), ("second", "second run"), ("mean", "mean of the two runs")):
        lines.append(f"{kind}: per-layer error against the {label}: median |error| "
                     f"{100 * statistics.median(errors[k]):.1f}%, worst {100 * max(errors[k]):.1f}%.")
    if rows:
        lines += ["", f"| case | pass | measured ms, first / second (difference) | predicted ms | error: first / second / mean "
                      f"| SM clock, second run |", "|---|---|---|---|---|---|"] + rows
    return lines


def load(root):
    runs = {}
    for path in sorted(root.glob("*/*/validation.json")):
        runs.setdefault(path.parent.parent.name, {})[path.parent.name] = json.loads(path.read_text())
    return runs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=pathlib.Path)
    parser.add_argument("second", type=pathlib.Path)
    parser.add_argument("--clocks", type=pathlib.Path, help="gpu_clock_summary.py's output for the second run")
    parser.add_argument("--over", type=float, default=5.0, help="list passes above this |error| or |difference| (percent)")
    parser.add_argument("--check", type=pathlib.Path, help="exit 1 unless this file holds the text verbatim")
    args = parser.parse_args()
    if args.clocks and not args.clocks.is_file():
        print(f"--clocks {args.clocks}: no such file", file=sys.stderr)
        return 2
    first, second = load(args.first), load(args.second)
    out = []
    for kind in sorted(set(first) & set(second)):
        out += kind_text(kind, first[kind], second[kind], clocks_of(args.clocks), args.over) + [""]
    if not out:
        print(f"no case measured in both {args.first} and {args.second} (<kind>/<case>/validation.json)", file=sys.stderr)
        return 2
    text = "\n".join(out).rstrip() + "\n"
    regenerate = f"python3 {sys.argv[0]} {args.first} {args.second}" + (f" --clocks {args.clocks}" if args.clocks else "")
    return print_or_check(text, args.check, f"the comparison of {args.first} and {args.second}", regenerate)


if __name__ == "__main__":
    sys.exit(main())
