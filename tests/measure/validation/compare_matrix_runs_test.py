#!/usr/bin/env python3
"""Tests measure/validation/compare_matrix_runs.py on hand-made validation.json files: the
run-to-run differences and the per-layer errors of each run and of their mean against
hand-derived values, the rows listed above --over with the clocks of the second run, a case
predicted differently by the two runs refused, and --check."""
import json
import pathlib
import subprocess
import sys
import tempfile

SCRIPT = pathlib.Path(__file__).resolve().parents[3] / "measure/validation/compare_matrix_runs.py"


def doc(fwd, bwd):
    """fwd, bwd: (measured ms, predicted ms)."""
    return {d: {"measured_ms": m, "predicted_ms": p} for d, (m, p) in (("forward", fwd), ("backward", bwd))}


def write(root, cases):
    for name, d in cases.items():
        (root / "gpu-x" / name).mkdir(parents=True)
        (root / "gpu-x" / name / "validation.json").write_text(json.dumps(d))


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        write(tmp / "a", {"m01-x": doc((10.0, 10.0), (20.0, 21.0)), "m02-y": doc((10.0, 9.0), (10.0, 10.0)),
                          "m03-only-first": doc((1.0, 1.0), (1.0, 1.0))})
        write(tmp / "b", {"m01-x": doc((10.0, 10.0), (20.0, 21.0)), "m02-y": doc((11.0, 9.0), (10.0, 10.0))})
        clocks = tmp / "clocks.txt"
        clocks.write_text("m02-y: SM clock median 1800 MHz, lowest 1500 MHz, power up to 700 W, power-capped 90% of 10 samples\n")
        result = run(tmp / "a", tmp / "b", "--clocks", clocks)
        assert result.returncode == 0, result.stderr
        text = result.stdout
        # Differences: 0, 0, +10%, 0 -> median 0.0%, largest 10.0%.
        assert "2 cases in both runs; measured per-layer time, second run against the first: median |difference| 0.0%, largest 10.0%." in text, text
        # Errors, first run: 0, 5%, 10%, 0 -> median 2.5%, worst 10.0%; second: 0, 5%, 9/11-1 = 18.2%, 0;
        # mean: m02 fwd 9/10.5 - 1 = -14.3%.
        assert "against the first run: median |error| 2.5%, worst 10.0%." in text, text
        assert "against the second run: median |error| 2.5%, worst 18.2%." in text, text
        assert "against the mean of the two runs: median |error| 2.5%, worst 14.3%." in text, text
        # Only m02's forward exceeds 5%; m01's backward (5.0%) does not.
        assert "| m02-y | forward | 10.00 / 11.00 (+10.0%) | 9.00 | -10.0% / -18.2% / -14.3% | 1800 MHz (90% capped) |" in text, text
        assert "m01-x |" not in text and "m03" not in text, text
        page = tmp / "page.md"
        page.write_text("intro\n\n" + text + "\nmore\n")
        assert run(tmp / "a", tmp / "b", "--clocks", clocks, "--check", page).returncode == 0
        page.write_text(text.replace("14.3%", "14.2%"))
        assert run(tmp / "a", tmp / "b", "--clocks", clocks, "--check", page).returncode == 1
        write(tmp / "c", {"m01-x": doc((10.0, 12.0), (20.0, 21.0))})
        refused = run(tmp / "a", tmp / "c")
        assert refused.returncode != 0 and "predicted differently" in refused.stderr + refused.stdout, refused
        assert run(tmp / "a", tmp / "empty").returncode == 2
        assert run(tmp / "a", tmp / "b", "--clocks", tmp / "none.txt").returncode == 2
    print("compare_matrix_runs: ok")


if __name__ == "__main__":
    main()
