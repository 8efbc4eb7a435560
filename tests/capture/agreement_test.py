#!/usr/bin/python3
"""The two capture paths agree (ctest label gpu): the Python capture (`python3 -m
sparsering_capture --qk DUMP`) and the CUDA capture (`sparsering trace capture --qk DUMP`, here
through trace_capture_driver) on the same Q/K dumps give the same candidates, with masses within
1e-4 relative. Candidates may only differ where masses tie within that tolerance (two keys whose
masses the two fp32 paths round apart in different order).

    agreement_test.py --capture BUILD/tests/capture/trace_capture_driver --source REPO
        [--dump DIR [--python-trace T]]   also compare on an existing dump (run_on_device.sh)

Fresh random dumps: head_dim 64 and 128, GQA ratios 1, 2 and 8, lengths that are not multiples of
64, last_q 1 to 64, sink columns and a local window so the masses are skewed like a model's.
Exits 77 (skipped) without torch or a CUDA device.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import torch
except ImportError:
    print("torch is not importable: agreement test skipped")
    sys.exit(77)

RTOL, ATOL = 1e-4, 1e-7


def compare_heads(index_a, mass_a, index_b, mass_b, what):
    """Candidates (.., K) of two traces: masses slot by slot within tolerance; indices equal except
    inside groups of tied masses. Returns (slots compared, slots that differ by a tie)."""
    close = np.isclose(mass_a, mass_b, rtol=RTOL, atol=ATOL)
    if not close.all():
        at = tuple(np.argwhere(~close)[0])
        raise AssertionError(f"{what}: mass differs at {at}: {mass_a[at]} vs {mass_b[at]}")
    differ = index_a != index_b
    ties = 0
    for row in {tuple(r) for r in np.argwhere(differ)[:, :-1]}:
        a_index, a_mass, b_index, b_mass = index_a[row], mass_a[row], index_b[row], mass_b[row]
        b_mass_of = {int(i): float(m) for i, m in zip(b_index, b_mass) if i >= 0}
        b_floor = float(b_mass[b_index >= 0].min()) if (b_index >= 0).any() else 0.0
        for slot in np.flatnonzero(a_index != b_index):
            position, mass = int(a_index[slot]), float(a_mass[slot])
            if position < 0:  # a pad against a real entry: that entry's mass must be ~0
                ok = abs(float(b_mass[slot])) <= ATOL
            elif position in b_mass_of:  # same candidate, another slot: masses must tie
                ok = abs(b_mass_of[position] - mass) <= ATOL + RTOL * mass
            else:  # only in a: it must tie with b's weakest kept candidate
                ok = mass <= b_floor * (1 + RTOL) + ATOL
            if not ok:
                raise AssertionError(f"{what} {row} slot {slot}: candidate {position} (mass {mass}) vs "
                                     f"{int(b_index[slot])} (mass {float(b_mass[slot])}) is not a tie")
            ties += 1
    return index_a.size, ties


def compare_traces(path_a, path_b, source):
    sys.path.insert(0, os.path.join(source, "traces", "python"))
    from sparsering_trace import read_trace
    a, b = read_trace(path_a), read_trace(path_b)
    for name in ("sample.seq_len",):
        np.testing.assert_array_equal(a.tensors[name], b.tensors[name])
    total = tie_total = 0
    for index, mass in (("vertical.index", "vertical.mass"), ("slash.offset", "slash.mass")):
        assert a.tensors[index].shape == b.tensors[index].shape, (index, a.tensors[index].shape, b.tensors[index].shape)
        slots, ties = compare_heads(a.tensors[index], a.tensors[mass], b.tensors[index], b.tensors[mass], index)
        total, tie_total = total + slots, tie_total + ties
    return total, tie_total


def make_dump(directory, hq, hkv, d, n, last_q, rng):
    from sparsering_capture import QkDumpWriter
    writer = QkDumpWriter(directory, f"random-{hq}x{hkv}x{d}", 2, hq, hkv, d, last_q, d ** -0.5)
    for layer in range(2):
        q = torch.from_numpy(rng.normal(size=(hq, last_q, d)).astype(np.float32))
        k = torch.from_numpy(rng.normal(size=(hkv, n, d)).astype(np.float32))
        k[:, : 1 + layer] += 3 * q.mean(dim=(0, 1))  # sink columns at the start
        k[:, -last_q:] += 0.5 * q[: hkv, -1:]        # a local window
        writer.write_layer(0, layer, q, k)
    writer.close()


def run(command, env=None):
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed ({result.returncode}): {result.stderr}")
    return result


def capture_both(args, dump, work, slots):
    env = dict(os.environ, PYTHONPATH=os.path.join(args.source, "traces", "capture"))
    py, cpp = os.path.join(work, "py.safetensors"), os.path.join(work, "cpp.safetensors")
    run([sys.executable, "-m", "sparsering_capture", "--qk", dump, "--out", py, "--slots", str(slots), "--device",
         "cuda", "--force"], env)
    run([args.capture, "trace", "capture", "--qk", dump, "--out", cpp, "--slots", str(slots), "--force"])
    return py, cpp


def check_input_errors(args):
    """Bad dumps are input errors (exit 2) with a message naming the file, and leave no output.
    Runs before any CUDA call, so it needs no GPU."""
    sys.path.insert(0, os.path.join(args.source, "traces", "capture"))
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "t.safetensors")
        dump = os.path.join(work, "dump")
        os.makedirs(dump)
        manifest = {"format": "sparsering-qk-dump", "version": 1, "model": "m", "layers": 1, "q_heads": 4,
                    "kv_heads": 2, "head_dim": 64, "last_q": 8, "softmax_scale": 0.125,
                    "samples": [{"seq_len": 100, "files": ["s0000_l0000.safetensors"]}]}
        broken = [("no manifest", None, None), ("bad JSON", "{", None),
                  ("3 heads over 2", dict(manifest, q_heads=3), None), ("head_dim 96", dict(manifest, head_dim=96), None),
                  ("escaping file name", dict(manifest, samples=[{"seq_len": 100, "files": ["../x"]}]), None),
                  ("seq_len below last_q", dict(manifest, samples=[{"seq_len": 4, "files": ["a"]}]), None),
                  ("negative scale", dict(manifest, softmax_scale=-1.0), None),
                  ("missing layer file", manifest, None), ("truncated layer file", manifest, b"\x10\x00\x00\x00"),
                  ("header past the end", manifest, b"\xff" * 8 + b"{}")]
        for name, content, layer_bytes in broken:
            path = os.path.join(dump, "qk_dump.json")
            if os.path.exists(path):
                os.unlink(path)
            if content is not None:
                with open(path, "w") as f:
                    f.write(content if isinstance(content, str) else json.dumps(content))
            layer_file = os.path.join(dump, "s0000_l0000.safetensors")
            if os.path.exists(layer_file):
                os.unlink(layer_file)
            if layer_bytes is not None:
                with open(layer_file, "wb") as f:
                    f.write(layer_bytes)
            result = subprocess.run([args.capture, "trace", "capture", "--qk", dump, "--out", out],
                                    capture_output=True, text=True)
            if result.returncode != 2 or "error:" not in result.stderr or os.path.exists(out):
                raise AssertionError(f"{name}: exit {result.returncode}, stderr {result.stderr!r}")
            print(f"input error ok ({name}): {result.stderr.strip()[:150]}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--capture", required=True, help="binary with `trace capture` (sparsering or the driver)")
    parser.add_argument("--source", required=True)
    parser.add_argument("--dump", help="also compare on this existing Q/K dump")
    parser.add_argument("--python-trace", help="with --dump: the Python trace captured live with that dump")
    parser.add_argument("--slots", type=int, default=1024)
    parser.add_argument("--input-errors-only", action="store_true", help="only the bad-dump checks (no GPU needed)")
    args = parser.parse_args()
    check_input_errors(args)
    if args.input_errors_only:
        return 0
    if not torch.cuda.is_available():
        print("no CUDA device: agreement test skipped")
        return 77
    sys.path.insert(0, os.path.join(args.source, "traces", "capture"))
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
    from test_seed import numpy_rng
    rng = numpy_rng("capture_agreement")
    cases = [(4, 4, 64, 1000, 64, 256), (8, 4, 128, 4097, 17, 512), (16, 2, 128, 8191, 64, 1024),
             (8, 1, 64, 130, 1, 200)]
    with tempfile.TemporaryDirectory() as work:
        for hq, hkv, d, n, last_q, slots in cases:
            dump = os.path.join(work, f"dump_{hq}_{hkv}_{d}_{n}")
            make_dump(dump, hq, hkv, d, n, last_q, rng)
            total, ties = compare_traces(*capture_both(args, dump, work, slots), args.source)
            print(f"agree: Hq {hq} Hkv {hkv} D {d} N {n} last_q {last_q}: {total} slots, {ties} tie swaps")
        if args.dump:
            py, cpp = capture_both(args, args.dump, work, args.slots)
            total, ties = compare_traces(py, cpp, args.source)
            print(f"agree on {args.dump}: {total} slots, {ties} tie swaps")
            if args.python_trace:
                total, ties = compare_traces(args.python_trace, cpp, args.source)
                print(f"agree with the live capture {args.python_trace}: {total} slots, {ties} tie swaps")
    print("capture agreement: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
