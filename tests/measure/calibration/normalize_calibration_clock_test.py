#!/usr/bin/env python3
"""Tests measure/calibration/normalize_calibration_clock.py: grid times (median, min, max) and
replayed cells' times scaled by their clock over the reference, cells without work untouched,
every other column and key kept, and launches or replays without clocks refused (exit 2)."""
import csv
import json
import pathlib
import subprocess
import sys
import tempfile

SCRIPT = pathlib.Path(__file__).resolve().parents[3] / "measure/calibration/normalize_calibration_clock.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        grid = tmp / "grid.csv"
        write(grid, "direction,median_us,min_us,max_us,tiles,sm_clock_mhz\n"
                    "forward,100,90,110,64,1800\nbackward,40,40,40,8,2000\n")
        replay = tmp / "c01-x"
        write(replay / "cells.csv", "direction,position,measured_us,predicted_us,measured_sm_clock_mhz\n"
                                    "forward,0,300,280,1900\nforward,1,0,0,0\nbackward,0,50,55,1600\n")
        doc = {"forward": {"measured_compute_us": [300.0, 0.0], "measured_sm_clock_mhz": [1900.0, 0.0]},
               "backward": {"measured_compute_us": [50.0], "measured_sm_clock_mhz": [1600.0]}, "plan": "c01-x"}
        write(replay / "validation.json", json.dumps(doc))
        result = run(grid, tmp / "out", "--ref-mhz", 2000, "--replays", replay, "--backward-replays", replay)
        assert result.returncode == 0, result.stderr
        assert "rescaled grid.csv and 2 replays to 2000 MHz" in result.stdout, result.stdout
        g = rows(tmp / "out" / "grid.csv")
        assert [float(r["median_us"]) for r in g] == [90.0, 40.0], g
        assert [float(r["min_us"]) for r in g] == [81.0, 40.0] and float(g[0]["max_us"]) == 99.0, g
        assert [float(r["sm_clock_mhz"]) for r in g] == [2000.0, 2000.0] and g[0]["tiles"] == "64", g
        for folder in ("replays", "backward-replays"):
            c = rows(tmp / "out" / folder / "c01-x" / "cells.csv")
            assert [float(r["measured_us"]) for r in c] == [285.0, 0.0, 40.0], c
            assert [float(r["measured_sm_clock_mhz"]) for r in c] == [2000.0, 0.0, 2000.0], c
            assert c[0]["predicted_us"] == "280", c
            out = json.loads((tmp / "out" / folder / "c01-x" / "validation.json").read_text())
            assert out["forward"]["measured_compute_us"] == [285.0, 0.0], out
            assert out["backward"]["measured_compute_us"] == [40.0] and out["plan"] == "c01-x", out

        # Refused: a grid launch without a clock, a grid without the column, a replay without
        # cells.csv, a cell with a time but no clock, a bad reference.
        write(tmp / "noclock.csv", "direction,median_us,min_us,max_us,sm_clock_mhz\nforward,100,90,110,0\n")
        refused = run(tmp / "noclock.csv", tmp / "a", "--ref-mhz", 2000)
        assert refused.returncode == 2 and "noclock.csv line 2: a time of 100.0 us without a clock" in refused.stderr, refused
        write(tmp / "old.csv", "direction,median_us,min_us,max_us\nforward,100,90,110\n")
        refused = run(tmp / "old.csv", tmp / "b", "--ref-mhz", 2000)
        assert refused.returncode == 2 and "no sm_clock_mhz column" in refused.stderr, refused
        refused = run(grid, tmp / "c", "--ref-mhz", 2000, "--replays", tmp / "missing")
        assert refused.returncode == 2 and "cells.csv: missing" in refused.stderr, refused
        write(replay / "cells.csv", "direction,position,measured_us,predicted_us,measured_sm_clock_mhz\nforward,0,300,280,0\n")
        refused = run(grid, tmp / "d", "--ref-mhz", 2000, "--replays", replay)
        assert refused.returncode == 2 and "cells.csv line 2: a time of 300.0 us without a clock" in refused.stderr, refused
        assert run(grid, tmp / "e", "--ref-mhz", 0).returncode == 2
    print("normalize_calibration_clock: ok")


if __name__ == "__main__":
    main()
