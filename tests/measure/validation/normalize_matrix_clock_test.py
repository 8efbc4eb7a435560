#!/usr/bin/env python3
"""Tests measure/validation/normalize_matrix_clock.py: every cell's time scaled by its clock over
the reference (given, or the median clock of the cells that launched), empty cells untouched, the
rest of the file kept, a replay without clocks or a cell with a time but no clock refused (exit 2)."""
import json
import pathlib
import subprocess
import sys
import tempfile

SCRIPT = pathlib.Path(__file__).resolve().parents[3] / "measure/validation/normalize_matrix_clock.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        case = tmp / "src" / "gpu-x" / "m01-x"
        case.mkdir(parents=True)
        doc = {"forward": {"measured_compute_us": [100.0, 0.0, 300.0], "measured_sm_clock_mhz": [1800.0, 0.0, 2000.0],
                           "predicted_compute_us": [1.0, 0.0, 1.0]},
               "backward": {"measured_compute_us": [50.0], "measured_sm_clock_mhz": [1900.0]}, "ranks": 7}
        (case / "validation.json").write_text(json.dumps(doc))
        result = run(tmp / "src", tmp / "a", "--ref-mhz", 2000)
        assert result.returncode == 0, result.stderr
        out = json.loads((tmp / "a" / "gpu-x" / "m01-x" / "validation.json").read_text())
        assert out["forward"]["measured_compute_us"] == [90.0, 0.0, 300.0], out
        assert out["forward"]["measured_sm_clock_mhz"] == [2000.0, 0.0, 2000.0], out
        assert out["backward"]["measured_compute_us"] == [47.5], out
        assert out["ranks"] == 7 and out["forward"]["predicted_compute_us"] == [1.0, 0.0, 1.0], out
        # Default reference: the median of 1800, 2000, 1900 = 1900.
        result = run(tmp / "src", tmp / "b")
        assert result.returncode == 0 and "to 1900 MHz" in result.stdout, result
        out = json.loads((tmp / "b" / "gpu-x" / "m01-x" / "validation.json").read_text())
        assert abs(out["forward"]["measured_compute_us"][2] - 300.0 * 2000 / 1900) < 1e-9, out
        # A cell with a time but no clock would stay in microseconds among cycles: refused, nothing written.
        doc["forward"]["measured_sm_clock_mhz"] = [1800.0, 0.0, 0.0]
        (case / "validation.json").write_text(json.dumps(doc))
        refused = run(tmp / "src", tmp / "e", "--ref-mhz", 2000)
        assert refused.returncode == 2 and "a time of 300.0 us without a clock" in refused.stderr, refused
        assert not (tmp / "e").exists(), "nothing written"
        del doc["backward"]["measured_sm_clock_mhz"]
        (case / "validation.json").write_text(json.dumps(doc))
        refused = run(tmp / "src", tmp / "c")
        assert refused.returncode == 2 and "no measured_sm_clock_mhz in backward" in refused.stderr, refused
        assert run(tmp / "none", tmp / "d").returncode == 2
    print("normalize_matrix_clock: ok")


if __name__ == "__main__":
    main()
