#!/usr/bin/env python3
"""Tests measure/device/gpu_clock_summary.py on hand-made nvidia-smi samples: each case's samples
are those inside its start and end, the median and lowest clock, the largest power and the share
of power-capped samples (reason bits 0x4 and 0x80, not 0x1) against hand-derived values; a header
or an unreadable line is skipped."""
import pathlib
import subprocess
import sys
import tempfile
import time

SCRIPT = pathlib.Path(__file__).resolve().parents[3] / "measure/device/gpu_clock_summary.py"


def main():
    base = time.mktime(time.strptime("2026/01/02 03:04:05", "%Y/%m/%d %H:%M:%S"))
    samples = [  # seconds after base, MHz, W, reasons
        (0.0, 1980, 100.0, 0x1), (0.5, 1900, 650.0, 0x4), (1.0, 1700, 700.0, 0x4), (1.5, 1800, 690.0, 0x0),
        (2.0, 1500, 705.0, 0x80), (2.5, 1980, 300.0, 0x0),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        clocks = pathlib.Path(tmp) / "clocks.csv"
        lines = ["timestamp, clocks.sm [MHz], power.draw [W], temperature.gpu, clocks_event_reasons.active"]
        for s, mhz, w, r in samples:
            stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(base + int(s))) + f".{int(s * 10) % 10}00"
            lines.append(f"{stamp}, {mhz}, {w:.2f}, 60, 0x{r:016X}")
        lines.append("garbage line")
        clocks.write_text("\n".join(lines) + "\n")
        times = pathlib.Path(tmp) / "times.tsv"
        times.write_text(f"a\t{base + 0.25}\t{base + 1.75}\nb\t{base + 1.9}\t{base + 2.6}\nc\t{base + 9}\t{base + 10}\n")
        result = subprocess.run([sys.executable, str(SCRIPT), str(clocks), str(times)], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        out = result.stdout.splitlines()
        # a: 1900, 1700, 1800 -> median 1800, lowest 1700, power 700, capped 2 of 3 (67%).
        assert out[0] == "a: SM clock median 1800 MHz, lowest 1700 MHz, power up to 700 W, power-capped 67% of 3 samples", out
        # b: 1500 (0x80, the hardware brake counts as capped), 1980 -> median 1740, 50%.
        assert out[1] == "b: SM clock median 1740 MHz, lowest 1500 MHz, power up to 705 W, power-capped 50% of 2 samples", out
        assert out[2] == "c: no clock samples", out
        # all cases: the 5 samples of a and b -> median 1800, capped 3 of 5.
        assert out[3] == "all cases: SM clock median 1800 MHz, lowest 1500 MHz, power up to 705 W, power-capped 60% of 5 samples", out
    print("gpu_clock_summary: ok")


if __name__ == "__main__":
    main()
