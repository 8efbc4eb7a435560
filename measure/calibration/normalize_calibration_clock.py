#!/usr/bin/env python3
"""A copy of a calibration's measurements with every time rescaled to one SM clock: the benchmark
grid (the kernel CSV `calibrate` writes) and replayed ring cells (`validate --replay` directories),
each time multiplied by the clock its launch ran at (kernels/cuda/sm_clock_probe.hpp) over REF_MHZ.
Refitted (`calibrate --refit`), they give a cost model in SM cycles (microseconds at REF_MHZ), which
predicts a matrix rescaled the same way (measure/validation/normalize_matrix_clock.py): what the
model would reach if every launch's clock were known (docs/VALIDATION.md, "The model in SM
cycles"). A launch bound by memory does not speed up with the clock, so this is a bound on what
the clock explains, not a measurement.

    normalize_calibration_clock.py GRID_CSV DEST --ref-mhz F [--replays DIR ...] [--backward-replays DIR ...]

Writes DEST/<GRID_CSV's name> (median_us, min_us and max_us rescaled, sm_clock_mhz set to F),
DEST/replays/<plan>/ and DEST/backward-replays/<plan>/ (cells.csv's measured_us and
validation.json's measured_compute_us rescaled, their clocks set to F; every other column and key
as it was). Exits 2 naming the file when a launch with a time has no clock (recorded before the
probe), or a replay directory lacks cells.csv or validation.json.
"""
import argparse
import csv
import json
import pathlib
import sys


class Refused(Exception):
    pass


def rescaled(time_us, clock_mhz, ref_mhz, where):
    if time_us <= 0.0:
        return time_us
    if not clock_mhz > 0.0:
        raise Refused(f"{where}: a time of {time_us} us without a clock (measured before the clock was probed)")
    return time_us * clock_mhz / ref_mhz


def write_csv(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def rescaled_csv(path, clock_key, time_keys, ref_mhz):
    """The header and rows of `path` with the `time_keys` of every row rescaled by its `clock_key`
    (set to `ref_mhz`, or left 0 on a row that launched nothing)."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames
        if not header or clock_key not in header:
            raise Refused(f"{path}: no {clock_key} column (measured before the clock was probed)")
        rows = list(reader)
    for line, row in enumerate(rows, start=2):
        clock = float(row[clock_key])
        for key in time_keys:
            row[key] = repr(rescaled(float(row[key]), clock, ref_mhz, f"{path} line {line}"))
        row[clock_key] = repr(ref_mhz if clock > 0.0 else 0.0)
    return header, rows


def normalize_grid(source, dest, ref_mhz):
    write_csv(dest / source.name, *rescaled_csv(source, "sm_clock_mhz", ("median_us", "min_us", "max_us"), ref_mhz))


def normalize_replay(source, dest, ref_mhz):
    cells_path = source / "cells.csv"
    json_path = source / "validation.json"
    for path in (cells_path, json_path):
        if not path.is_file():
            raise Refused(f"{path}: missing (a replay directory holds cells.csv and validation.json)")
    header, rows = rescaled_csv(cells_path, "measured_sm_clock_mhz", ("measured_us",), ref_mhz)
    doc = json.loads(json_path.read_text())
    for direction in ("forward", "backward"):
        p = doc[direction]
        if "measured_sm_clock_mhz" not in p:
            raise Refused(f"{json_path}: no measured_sm_clock_mhz in {direction}")
        p["measured_compute_us"] = [rescaled(t, c, ref_mhz, f"{json_path} {direction}")
                                    for t, c in zip(p["measured_compute_us"], p["measured_sm_clock_mhz"])]
        p["measured_sm_clock_mhz"] = [ref_mhz if c > 0.0 else 0.0 for c in p["measured_sm_clock_mhz"]]
    write_csv(dest / "cells.csv", header, rows)
    (dest / "validation.json").write_text(json.dumps(doc))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("grid", type=pathlib.Path)
    parser.add_argument("dest", type=pathlib.Path)
    parser.add_argument("--ref-mhz", type=float, required=True, help="the clock to rescale to")
    parser.add_argument("--replays", type=pathlib.Path, nargs="*", default=[])
    parser.add_argument("--backward-replays", type=pathlib.Path, nargs="*", default=[])
    args = parser.parse_args()
    if not args.ref_mhz > 0.0:
        print(f"--ref-mhz must be > 0, got {args.ref_mhz}", file=sys.stderr)
        return 2
    try:
        if not args.grid.is_file():
            raise Refused(f"{args.grid}: no such file")
        normalize_grid(args.grid, args.dest, args.ref_mhz)
        for folder, replays in (("replays", args.replays), ("backward-replays", args.backward_replays)):
            for replay in replays:
                normalize_replay(replay, args.dest / folder / replay.name, args.ref_mhz)
    except Refused as error:
        print(error, file=sys.stderr)
        return 2
    print(f"rescaled {args.grid.name} and {len(args.replays) + len(args.backward_replays)} replays to "
          f"{args.ref_mhz:.0f} MHz into {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
