#!/usr/bin/python3
"""Checks the numpy trace reader (traces/python/sparsering_trace.py) against the C++ side.

1. The C++ CLI writes a trace; Python reads it and recomputes, per (layer, head), the kept counts
   at two recall targets with the documented semantics (traces/recall.hpp); they must equal what
   `sparsering trace info --per-head --format json` reports.
2. The same for the shipped sample trace, plus its documented shape.
3. Malformed bytes raise ValueError naming the file.
Run by ctest (label cpu): python_reader_test.py --cli BUILD/cli/sparsering --source REPO
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def kept(mass, p, cap):
    """Recall prefix length of each (S, L, H) list of masses (pads have mass 0 and trail)."""
    cumulative = np.cumsum(mass.astype(np.float64), axis=-1)  # sequential, like the C++ sum
    total = cumulative[..., -1:]
    goal = p * total * (1.0 - 1e-6)
    # Smallest k with cumulative[k-1] >= goal: count the entries still below the goal, plus one.
    k = (cumulative < goal).sum(axis=-1) + 1
    k = np.where(total[..., 0] > 0, k, 0)
    return np.minimum(k, cap)


def check_against_cli(cli, path, trace, p, cap):
    info = json.loads(subprocess.run([cli, "trace", "info", path, "--recall", str(p), "--max-verticals", str(cap),
                                      "--max-slashes", str(cap), "--per-head", "--format", "json"],
                                     check=True, capture_output=True, text=True).stdout)
    kv = kept(trace.tensors["vertical.mass"], p, cap).mean(axis=0)  # (L, H), mean over samples
    ks = kept(trace.tensors["slash.mass"], p, cap).mean(axis=0)
    for head in info["heads"]:
        l, h = head["layer"], head["head"]
        assert abs(head["kept_verticals"] - kv[l, h]) < 1e-9, (path, p, l, h, head["kept_verticals"], kv[l, h])
        assert abs(head["kept_slashes"] - ks[l, h]) < 1e-9, (path, p, l, h, head["kept_slashes"], ks[l, h])
    s, layers, heads = trace.tensors["vertical.index"].shape[:3]
    assert info["trace"]["samples"] == s and info["trace"]["layers"] == layers and info["trace"]["heads"] == heads
    assert info["trace"]["seq_len_tokens"] == trace.tensors["sample.seq_len"].tolist()
    assert info["trace"]["model"] == trace.metadata["model"]
    assert len(info["heads"]) == layers * heads


def check_invariants(trace):
    index, mass = trace.tensors["vertical.index"], trace.tensors["vertical.mass"]
    assert index.dtype == np.int32 and mass.dtype == np.float32
    assert np.all(np.diff(mass, axis=-1) <= 0), "masses sorted descending"
    assert np.all(mass[index == -1] == 0) and np.all(index >= -1)
    assert np.all(mass.sum(axis=-1) <= 1.0 + 1e-3)
    seq_len = trace.tensors["sample.seq_len"]
    assert np.all(index < seq_len[:, None, None, None])
    assert np.all(trace.tensors["slash.offset"] < seq_len[:, None, None, None])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--source", required=True)
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(args.source, "traces", "python"))
    from sparsering_trace import parse_trace, read_trace

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.safetensors")
        subprocess.run([args.cli, "trace", "synth", "--model",
                        os.path.join(args.source, "tests/traces/data/models/tiny.yaml"), "--seq-len", "4K",
                        "--samples", "3", "--seed", "5", "--vertical-slots", "80", "--slash-slots", "100",
                        "--out", path], check=True, capture_output=True)
        trace = read_trace(path)
        assert trace.tensors["vertical.index"].shape == (3, 2, 4, 80)
        assert trace.tensors["slash.mass"].shape == (3, 2, 4, 100)
        assert trace.tensors["sample.seq_len"].tolist() == [4096] * 3
        assert trace.metadata["format"] == "sparsering-trace" and trace.metadata["model"] == "tiny"
        assert trace.metadata["provenance.seed"] == "5"
        check_invariants(trace)
        for p, cap in ((0.95, 4096), (0.5, 4096), (1.0, 7)):
            check_against_cli(args.cli, path, trace, p, cap)

        with open(path, "rb") as f:
            data = f.read()
        for cut in (0, 7, 8, 20, len(data) // 2, len(data) - 1):
            try:
                parse_trace(data[:cut], "cut.safetensors")
                raise AssertionError(f"a {cut}-byte prefix parsed")
            except ValueError as e:
                assert str(e).startswith("cut.safetensors: "), e
        try:
            parse_trace(data + b"x", "long.safetensors")
            raise AssertionError("trailing bytes accepted")
        except ValueError as e:
            assert "after the last tensor" in str(e), e

    sample = os.path.join(args.source, "traces", "samples", "qwen2.5-3b-32k.safetensors")
    trace = read_trace(sample)
    assert trace.tensors["vertical.index"].shape[:3] == (1, 36, 16), trace.tensors["vertical.index"].shape
    assert trace.tensors["sample.seq_len"].tolist() == [32768]
    assert trace.metadata["model"] == "qwen2.5-3b" and trace.metadata["source"] == "synthetic"
    check_invariants(trace)
    check_against_cli(args.cli, sample, trace, 0.95, 4096)
    print("python trace reader: ok")


if __name__ == "__main__":
    main()
