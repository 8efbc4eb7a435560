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

Writes DEST/<GRID_CSV's name> (median_us, min_us, max_us and key_pass_us rescaled, sm_clock_mhz
set to F), DEST/replays/<plan>/ and DEST/backward-replays/<plan>/ (cells.csv's measured_us and
validation.json's measured_compute_us rescaled, their clocks set to F; every other column and key
as it was). DEST must be new (or an empty directory); every input is read and checked before
anything is written. Exits 2 naming the file (and line) when a launch with a time has no clock
(recorded before the probe), a value is not a number, a replay directory lacks cells.csv or a
replay's validation.json, two replays of one list share a name, or DEST is not fresh.
"""
import argparse
import csv
import io
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "validation"))
from clock_rescale import Refused, number, rescaled, rescale_passes  # noqa: E402


def csv_text(header, rows):
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def rescaled_csv(path, clock_key, time_keys, ref_mhz):
    """The text of `path` with the `time_keys` of every row rescaled by its `clock_key` (set to
    `ref_mhz`, or left 0 on a row that launched nothing); optional time keys absent from the header
    are skipped, required ones refused."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        rows = list(reader)
    for key in (clock_key, *time_keys[:1]):
        if key not in header:
            raise Refused(f"{path}: no {key} column" + (" (measured before the clock was probed)" if key == clock_key else ""))
    present = [key for key in time_keys if key in header]
    for line, row in enumerate(rows, start=2):
        where = f"{path} line {line}"
        clock = number(row[clock_key], where)
        for key in present:
            time_us = number(row[key], where)
            if time_us > 0.0:  # 0 or -1 (not measured) stay as written
                row[key] = repr(rescaled(time_us, clock, ref_mhz, where))
        row[clock_key] = repr(ref_mhz if clock > 0.0 else 0.0)
    return csv_text(header, rows)


def rescaled_replay(source, ref_mhz):
    """{file name: text} of the replay directory `source` rescaled."""
    cells_path = source / "cells.csv"
    json_path = source / "validation.json"
    for path in (cells_path, json_path):
        if not path.is_file():
            raise Refused(f"{path}: missing (a replay directory holds cells.csv and validation.json)")
    cells = rescaled_csv(cells_path, "measured_sm_clock_mhz", ("measured_us",), ref_mhz)
    try:
        doc = json.loads(json_path.read_text())
    except json.JSONDecodeError as error:
        raise Refused(f"{json_path}: not a replay's validation.json ({error})") from None
    rescale_passes(doc, ref_mhz, str(json_path))
    return {"cells.csv": cells, "validation.json": json.dumps(doc)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("grid", type=pathlib.Path)
    parser.add_argument("dest", type=pathlib.Path)
    parser.add_argument("--ref-mhz", type=float, required=True, help="the clock to rescale to")
    parser.add_argument("--replays", type=pathlib.Path, nargs="*", default=[])
    parser.add_argument("--backward-replays", type=pathlib.Path, nargs="*", default=[])
    args = parser.parse_args()
    try:
        if not args.ref_mhz > 0.0:
            raise Refused(f"--ref-mhz must be > 0, got {args.ref_mhz}")
        # A fresh directory: rescaled files never overwrite their sources or mix with older ones.
        if args.dest.exists() and (not args.dest.is_dir() or any(args.dest.iterdir())):
            raise Refused(f"{args.dest}: exists and is not an empty directory (give a new one)")
        if not args.grid.is_file():
            raise Refused(f"{args.grid}: no such file")
        # Everything is read and checked before anything is written.
        files = {args.dest / args.grid.name: rescaled_csv(args.grid, "sm_clock_mhz",
                                                           ("median_us", "min_us", "max_us", "key_pass_us"), args.ref_mhz)}
        for folder, replays in (("replays", args.replays), ("backward-replays", args.backward_replays)):
            for replay in replays:
                target = args.dest / folder / replay.name
                if target / "cells.csv" in files:
                    raise Refused(f"{replay}: a second replay named {replay.name} in --{folder}")
                for name, text in rescaled_replay(replay, args.ref_mhz).items():
                    files[target / name] = text
    except Refused as error:
        print(error, file=sys.stderr)
        return 2
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(f"rescaled {args.grid.name} and {len(args.replays) + len(args.backward_replays)} replays to "
          f"{args.ref_mhz:.0f} MHz into {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
