#!/usr/bin/env python3
"""Tests measure/validation/validation_matrix_table.py on hand-made validation.json files: the
per-layer, pooled cell and busiest-rank statistics against hand-derived values, stale cases left out, the
commits named (a "+modified" mark kept), and --check accepting the table verbatim and refusing a page
without it."""
import json
import pathlib
import subprocess
import sys
import tempfile

SCRIPT = pathlib.Path(__file__).resolve().parents[3] / "measure/validation/validation_matrix_table.py"


def doc(fwd_error, bwd_error, cells_measured, cells_predicted, stale=False, commit="abcdef0123"):
    def pass_json(error):
        return {"error": error, "measured_ms": 10.0, "predicted_ms": 10.0 * (1 + error),
                "measured_compute_us": cells_measured, "predicted_compute_us": cells_predicted,
                "compute_error": {"median_abs": 0.0}}
    d = {"forward": pass_json(fwd_error), "backward": pass_json(bwd_error), "dense": False, "layout": "zigzag",
         "seq_len_tokens": 131072, "ranks": 2, "ring_levels": [2], "iterations": 3, "layer": 12,
         "cost_source": "calibration (test)",
         "provenance": {"gpus": ["GPU X"], "cuda_runtime": 13000, "commit": commit},
         "targets": {"layer_time_median_abs_error": 0.03, "layer_time_worst_abs_error": 0.06,
                     "cell_time_median_abs_error": 0.05}}
    if stale:  # as `validate` writes a comparison with a calibration of another kernel build
        d["calibration"] = {"stale": True}
        d["comparison_meaningful"] = False
    return d


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp) / "matrix"
        cases = {
            "m01-3b-sparse-zigzag-128k-w2-flat-b64-r95-hp1": doc(0.01, -0.02, [100, 200, 0, 400], [101, 190, 0, 400]),
            "m02-7b-dense-zigzag-128k-w2-flat-b128-hp2": doc(0.04, 0.05, [100, 100, 100, 100], [110, 100, 100, 100],
                                                             commit="0123456789ab+modified"),
            "m03-8b-sparse-zigzag-128k-w2-flat-b64-r90-hp1": doc(0.5, 0.5, [1, 1, 1, 1], [9, 9, 9, 9], stale=True),
        }
        for name, d in cases.items():
            (root / "gpu-x" / name).mkdir(parents=True)
            (root / "gpu-x" / name / "validation.json").write_text(json.dumps(d))
        result = run(root)
        assert result.returncode == 0, result.stderr
        text = result.stdout
        # Layer errors of the counted cases: 0.01 0.02 0.04 0.05 -> median 3.0%, worst 5.0%.
        assert "2 cases, per-layer attention time (fwd and bwd) median |error| 3.0% (target 3.0%: met)" in text, text
        assert "worst 5.0% (target 6.0%: met)" in text, text
        # Cells: case 1 (fwd and bwd alike) 0.01, 0.05, 0.0 (the 0/0 cell skipped) x 2 -> 6 cells;
        # case 2: 0.1, 0, 0, 0 x 2 -> 8 cells; 14 cells, median of the sorted magnitudes = 0.0.
        assert "14 cells: median |error| 0.0% (target 5.0%: met)" in text, text
        # Busiest rank (cells [rank x 2 + step]): case 1 measured 300 / 400 per rank, predicted
        # 291 / 400 -> 0; case 2 measured 200 / 200, predicted 210 / 200 -> 5%; fwd and bwd alike:
        # 0, 0, 0.05, 0.05 -> median 2.5%, worst 5.0%.
        assert "busiest rank's kernel time (fwd and bwd) median |error| 2.5%, worst 5.0% (m02 fwd)" in text, text
        assert "(stale calibration: not counted)" in text and "1 case(s) predicted from a calibration" in text, text
        assert "| Llama-3.1-8B |" in text and "| 128 | - | 2 |" in text, text
        # Commits shortened to 7 characters; a tree that differed from its commit keeps its mark.
        assert "commit(s) 0123456+modified, abcdef0;" in text, text
        page = pathlib.Path(tmp) / "page.md"
        page.write_text("# Page\n\n" + text + "\nmore\n")
        assert run(root, "--check", page).returncode == 0
        page.write_text("# Page\n\n" + text.replace("3.0%", "2.9%") + "\n")
        assert run(root, "--check", page).returncode == 1
        assert run(pathlib.Path(tmp) / "empty").returncode == 2
    print("validation_matrix_table: ok")


if __name__ == "__main__":
    main()
