#!/usr/bin/python3
"""Fails when a notebook in notebooks/ carries outputs or execution counts: notebooks are committed
stripped (run notebooks/run_notebooks.sh to see them executed). ctest label cpu.
    outputs_stripped_test.py --source REPO
Also checks that each notebook is valid JSON in nbformat 4 with at least one code cell."""
import argparse
import json
import pathlib
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", required=True)
    args = parser.parse_args()
    notebooks = sorted((pathlib.Path(args.source) / "notebooks").glob("*.ipynb"))
    expected = {"traces.ipynb", "plans.ipynb", "validation.ipynb"}
    missing = expected - {p.name for p in notebooks}
    problems = [f"missing notebook {name}" for name in sorted(missing)]
    for path in notebooks:
        try:
            nb = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            problems.append(f"{path.name}: not valid JSON: {e}")
            continue
        if nb.get("nbformat") != 4:
            problems.append(f"{path.name}: nbformat must be 4, got {nb.get('nbformat')}")
        cells = nb.get("cells", [])
        if not any(c.get("cell_type") == "code" for c in cells):
            problems.append(f"{path.name}: has no code cell")
        for i, cell in enumerate(cells):
            if cell.get("cell_type") != "code":
                continue
            if cell.get("outputs"):
                problems.append(f"{path.name}: cell {i} has {len(cell['outputs'])} outputs (strip them before committing)")
            if cell.get("execution_count") is not None:
                problems.append(f"{path.name}: cell {i} has execution_count {cell['execution_count']}")
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"{len(notebooks)} notebooks checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
