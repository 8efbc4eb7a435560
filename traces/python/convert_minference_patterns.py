#!/usr/bin/python3
"""Converts a MInference offline pattern-search result into a sparsering sparsity prior YAML.

Input: a JSON list over layers of {head: [pattern_type, vertical_budget, slash_budget, score]}
(the `*_best_pattern.json` files MInference ships for its supported models). Output: the YAML
read by traces/sparsity_prior.hpp (configs/sparsity/<name>.yaml). Only the facts the synthesizer
uses are kept: per layer and query head, the vertical budget (key columns), the slash budget
(diagonals) and the search score.

Usage:
  /usr/bin/python3 traces/python/convert_minference_patterns.py PATTERN.json NAME MODEL > configs/sparsity/NAME.yaml
The shipped priors were made with the commands listed in configs/sparsity/README.md.
"""
import json
import os
import sys


def convert(path, name, model):
    with open(path, "r", encoding="utf-8") as f:
        layers = json.load(f)
    if not isinstance(layers, list) or not layers:
        raise SystemExit(f"{path}: expected a non-empty list over layers")
    heads = len(layers[0])
    rows = []
    fractional = True
    for li, layer in enumerate(layers):
        if len(layer) != heads:
            raise SystemExit(f"{path}: layer {li} has {len(layer)} heads, layer 0 has {heads}")
        row = []
        for h in range(heads):
            kind, vertical, slash, score = layer[str(h)]
            if kind != "vertical_and_slash":
                raise SystemExit(f"{path}: layer {li} head {h} has pattern {kind!r}, not vertical_and_slash")
            # Recall scores come out of float32 sums and may exceed 1 by rounding (1.00002).
            if not (isinstance(score, float) and -1e-3 <= score <= 1.0 + 1e-3):
                fractional = False
            row.append((int(vertical), int(slash), score))
        rows.append(row)
    file_name = os.path.basename(path)
    out = []
    out.append(f"# Sparsity prior for {model}: per-head vertical/slash budgets from MInference's offline")
    out.append("# pattern search (microsoft/MInference), file")
    out.append(f"# {file_name}.")
    out.append("# Converted by traces/python/convert_minference_patterns.py; read by traces/sparsity_prior.hpp.")
    out.append("# budgets: per layer (outer list), per query head (inner list):")
    out.append("#   [vertical_budget (kept key columns), slash_budget (kept diagonals), score]")
    if fractional:
        out.append("# score: the attention recall the search measured for that head's budget (0..1;\n# float32 sums slightly above 1 are clamped to 1).")
    else:
        out.append("# score: the search's raw score; in this file it is not a fraction and its scale is not")
        out.append("# documented upstream, so it is kept for reference only.")
    out.append(f"name: {name}")
    out.append(f"model: {model}")
    out.append(f"source: \"MInference offline pattern search, {file_name}\"")
    out.append(f"score_kind: {'recall' if fractional else 'raw'}")
    out.append(f"layers: {len(rows)}")
    out.append(f"q_heads: {heads}")
    out.append("budgets:")
    for row in rows:
        cells = []
        for vertical, slash, score in row:
            score_text = f"{min(max(score, 0.0), 1.0):.4f}" if fractional else str(int(score))
            cells.append(f"[{vertical}, {slash}, {score_text}]")
        out.append("  - [" + ", ".join(cells) + "]")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    sys.stdout.write(convert(sys.argv[1], sys.argv[2], sys.argv[3]))
