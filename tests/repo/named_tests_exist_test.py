#!/usr/bin/env python3
"""Every file the repository names is in the repository.

1. Test files named anywhere in the tree (comments of C++, CUDA, Python, CMake and shell files,
   docs, configs, notebooks): every path of the form tests/<folders>/<name>.cpp (also .hpp, .h,
   .cu, .cuh, .py, .sh, .md) must exist. A path inside a build folder (build/cpu/tests/...) is a
   build output and is not checked; neither is a pattern with wildcards.
2. Design documents are cited inside the repository: a citation of the method, design, peers or
   style notes must be a docs/<name>.md path that exists, and nothing may point at a notes folder
   outside the repository (../shared).

    named_tests_exist_test.py --source REPO

Exit 0 when the tree is clean; otherwise prints every offending file:line and exits 1.
"""
import argparse
import os
import pathlib
import re
import sys

TEXT_SUFFIXES = {".cpp", ".hpp", ".h", ".cu", ".cuh", ".py", ".sh", ".cmake", ".txt", ".md", ".yaml", ".yml",
                 ".json", ".ipynb", ".in", ".toml", ".cfg"}
TEXT_NAMES = {"CMakeLists.txt", "CMakePresets.json", "Makefile"}
SKIP_DIRS = {".git", "build", "__pycache__", "node_modules"}
# A tests/ path that is not the tail of a longer path (build/cpu/tests/...) or a word.
TEST_PATH = re.compile(r"(?<![\w./-])tests/[\w.-]+(?:/[\w.-]+)*\.(?:cpp|hpp|h|cu|cuh|py|sh|md)\b")
# The names of the design notes, spelled in pieces so this file does not cite them itself.
NOTES = "|".join(("des" + "ign", "met" + "hod", "pe" + "ers", "st" + "yle"))
NOTE_CITATION = re.compile(r"([\w./-]*?)\b(" + NOTES + r")\.md\b")
OUTSIDE_NOTES = re.compile(r"\.\./" + "sha" + "red")


def text_files(root: pathlib.Path):
    for directory, dirs, files in os.walk(root):
        here = pathlib.Path(directory)
        # Skip VCS data, hidden folders (local dependency caches) and build trees.
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")
                         and not (here / d / "CMakeCache.txt").exists())
        for name in sorted(files):
            path = here / name
            if path.suffix in TEXT_SUFFIXES or name in TEXT_NAMES:
                yield path


def problems(root: pathlib.Path, self_path: pathlib.Path):
    found = []
    for path in text_files(root):
        if path.resolve() == self_path:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        rel = path.relative_to(root)
        for number, line in enumerate(text.splitlines(), start=1):
            for match in TEST_PATH.finditer(line):
                named = match.group(0)
                if not (root / named).is_file():
                    found.append(f"{rel}:{number}: names {named}, which does not exist")
            for match in NOTE_CITATION.finditer(line):
                prefix, name = match.group(1), match.group(2)
                cited = f"{prefix}{name}.md"
                if not prefix.endswith("docs/") or not (root / "docs" / f"{name}.md").is_file():
                    found.append(f"{rel}:{number}: cites {cited}; cite docs/{name}.md (which must exist)")
            if OUTSIDE_NOTES.search(line):
                found.append(f"{rel}:{number}: points outside the repository ({OUTSIDE_NOTES.pattern.replace(chr(92), '')})")
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="repository root")
    args = parser.parse_args()
    root = pathlib.Path(args.source).resolve()
    found = problems(root, pathlib.Path(__file__).resolve())
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} reference(s) to files that are not in the repository")
        return 1
    print("every named test file and cited document exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
