#!/usr/bin/env python3
"""Tests measure/calibration/normalize_calibration_clock.py: grid times (median, min, max) and
replayed cells' times scaled by their clock over the reference, cells without work untouched,
every other column and key kept; launches or replays without clocks, values that are not numbers,
broken validation.json files, duplicate replays and a destination that is not fresh refused (exit
2) before anything is written."""
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
        write(grid, "direction,median_us,min_us,max_us,tiles,key_pass_us,sm_clock_mhz\n"
                    "forward,100,90,110,64,-1,1800\nbackward,40,40,40,8,20,2000\n")
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
        assert [float(r["key_pass_us"]) for r in g] == [-1.0, 20.0], g  # -1: not measured
        for folder in ("replays", "backward-replays"):
            c = rows(tmp / "out" / folder / "c01-x" / "cells.csv")
            assert [float(r["measured_us"]) for r in c] == [285.0, 0.0, 40.0], c
            assert [float(r["measured_sm_clock_mhz"]) for r in c] == [2000.0, 0.0, 2000.0], c
            assert c[0]["predicted_us"] == "280", c
            out = json.loads((tmp / "out" / folder / "c01-x" / "validation.json").read_text())
            assert out["forward"]["measured_compute_us"] == [285.0, 0.0], out
            assert out["backward"]["measured_compute_us"] == [40.0] and out["plan"] == "c01-x", out

        # Refused before writing: a destination that holds files (the last run's), a second replay
        # of one name, a validation.json that is not a replay's, clocks of another length.
        refused = run(grid, tmp / "out", "--ref-mhz", 2000)
        assert refused.returncode == 2 and "exists and is not an empty directory" in refused.stderr, refused
        refused = run(grid, tmp / "f", "--ref-mhz", 2000, "--replays", replay, replay)
        assert refused.returncode == 2 and "a second replay named c01-x in --replays" in refused.stderr, refused
        assert not (tmp / "f").exists(), "nothing written"
        broken = tmp / "c02-y"
        write(broken / "cells.csv", (replay / "cells.csv").read_text())
        write(broken / "validation.json", "{\"forward\": {}}")
        refused = run(grid, tmp / "g", "--ref-mhz", 2000, "--replays", broken)
        assert refused.returncode == 2 and "not a replay's validation.json" in refused.stderr, refused
        write(broken / "validation.json", json.dumps({"forward": {"measured_compute_us": [1.0, 2.0],
                                                                  "measured_sm_clock_mhz": [1900.0]},
                                                      "backward": doc["backward"]}))
        refused = run(grid, tmp / "h", "--ref-mhz", 2000, "--replays", broken)
        assert refused.returncode == 2 and "not lists of one length" in refused.stderr, refused
        assert not any((tmp / name).exists() for name in ("g", "h")), "nothing written"

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
        write(replay / "cells.csv", "direction,position,measured_us,predicted_us,measured_sm_clock_mhz\nforward,0,300,280,\n")
        refused = run(grid, tmp / "d2", "--ref-mhz", 2000, "--replays", replay)
        assert refused.returncode == 2 and "line 2: a time of 300.0 us without a clock" in refused.stderr, refused
        write(replay / "cells.csv", "direction,position,measured_us,predicted_us,measured_sm_clock_mhz\nforward,0,fast,280,1900\n")
        refused = run(grid, tmp / "d3", "--ref-mhz", 2000, "--replays", replay)
        assert refused.returncode == 2 and "line 2: not a number: 'fast'" in refused.stderr, refused
        assert run(grid, tmp / "e", "--ref-mhz", 0).returncode == 2
    print("normalize_calibration_clock: ok")


if __name__ == "__main__":
    main()
