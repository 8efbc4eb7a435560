#!/usr/bin/env python3
"""The A100 kernel cost model is the derivation docs/reference_figures.md section 4 describes.

Recomputes every coefficient of the `source: published` calibration of configs/gpus/a100-40gb.yaml
from the inputs that section cites (our H200 calibration, FlashAttention-2's published A100 and
measured H200 rates, HBM bandwidths, the matmul figures) and checks that the config holds exactly these
values (4 significant digits) and that the section's table shows them.

    a100_published_model_test.py --source REPO

Exit 0 when config, page and derivation agree; 1 listing every difference; 2 on bad input.
"""
import argparse
import math
import pathlib
import re
import sys

import yaml

# Inputs, as docs/reference_figures.md section 4 cites them.
FA2_A100_FORWARD_TFLOPS = 230.0          # FlashAttention-2, section 4.1: up to 230 TFLOP/s (73%)
FA2_A100_BACKWARD_TFLOPS = 0.63 * 312.0  # FlashAttention-2, introduction: backward up to 63% of 312
FA2_H200_FORWARD_TFLOPS = 344.0          # docs/PERF.md: SDPA flash, dense causal 32K, same run
FA2_H200_BACKWARD_TFLOPS = 311.0
HBM_H200_GBYTES_PER_S = 4800.0           # datasheets
HBM_A100_GBYTES_PER_S = 1555.0
H200 = {                                 # docs/calibration.md: shipped H200 calibration (kernel build c96fff5c)
    (64, 64, 128): {
        "forward": {"launch_us": 10.53, "per_list_us": 0.02262, "per_tile_us": 0.01031, "per_vertical_chunk_us": 0.009708},
        "backward": {"launch_us": 219.3, "per_list_us": 0.01606, "per_tile_us": 0.02495, "per_vertical_chunk_us": 0.04783},
    },
    (128, 128, 128): {
        "forward": {"launch_us": 15.54, "per_list_us": 0.0394, "per_tile_us": 0.03122, "per_vertical_chunk_us": 0.03205},
        "backward": {"launch_us": 216.6, "per_list_us": 0.02364, "per_tile_us": 0.0968, "per_vertical_chunk_us": 0.1986},
    },
}
MAMF_A100_TFLOPS = 267.9                 # stas00/ml-engineering, Maximum Achievable Matmul FLOPS table
MAMF_H100_TFLOPS = 792.1
OURS_H100_8192_TFLOPS = 784.1            # docs/calibration.md: our H100 bf16 8192^3 matmul
PEAK_A100_TFLOPS = 312.0


def round4(value):
    return float(f"{value:.4g}")


def derive():
    """The coefficients per (block_q, block_k, head_dim) and direction, and the GEMM efficiency."""
    tensor = {"forward": FA2_H200_FORWARD_TFLOPS / FA2_A100_FORWARD_TFLOPS,
              "backward": FA2_H200_BACKWARD_TFLOPS / FA2_A100_BACKWARD_TFLOPS}
    memory = HBM_H200_GBYTES_PER_S / HBM_A100_GBYTES_PER_S
    shapes = {}
    for shape, directions in H200.items():
        shapes[shape] = {}
        for direction, h in directions.items():
            tile = h["per_tile_us"] * tensor[direction]
            if direction == "forward":  # a gathered chunk does a tile's tensor-core work
                chunk = h["per_vertical_chunk_us"] * tensor[direction]
            else:  # a tile's work plus the fp32 atomics that add the chunk's dK and dV
                chunk = tile + (h["per_vertical_chunk_us"] - h["per_tile_us"]) * memory
            shapes[shape][direction] = {"launch_us": h["launch_us"], "per_list_us": h["per_list_us"] * memory,
                                        "per_tile_us": tile, "per_vertical_chunk_us": chunk}
    gemm = MAMF_A100_TFLOPS / PEAK_A100_TFLOPS * OURS_H100_8192_TFLOPS / MAMF_H100_TFLOPS
    rounded = {shape: {d: {k: round4(v) for k, v in c.items()} for d, c in dirs.items()} for shape, dirs in shapes.items()}
    return rounded, round4(gemm)


def config_shapes(calibration):
    out = {}
    for entry in calibration["shapes"]:
        key = (entry["block_q"], entry["block_k"], entry["head_dim"])
        out[key] = {d: {k: float(v) for k, v in entry[d].items()} for d in ("forward", "backward")}
    return out


def page_rows(page):
    """(shape, direction) -> coefficients from the table of docs/reference_figures.md section 4."""
    section = page.split("## 4. ", 1)[1] if "## 4. " in page else ""
    rows = {}
    pattern = re.compile(r"^\| (\d+) x (\d+) x (\d+) \| (forward|backward) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", re.M)
    for m in pattern.finditer(section):
        shape = tuple(int(m.group(i)) for i in (1, 2, 3))
        rows[(shape, m.group(4))] = dict(zip(("launch_us", "per_list_us", "per_tile_us", "per_vertical_chunk_us"),
                                             (float(m.group(i)) for i in (5, 6, 7, 8))))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, type=pathlib.Path)
    args = parser.parse_args()
    config_path = args.source / "configs/gpus/a100-40gb.yaml"
    page_path = args.source / "docs/reference_figures.md"
    try:
        calibration = yaml.safe_load(config_path.read_text(encoding="utf-8"))["calibration"]
        page = page_path.read_text(encoding="utf-8")
    except (OSError, KeyError, TypeError, yaml.YAMLError) as error:
        sys.stderr.write(f"cannot read the A100 calibration or docs/reference_figures.md: {error!r}\n")
        return 2
    shapes, gemm = derive()
    problems = []
    if calibration.get("source") != "published":
        problems.append(f"{config_path}: calibration.source is {calibration.get('source')!r}, expected published")
    if not math.isclose(float(calibration.get("gemm_efficiency", 0)), gemm, rel_tol=0, abs_tol=0):
        problems.append(f"gemm_efficiency: config {calibration.get('gemm_efficiency')}, derived {gemm}")
    configured = config_shapes(calibration)
    rows = page_rows(page)
    if set(configured) != set(shapes):
        problems.append(f"config shapes {sorted(configured)}, derived {sorted(shapes)}")
    for shape, directions in shapes.items():
        for direction, coefficients in directions.items():
            for name, value in coefficients.items():
                have = configured.get(shape, {}).get(direction, {}).get(name)
                if have != value:
                    problems.append(f"{shape} {direction} {name}: config {have}, derived {value}")
                shown = rows.get((shape, direction), {}).get(name)
                if shown != value:
                    problems.append(f"{shape} {direction} {name}: docs/reference_figures.md section 4 shows {shown}, derived {value}")
    if problems:
        print("the A100 cost model differs from its derivation (docs/reference_figures.md section 4):")
        print("\n".join("  " + p for p in problems))
        return 1
    print(f"configs/gpus/a100-40gb.yaml and docs/reference_figures.md section 4 hold the derived A100 model ({len(shapes)} shapes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
