#!/usr/bin/python3
"""sparsering.plan on the bundled example (ctest labels torch, cpu): tune on the bundled 32K trace
for two H200s, simulate the tuned plan, export it to torch; the JSON comes back as Python objects
with the fields the CLI documents; a refused input raises PlanCommandError (a ValueError) with the
CLI's message.

    plan_test.py --cli BUILD/cli/sparsering --source REPO --workdir DIR
"""
import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_support import Checks, import_torch  # noqa: E402

import_torch()
from sparsering import plan  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    os.environ[plan.ENV_VAR] = args.cli
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    src = lambda *p: os.path.join(args.source, *p)  # noqa: E731
    checks = Checks("plan_test")
    trace = src("traces", "samples", "qwen2.5-3b-32k.safetensors")
    tuned_path = os.path.join(args.workdir, "tuned.yaml")
    tuned = plan.tune(src("configs", "models", "qwen2.5-3b.yaml"), src("configs", "clusters", "h200-2x-nvlink.yaml"),
                      trace, "32K", top=2, out=tuned_path, threads=2)
    checks.true("tune returns ranked plans", isinstance(tuned, dict) and len(tuned.get("plans", tuned.get("ranked", [
        ]))) >= 1, str(list(tuned)[:10]))
    written = [f for f in os.listdir(args.workdir) if f.endswith(".yaml")]
    checks.true(f"tune wrote plan YAML ({', '.join(sorted(written))})", bool(written))
    best = os.path.join(args.workdir, sorted(written)[0])
    result = plan.simulate(best, trace=trace, threads=2)
    checks.true("simulate returns a sparsering-simulation", result.get("format") == "sparsering-simulation")
    layer = result["layers"][0]
    checks.true("per-layer attention times", layer["attention_fwd_ns"] > 0 and layer["attention_bwd_ns"] > 0)
    print(f"  simulated: attention fwd {layer['attention_fwd_ns'] / 1e6:.2f} ms, bwd "
          f"{layer['attention_bwd_ns'] / 1e6:.2f} ms per layer")
    exported = plan.export(best, "torch", os.path.join(args.workdir, "export"))
    checks.true("export writes plan.json", any(f.endswith("plan.json") for f in exported["files"]))
    try:
        plan.simulate(os.path.join(args.workdir, "missing.yaml"))
        checks.true("a missing plan is refused", False, "accepted")
    except plan.PlanCommandError as error:
        checks.true(f"a missing plan is refused: {error}", error.exit_code == 2 and "missing.yaml" in str(error))
    try:
        plan.tune(src("configs", "models", "qwen2.5-3b.yaml"), src("configs", "clusters", "h200-2x-nvlink.yaml"),
                  trace, "32K", recall=1.5)
        checks.true("recall 1.5 is refused", False, "accepted")
    except ValueError as error:
        checks.true(f"recall 1.5 is refused: {error}", "recall" in str(error))
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
