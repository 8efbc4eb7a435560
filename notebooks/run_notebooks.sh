#!/usr/bin/env bash
# Executes the notebooks headless on fresh CLI outputs; CI runs it as the ctest test
# notebooks_execute (tests/notebooks/CMakeLists.txt), and with --figures docs/img it regenerates
# the README's figures.
#   notebooks/run_notebooks.sh --cli BUILD/cli/sparsering [--work DIR] [--figures DIR] [--reuse-inputs]
# --work: where inputs and executed copies go (default a temporary folder; the notebooks in the
# tree are never written, so they stay without outputs). Needs /usr/bin/python3 with nbconvert,
# ipykernel, nbformat and matplotlib (Debian: python3-nbconvert python3-ipykernel python3-nbformat
# python3-matplotlib); exits 77 (ctest: skipped) without them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cli="${SPARSERING:-$repo/build/cli/sparsering}" work="" figures="" reuse=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cli) cli=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --figures) figures=$(mkdir -p "$2" && cd "$2" && pwd); shift 2 ;;
    --reuse-inputs) reuse=1; shift ;;
    *) echo "run_notebooks.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
py=/usr/bin/python3
if ! $py -c "import nbconvert, nbformat, ipykernel, matplotlib" 2> /dev/null; then
  echo "run_notebooks.sh: $py lacks nbconvert, nbformat, ipykernel or matplotlib: skipped" >&2
  exit 77
fi
if [ -z "$work" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work/executed"
if [ $reuse = 0 ] || [ ! -f "$work/inputs/inputs.json" ]; then
  "$here/make_inputs.sh" "$cli" "$work/inputs"
fi
export SPARSERING_NOTEBOOK_INPUTS="$work/inputs" SPARSERING_SOURCE="$repo" PYDEVD_DISABLE_FILE_VALIDATION=1
if [ -n "$figures" ]; then export SPARSERING_FIGURES="$figures"; fi
for nb in traces plans validation; do
  $py -m nbconvert --to notebook --execute --ExecutePreprocessor.timeout=600 --ExecutePreprocessor.kernel_name=python3 \
    --output-dir "$work/executed" "$here/$nb.ipynb"
done
echo "executed notebooks in $work/executed${figures:+, figures in $figures}"
