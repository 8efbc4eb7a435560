#!/usr/bin/env python3
"""The validation matrix's table (docs/VALIDATION.md), computed from `validation.json` files only.

    validation_matrix_table.py ROOT [--check DOC]

ROOT holds one folder per GPU kind, each holding one folder per case with its validation.json
(docs/validation/matrix/<kind>/<case>/validation.json, as measure/device/run_matrix_on_device.sh
writes them). Prints, per GPU kind, one row per case and the summary against the targets the
JSON files state: per-layer attention time (median and worst |error| over every case, forward
and backward), the (rank, step) kernel times pooled over every cell of every case, and the
busiest rank's kernel time per case and pass (the largest per-rank sum of measured kernel times
against the largest predicted one: the layer time of a ring whose hops are exposed is set by its
links, so it can hide kernel error that this figure shows). Cases whose prediction rests on a
calibration of another kernel build are shown and left out of the summary. With --check DOC, exits 1 unless DOC contains the printed table verbatim (the ctest
`validation_matrix_table` keeps the page generated). Case names carry what the JSON does not
(model, block, recall, head parallelism): m<id>-<model>-<attention>-<layout>-<N>k-w<W>-<ring>-b<block>[-r<recall>]-hp<h>.
"""
import argparse
import json
import pathlib
import statistics
import sys

from page_text import print_or_check

MODELS = {"3b": "Qwen2.5-3B", "7b": "Qwen2.5-7B", "8b": "Llama-3.1-8B"}


def case_fields(name):
    parts = name.split("-")
    fields = {"model": MODELS.get(parts[1], parts[1]), "block": "?", "recall": "-", "hp": "?"}
    for p in parts:
        if p.startswith("b") and p[1:].isdigit():
            fields["block"] = p[1:]
        elif p.startswith("r") and p[1:].isdigit():
            fields["recall"] = f"0.{p[1:]}"
        elif p.startswith("hp") and p[2:].isdigit():
            fields["hp"] = p[2:]
    return fields


def cell_errors(pass_json):
    errors = []
    for m, p in zip(pass_json["measured_compute_us"], pass_json["predicted_compute_us"]):
        if m == 0 and p == 0:
            continue
        errors.append(abs((p - m) / m) if m > 0 else 1.0)
    return errors


def busiest_rank_error(pass_json, ranks):
    """Relative error of the largest per-rank kernel time sum (cells are [rank x W + step])."""
    def busiest(cells):
        return max(sum(cells[r * ranks:(r + 1) * ranks]) for r in range(len(cells) // ranks))
    measured = busiest(pass_json["measured_compute_us"])
    predicted = busiest(pass_json["predicted_compute_us"])
    if measured == 0:
        return 0.0 if predicted == 0 else 1.0
    return abs(predicted - measured) / measured


def not_meaningful(doc):
    calibration = doc.get("calibration", {})
    return doc.get("comparison_meaningful") is False or calibration.get("stale") is True


def short_commit(commit):
    """The commit's first 7 characters, keeping a "+modified" mark."""
    head, mark, rest = commit.partition("+")
    return head[:7] + mark + rest


def pct(x, signed=False):
    return f"{100 * x:+.1f}%" if signed else f"{100 * x:.1f}%"


def predicted_again(docs):
    """", predicted again at commit(s) ..." when the predictions were made again from the recorded
    measurements (validate --measured), else nothing."""
    again = sorted({short_commit(d["provenance"]["predicted_again"]["commit"]) for d in docs
                    if "predicted_again" in d["provenance"]})
    return f", predicted again at commit(s) {', '.join(again)}" if again else ""


def kind_table(kind, docs):
    lines = [f"#### {kind}", ""]
    first = docs[0]
    gpus = sorted(set(first["provenance"]["gpus"]))
    commits = sorted({short_commit(d["provenance"]["commit"]) for d in docs})
    lines.append(f"GPU {', '.join(gpus)}; CUDA runtime {first['provenance']['cuda_runtime']}; commit(s) "
                 f"{', '.join(commits)}; {first['iterations']} timed iterations per kernel, layer {first['layer']}; "
                 f"costs: {first['cost_source']}" + predicted_again(docs) + ".")
    lines.append("")
    lines.append("| case | model | attention | layout | N | W (levels) | block | recall | hp | fwd meas / pred ms (err) "
                 "| bwd meas / pred ms (err) | cells fwd / bwd median \\|err\\| |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    layer_errors, cells, busiest, excluded = [], [], [], []
    for d in docs:
        f, b = d["forward"], d["backward"]
        c = case_fields(d["case"])
        flag = ""
        if not_meaningful(d):
            excluded.append(d["case"])
            flag = " (stale calibration: not counted)"
        else:
            layer_errors += [abs(f["error"]), abs(b["error"])]
            cells += cell_errors(f) + cell_errors(b)
            busiest += [(busiest_rank_error(f, d["ranks"]), d["case"].split("-")[0] + " fwd"),
                        (busiest_rank_error(b, d["ranks"]), d["case"].split("-")[0] + " bwd")]
        levels = "x".join(str(s) for s in d["ring_levels"])
        lines.append(
            f"| {d['case']}{flag} | {c['model']} | {'dense' if d['dense'] else 'sparse'} | {d['layout']} | "
            f"{d['seq_len_tokens'] // 1024}K | {d['ranks']} ({levels}) | {c['block']} | {c['recall']} | {c['hp']} | "
            f"{f['measured_ms']:.2f} / {f['predicted_ms']:.2f} ({pct(f['error'], True)}) | "
            f"{b['measured_ms']:.2f} / {b['predicted_ms']:.2f} ({pct(b['error'], True)}) | "
            f"{pct(f['compute_error']['median_abs'])} / {pct(b['compute_error']['median_abs'])} |")
    targets = first["targets"]
    lines.append("")
    if layer_errors:
        med, worst = statistics.median(layer_errors), max(layer_errors)
        med_t, worst_t = targets["layer_time_median_abs_error"], targets["layer_time_worst_abs_error"]
        cell_t = targets.get("cell_time_median_abs_error", 0.05)
        cell_med = statistics.median(cells) if cells else 0.0
        lines.append(
            f"{kind}: {len(docs) - len(excluded)} cases, per-layer attention time (fwd and bwd) median |error| {pct(med)} "
            f"(target {pct(med_t)}: {'met' if med <= med_t else 'MISSED'}), worst {pct(worst)} "
            f"(target {pct(worst_t)}: {'met' if worst <= worst_t else 'MISSED'}); (rank, step) kernel times, "
            f"{len(cells)} cells: median |error| {pct(cell_med)} (target {pct(cell_t)}: "
            f"{'met' if cell_med <= cell_t else 'MISSED'}).")
        worst_busiest = max(busiest)
        lines.append(
            f"{kind}: busiest rank's kernel time (fwd and bwd) median |error| "
            f"{pct(statistics.median(e for e, _ in busiest))}, worst {pct(worst_busiest[0])} ({worst_busiest[1]}).")
    if excluded:
        lines.append(f"{kind}: {len(excluded)} case(s) predicted from a calibration of another kernel build, not counted.")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=pathlib.Path)
    parser.add_argument("--check", type=pathlib.Path, help="exit 1 unless this file holds the table verbatim")
    args = parser.parse_args()
    kinds = sorted(p for p in args.root.iterdir() if p.is_dir()) if args.root.is_dir() else []
    out = []
    for kind in kinds:
        docs = [json.loads(p.read_text()) | {"case": p.parent.name} for p in sorted(kind.glob("*/validation.json"))]
        if docs:
            out += kind_table(kind.name, docs) + [""]
    if not out:
        print(f"no validation.json under {args.root}/<kind>/<case>/", file=sys.stderr)
        return 2
    text = "\n".join(out).rstrip() + "\n"
    return print_or_check(text, args.check, f"the table generated from {args.root}", f"python3 {sys.argv[0]} {args.root}")


if __name__ == "__main__":
    sys.exit(main())
