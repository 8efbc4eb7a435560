#!/usr/bin/env python3
"""The SM clock and power a GPU ran at while cases were replayed on it.

Reads the samples `nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,
clocks_event_reasons.active --format=csv,noheader,nounits -lms 100` wrote during a run, and the
cases' start and end times (tab-separated: name, start, end; seconds since the epoch), and prints
one line per case and one for the whole run: the median and lowest SM clock, the largest power
draw, and the share of samples whose clock was held down by the power cap (reason bit 0x4,
software power cap; 0x80 hardware power brake). Kernel times scale with the clock where they are
bound by the tensor cores, so a case replayed at a lower clock than its calibration runs slower
than predicted (docs/VALIDATION.md, "The power cap").

    gpu_clock_summary.py CLOCKS.csv CASE_TIMES.tsv
"""
import statistics
import sys
import time

POWER_CAP_BITS = 0x4 | 0x80


def samples(path):
    out = []
    with open(path) as f:
        for line in f:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) < 5:
                continue
            try:
                stamp, frac = parts[0].split(".") if "." in parts[0] else (parts[0], "0")
                when = time.mktime(time.strptime(stamp, "%Y/%m/%d %H:%M:%S")) + float("0." + frac)
                out.append((when, float(parts[1]), float(parts[2]), int(parts[4], 16)))
            except ValueError:
                continue  # a header or an unsupported field
    return out


def describe(name, rows):
    if not rows:
        return f"{name}: no clock samples"
    mhz = [r[1] for r in rows]
    capped = sum(1 for r in rows if r[3] & POWER_CAP_BITS) / len(rows)
    return (f"{name}: SM clock median {statistics.median(mhz):.0f} MHz, lowest {min(mhz):.0f} MHz, "
            f"power up to {max(r[2] for r in rows):.0f} W, power-capped {100 * capped:.0f}% of "
            f"{len(rows)} samples")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: gpu_clock_summary.py CLOCKS.csv CASE_TIMES.tsv")
    rows = samples(sys.argv[1])
    busy = []
    with open(sys.argv[2]) as f:
        for line in f:
            name, start, end = line.rstrip("\n").split("\t")
            mine = [r for r in rows if float(start) <= r[0] <= float(end)]
            busy += mine
            print(describe(name, mine))
    print(describe("all cases", busy))


if __name__ == "__main__":
    main()
