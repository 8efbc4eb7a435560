#!/usr/bin/env bash
# The same matrix cases replayed with two kernel trees on one machine, so that a kernel change is
# measured without the difference between machines: the tree as it is ("after") and the tree
# with the files under $BEFORE put back ("before": a folder that mirrors the source tree and holds
# the older versions of the files that differ). Runs before, after, before again (the spread of
# the two "before" runs is the noise), each with `CALIBRATE=tree` (measurements only; the
# predictions are not the point) in its own build directory, and prints each run's per-case
# measured times last.
#   BEFORE=dir   required
#   CASES=regex  the matrix cases (default 'm07-|m12-')
#   BUDGET_S=200 seconds per run
set -uo pipefail
OUT=${OUT:-$PWD/out-compare}
CASES=${CASES:-m07-|m12-}
BUDGET_S=${BUDGET_S:-200}
[ -n "${BEFORE:-}" ] && [ -d "$BEFORE" ] || { echo "BEFORE must name a folder of older source files"; exit 2; }
mkdir -p "$OUT"
start=$(date +%s)
stamp() { echo "[compare $(( $(date +%s) - start ))s] $*"; }
files=$(cd "$BEFORE" && find . -type f)
after=$(mktemp -d)
for f in $files; do
  [ -f "$f" ] || { echo "$BEFORE/$f has no counterpart in the tree"; exit 2; }
  mkdir -p "$after/$(dirname "$f")" && cp "$f" "$after/$f"
done
use() { for f in $files; do cp "$1/$f" "$f"; done; }
trap 'use "$after"' EXIT
run() {  # name tree build
  use "$2"
  BUILD=$3 OUT=$OUT/$1 CALIBRATE=tree BUDGET_S=$BUDGET_S CASES="$CASES" SET=$1 \
    bash measure/device/run_matrix_on_device.sh > "$OUT/$1.log" 2>&1
  stamp "$1: exit $?"
}
run before "$BEFORE" build-before
run after "$after" build-device
run before-again "$BEFORE" build-before
for s in before after before-again; do
  echo "== $s (case, forward and backward measured / predicted ms)"
  grep -E "^\| m" "$OUT/$s.log" | awk -F'|' '{print $2, $11, $12}'
done
