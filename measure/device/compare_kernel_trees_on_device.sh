#!/usr/bin/env bash
# The same matrix cases replayed with two kernel trees on one machine, so that a kernel change is
# measured without the difference between machines: the tree as it is ("after") and the tree
# with the files under $BEFORE put back ("before": a folder that mirrors the source tree and holds
# the older versions of the files that differ, e.g. made with `git show <commit>:<path>` for each
# changed kernel file and kernels/cuda/kernel_build.sha256). Runs before, after, before again (the
# spread of the two "before" runs is the noise), each with `CALIBRATE=tree` (measurements only;
# the predictions are not the point) in its own build directory and from scratch (earlier results
# of these sets are removed), then prints each run's table (validation_matrix_table.py) last.
#   BEFORE=dir   required: the older files
#   CASES=regex  the matrix cases (default 'm07-|m12-')
#   BUDGET_S=150 seconds per run (three runs and two builds must fit the machine's command limit)
#   SPARSERING_COMMIT  the after tree's commit; the before runs record it with "+before"
# Exits 1 when a run fails; the tree's own files are restored whatever happens but SIGKILL.
set -uo pipefail
OUT=${OUT:-$PWD/out-compare}
CASES=${CASES:-m07-|m12-}
BUDGET_S=${BUDGET_S:-150}
COMMIT=${SPARSERING_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
[ -n "${BEFORE:-}" ] && [ -d "$BEFORE" ] || { echo "BEFORE must name a folder of older source files"; exit 2; }
mapfile -d '' files < <(cd "$BEFORE" && find . -type f -print0)
[ "${#files[@]}" -gt 0 ] || { echo "BEFORE ($BEFORE) holds no files"; exit 2; }
mkdir -p "$OUT"
start=$(date +%s)
stamp() { echo "[compare $(( $(date +%s) - start ))s] $*"; }
after=$(mktemp -d)
for f in "${files[@]}"; do
  [ -f "$f" ] || { echo "$BEFORE/$f has no counterpart in the tree"; rm -rf "$after"; exit 2; }
  mkdir -p "$after/$(dirname "$f")" && cp "$f" "$after/$f"
done
use() { for f in "${files[@]}"; do cp "$1/$f" "$f"; done; }
trap 'use "$after"; rm -rf "$after"' EXIT
status=0
run() {  # set tree build commit
  use "$2"
  rm -rf "$3/$1-results"
  SPARSERING_COMMIT=$4 BUILD=$3 OUT=$OUT/$1 CALIBRATE=tree BUDGET_S=$BUDGET_S CASES="$CASES" SET=$1 \
    bash measure/device/run_matrix_on_device.sh > "$OUT/$1.log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || status=1
  stamp "$1: exit $rc"
}
run before "$BEFORE" build-before "$COMMIT+before"
run after "$after" build-device "$COMMIT"
run before-again "$BEFORE" build-before "$COMMIT+before"
for s in before after before-again; do
  build=build-before
  [ "$s" = after ] && build=build-device
  echo "== $s"
  python3 measure/validation/validation_matrix_table.py "$build/$s-results" | grep -E "^\| m" | awk -F'|' '{print $2, $11, $12}'
done
exit $status
