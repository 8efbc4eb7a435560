#!/usr/bin/env python3
"""A copy of a measured validation matrix with every cell's kernel time rescaled to one SM clock:
what each replay would have measured had every timed launch run at REF_MHZ instead of the clock
its probe reported (kernels/cuda/sm_clock_probe.hpp). A diagnostic of how much of a prediction's
error the GPU's power cap explains (docs/VALIDATION.md, "The power cap"): a launch bound by its
tensor cores takes a fixed number of cycles, so its time scales with 1 / clock; a launch bound by
memory does not, so the rescaled times are an upper bound on what the clock explains, not a
measurement.

    normalize_matrix_clock.py SOURCE DEST [--ref-mhz F]

SOURCE holds <kind>/<case>/validation.json with `measured_sm_clock_mhz` in both passes (replays
since the probe); DEST receives the same files with measured_compute_us x clock / REF_MHZ and the
clocks set to REF_MHZ. REF_MHZ defaults to the median clock of every cell of SOURCE that launched.
Predict DEST again (measure/validation/predict_matrix.sh with MATRIX=DEST) to re-derive the layer
times from the rescaled cells (measure/validation/clock_rescale.py). Exits 2, writing nothing,
when a case has no clocks or a cell has a time but no clock.
"""
import argparse
import json
import pathlib
import statistics
import sys

from clock_rescale import Refused, rescale_passes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=pathlib.Path)
    parser.add_argument("dest", type=pathlib.Path)
    parser.add_argument("--ref-mhz", type=float, help="the clock to rescale to (default: the median cell clock)")
    args = parser.parse_args()
    docs = {p: json.loads(p.read_text()) for p in sorted(args.source.glob("*/*/validation.json"))}
    if not docs:
        print(f"no <kind>/<case>/validation.json under {args.source}", file=sys.stderr)
        return 2
    try:
        clocks = []
        for path, doc in docs.items():
            for direction in ("forward", "backward"):
                p = doc.get(direction, {})
                if "measured_sm_clock_mhz" not in p:
                    raise Refused(f"{path}: no measured_sm_clock_mhz in {direction} (measured before the clock was probed)")
                clocks += [c for c in p["measured_sm_clock_mhz"] if c > 0]
        ref = args.ref_mhz if args.ref_mhz else statistics.median(clocks)
        if not ref > 0:
            raise Refused(f"--ref-mhz must be > 0, got {ref}")
        for path, doc in docs.items():  # every case checked before anything is written
            rescale_passes(doc, ref, str(path))
    except Refused as error:
        print(error, file=sys.stderr)
        return 2
    for path, doc in docs.items():
        out = args.dest / path.relative_to(args.source)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc))
    print(f"rescaled {len(docs)} cases to {ref:.0f} MHz into {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
