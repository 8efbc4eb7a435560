#!/usr/bin/env python3
"""The CPU side of measure/device/run_calibrate_on_device.sh: which GPU configs it calibrates.

With GPU_NAME set and LIST_ONLY=1 the script prints the configs it would calibrate and stops before
any GPU work, so this test runs it on the CPU:
1. the script parses (bash -n);
2. every shipped GPU config with a device_name is chosen for exactly that device name, and no two
   shipped configs claim the same GPU (one call calibrates each config of the GPU present);
3. device_name values quoted, single-quoted or followed by a comment match;
4. a GPU no config describes is refused with exit code 2, listing the configs' device names;
5. GPU_CONFIGS overrides the matching.

    run_calibrate_test.py --source REPO

Exit 0 when every check passes; otherwise prints the failures and exits 1.
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile

FAILURES = []


def check(condition, message):
    if not condition:
        FAILURES.append(message)


def run(script, cwd, gpu_name, extra_env=None):
    env = dict(os.environ, GPU_NAME=gpu_name, LIST_ONLY="1")
    env.pop("GPU_CONFIG", None)
    env.pop("GPU_CONFIGS", None)
    env.update(extra_env or {})
    return subprocess.run(["bash", str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def shipped_device_names(root):
    names = {}
    for path in sorted((root / "configs" / "gpus").glob("*.yaml")):
        match = re.search(r'^device_name:\s*"?([^"#\n]*?)"?\s*(#.*)?$', path.read_text(), re.MULTILINE)
        if match:
            names[f"configs/gpus/{path.name}"] = match.group(1).strip()
    return names


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", required=True)
    root = pathlib.Path(parser.parse_args().source).resolve()
    script = root / "measure" / "device" / "run_calibrate_on_device.sh"

    syntax = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    check(syntax.returncode == 0, f"bash -n {script}: {syntax.stderr}")

    names = shipped_device_names(root)
    check("configs/gpus/h100-sxm.yaml" in names and "configs/gpus/h200.yaml" in names,
          f"the H100 and H200 configs name their devices: {names}")
    for config, name in names.items():
        result = run(script, root, name)
        check(result.returncode == 0 and result.stdout.split() == [config],
              f"GPU \"{name}\": expected {config}, got exit {result.returncode}, {result.stdout!r} {result.stderr!r}")

    with tempfile.TemporaryDirectory() as tmp:
        gpus = pathlib.Path(tmp) / "configs" / "gpus"
        gpus.mkdir(parents=True)
        (gpus / "a.yaml").write_text('name: a\ndevice_name: "NVIDIA Test A"   # the driver\'s name\n')
        (gpus / "b.yaml").write_text("name: b\ndevice_name: 'NVIDIA Test B'\n")
        (gpus / "c.yaml").write_text("name: c\ndevice_name: NVIDIA Test A\n")
        (gpus / "d.yaml").write_text("name: d\n")
        result = run(script, tmp, "NVIDIA Test A")
        check(result.stdout.split() == ["configs/gpus/a.yaml", "configs/gpus/c.yaml"],
              f"quoted and commented device names: {result.stdout!r} {result.stderr!r}")
        result = run(script, tmp, "NVIDIA Test B")
        check(result.stdout.split() == ["configs/gpus/b.yaml"], f"single-quoted device name: {result.stdout!r}")
        result = run(script, tmp, "NVIDIA Test Z")
        check(result.returncode == 2, f"an unknown GPU exits 2, got {result.returncode}")
        check("no GPU config in configs/gpus/ has device_name \"NVIDIA Test Z\"" in result.stderr
              and "configs/gpus/b.yaml: \"NVIDIA Test B\"" in result.stderr,
              f"an unknown GPU is named with the configs' device names: {result.stderr!r}")
        result = run(script, tmp, "NVIDIA Test Z", {"GPU_CONFIGS": "configs/gpus/d.yaml"})
        check(result.returncode == 0 and result.stdout.split() == ["configs/gpus/d.yaml"],
              f"GPU_CONFIGS overrides the matching: {result.stdout!r} {result.stderr!r}")

    for failure in FAILURES:
        print("FAIL:", failure)
    print(f"{'FAILED' if FAILURES else 'ok'}: run_calibrate_on_device.sh config selection")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
