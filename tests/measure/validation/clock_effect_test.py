#!/usr/bin/env python3
"""Tests measure/validation/clock_effect.py on hand-made validation.json files: the clock
percentiles, the spread of identical-work groups in time and in cycles, and the clock bands
against hand-derived values; small or short groups left out; a calibration's clocks (--grid) per
shape and direction; a replay or a calibration without clocks refused (exit 2); --check."""
import json
import pathlib
import subprocess
import sys
import tempfile

SCRIPT = pathlib.Path(__file__).resolve().parents[3] / "measure/validation/clock_effect.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        # Forward: three cells of one work (predicted 1000 us) at 2000, 1800 and 1600 MHz taking
        # 1000, 1111.1 and 1250 us: the same 2e6 cycles each; a cell of other work (500 us at 1750 MHz,
        # measured 550), and an empty cell (0, no clock). Backward: 3 cells of 100 us (too short for a group).
        fwd = {"measured_compute_us": [1000.0, 1000.0 * 2000 / 1800, 1250.0, 550.0, 0.0],
               "predicted_compute_us": [1000.0, 1000.0, 1000.0, 500.0, 0.0],
               "measured_sm_clock_mhz": [2000.0, 1800.0, 1600.0, 1750.0, 0.0]}
        bwd = {"measured_compute_us": [100.0, 110.0, 120.0], "predicted_compute_us": [100.0, 100.0, 100.0],
               "measured_sm_clock_mhz": [1960.0, 1960.0, 1960.0]}
        case = tmp / "m" / "gpu-x" / "m01-x"
        case.mkdir(parents=True)
        (case / "validation.json").write_text(json.dumps({"forward": fwd, "backward": bwd}))
        result = run(tmp / "m")
        assert result.returncode == 0, result.stderr
        text = result.stdout
        # 7 clocks sorted: 1600 1750 1800 1960 1960 1960 2000; 1st percentile 1600 + 0.06 x 150 = 1609,
        # 10th 1600 + 0.6 x 150 = 1690, median 1960, 90th 1960 + 0.4 x 40 = 1976, 99th 1960 + 0.94 x 40 = 1998.
        assert "gpu-x: 7 cells with a clock; SM clock percentiles 1/10/50/90/99: 1609 / 1690 / 1960 / 1976 / 1998 MHz." in text, text
        # Times 1000, 1111.1, 1250: mean 1120.4, population sd 102.3 -> 9.13%; cycles all 2e6 -> 0.00%.
        assert ("gpu-x forward: 1 groups of identical work (3+ cells of 200 us+): spread of the time median 9.13%, "
                "mean 9.13%; of the cycles median 0.00%, mean 0.00%.") in text, text
        assert "gpu-x backward" not in text, text
        # Bands: 1600 -> < 1700 (1.25); 1750 (1.1), 1800 (1.111) -> 1700-1799 gets 1750 only, 1800-1899 gets 1800;
        # 1960 x 3 and 2000 -> >= 1950 (1.0, 1.1, 1.2, 1.0: median 1.05).
        assert "| < 1700 | 1 | 1.250 |" in text, text
        assert "| 1700-1799 | 1 | 1.100 |" in text, text
        assert "| 1800-1899 | 1 | 1.111 |" in text, text
        assert "| 1900-1949 | 0 | - |" in text, text
        assert "| >= 1950 | 4 | 1.050 |" in text, text
        page = tmp / "page.md"
        page.write_text("x\n" + text + "y\n")
        assert run(tmp / "m", "--check", page).returncode == 0
        page.write_text(text.replace("9.13%", "9.12%"))
        assert run(tmp / "m", "--check", page).returncode == 1
        # A calibration's launches: two forward 64x64x128 (one of 1 ms or more) and one backward.
        grid = tmp / "kernels.csv"
        grid.write_text("direction,block_q,block_k,head_dim,median_us,sm_clock_mhz\n"
                        "forward,64,64,128,1500,1900\nforward,64,64,128,20,1980\nbackward,64,64,128,30,1950\n")
        with_grid = run(tmp / "m", "--grid", grid)
        assert with_grid.returncode == 0, with_grid.stderr
        # Clocks 1900 1950 1980: 1st percentile 1900 + 0.02 x 50 = 1901, 10th 1910, median 1950,
        # 90th 1950 + 0.8 x 30 = 1974, 99th 1979.4 -> 1979.
        assert "kernels.csv: 3 calibration launches; SM clock percentiles 1/10/50/90/99: 1901 / 1910 / 1950 / 1974 / 1979 MHz." in with_grid.stdout, with_grid.stdout
        assert "kernels.csv 64x64x128 forward: median clock 1940 MHz over 2 launches; 1 of 1 ms or more: median 1900, lowest 1900 MHz." in with_grid.stdout, with_grid.stdout
        assert "kernels.csv 64x64x128 backward: median clock 1950 MHz over 1 launches; none of 1 ms or more." in with_grid.stdout, with_grid.stdout
        grid.write_text("direction,block_q,block_k,head_dim,median_us\nforward,64,64,128,1500\n")
        assert run(tmp / "m", "--grid", grid).returncode == 2
        assert run(tmp / "m", "--grid", tmp / "none.csv").returncode == 2
        del fwd["measured_sm_clock_mhz"]
        (case / "validation.json").write_text(json.dumps({"forward": fwd, "backward": bwd}))
        refused = run(tmp / "m")
        assert refused.returncode == 2 and "no measured_sm_clock_mhz" in refused.stderr, refused
        assert run(tmp / "empty").returncode == 2
    print("clock_effect: ok")


if __name__ == "__main__":
    main()
