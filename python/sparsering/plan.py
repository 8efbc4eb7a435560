"""The planner from Python: `tune`, `simulate`, `export` (and `trace_synth`) run the `sparsering`
binary with `--format json` and return its JSON result as Python objects. Keyword options map to
the CLI's options (`seq_len="128K"` -> `--seq-len 128K`; lists are joined with commas; True is a
flag, False / None leave it out), so every option of `sparsering <command> --help` is available.
The binary is SPARSERING_CLI, else `sparsering` on PATH, else the newest build of the source tree.
A refused input (exit 2) raises PlanCommandError (a ValueError) with the CLI's message.
Covered by tests/python/plan_test.py.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess

from ._library import source_root

ENV_VAR = "SPARSERING_CLI"


class PlanCommandError(ValueError):
    """The sparsering binary refused the input or failed; `exit_code` and `stderr` say why."""

    def __init__(self, message: str, exit_code: int = 0, stderr: str = ""):
        super().__init__(message)
        self.exit_code, self.stderr = exit_code, stderr


def cli_path() -> str:
    path = os.environ.get(ENV_VAR)
    if path:
        if not os.access(path, os.X_OK):
            raise PlanCommandError(f"{ENV_VAR}={path} is not an executable file")
        return path
    found = shutil.which("sparsering")
    if found:
        return found
    root = source_root()
    builds = [path for pattern in ("build*/cli/sparsering", "build*/*/cli/sparsering")
              for path in glob.glob(os.path.join(root, pattern))] if root else []
    if not builds:
        raise PlanCommandError(f"the sparsering binary was not found: set {ENV_VAR}, put it on PATH, or build the "
                               f"target `sparsering` (cmake --preset cpu && cmake --build build/cpu --target sparsering)")
    return max(builds, key=os.path.getmtime)


def _arguments(options: dict) -> list:
    args = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            args += [flag, ",".join(str(v) for v in value)]
        else:
            args += [flag, str(value)]
    return args


def run(command: list, **options):
    """Runs `sparsering COMMAND... --format json [options]`; returns the parsed JSON of stdout."""
    argv = [cli_path()] + [str(c) for c in command] + ["--format", "json"] + _arguments(options)
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        message = (done.stderr.strip() or done.stdout.strip() or "no message").splitlines()
        kind = "refused the input" if done.returncode == 2 else f"failed (exit {done.returncode})"
        raise PlanCommandError(f"sparsering {' '.join(str(c) for c in command)} {kind}: {' / '.join(message[-5:])}",
                               done.returncode, done.stderr)
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError as error:
        raise PlanCommandError(f"sparsering {command[0]} printed no JSON ({error}): {done.stdout[:200]!r}") from error


def tune(model: str, cluster: str, trace: str, seq_len, **options):
    """`sparsering tune`: ranked plans (pass out=... to write them as plan YAML, force=True to replace)."""
    return run(["tune"], model=model, cluster=cluster, trace=trace, seq_len=seq_len, **options)


def simulate(plan: str, **options):
    """`sparsering simulate --plan PLAN`: the predicted step, per-layer attention times, memory."""
    return run(["simulate"], plan=plan, **options)


def export(plan: str, to: str, out: str, **options):
    """`sparsering export PLAN --to TARGET --out DIR`: the written files and what the target loses."""
    return run(["export", plan], to=to, out=out, **options)


def trace_synth(model: str, seq_len, out: str, **options):
    """`sparsering trace synth`: a synthetic trace for a model and sequence length."""
    return run(["trace", "synth"], model=model, seq_len=seq_len, out=out, **options)
