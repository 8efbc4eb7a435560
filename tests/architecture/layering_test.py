#!/usr/bin/env python3
"""The layer rule at the level of includes (docs/architecture.md): every project header a source
file includes must belong to its own folder's layer or to a layer below it. CMake checks the same
rule on the link graph (cmake/SparseringLayering.cmake); this catches a header-only include that
the linker would never see. Also checks that the CUDA/NCCL-free layers include no CUDA or NCCL
header. Exit 0 when the tree is clean; otherwise prints every violation and exits 1."""
import argparse
import pathlib
import re
import sys

# Which top-level folders each top-level source folder may include from.
ALLOWED = {
    "common": {"common"},
    "core": {"common", "core"},
    "traces": {"common", "traces"},
    "kernels": {"common", "core", "kernels"},
    "sim": {"common", "core", "traces", "sim"},
    "tuner": {"common", "core", "traces", "sim", "tuner"},
    "measure": {"common", "core", "traces", "kernels", "sim", "measure"},
    "cli": {"common", "core", "traces", "kernels", "sim", "tuner", "measure", "cli"},
}
# Layers that must build without the CUDA toolkit.
CPU_ONLY = {"common", "core", "traces", "sim", "tuner"}
GPU_HEADERS = re.compile(r"^(cuda|cuda_runtime|cuda_bf16|cuda_fp16|nccl|cub/|thrust/|mma\.h|cooperative_groups)")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.MULTILINE)
SOURCES = {".cpp", ".hpp", ".cu", ".cuh", ".h"}


def violations(root: pathlib.Path):
    project_folders = set(ALLOWED) | {"tests"}
    for folder, allowed in sorted(ALLOWED.items()):
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in SOURCES or not path.is_file():
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            for bracket, target in INCLUDE.findall(text):
                top = target.split("/", 1)[0]
                rel = path.relative_to(root)
                if bracket == '"' and "/" in target and top in project_folders and top not in allowed:
                    yield f"{rel}: includes {target}, but {folder}/ may include only {sorted(allowed)}"
                if folder in CPU_ONLY and GPU_HEADERS.match(target):
                    yield f"{rel}: includes {target}; {folder}/ must build without CUDA and NCCL"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", required=True, help="repository root")
    args = parser.parse_args()
    found = list(violations(pathlib.Path(args.source)))
    for line in found:
        print(line)
    print(f"{len(found)} layering violation(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
