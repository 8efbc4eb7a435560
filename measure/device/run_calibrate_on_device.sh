#!/usr/bin/env bash
# The GPU machine's calibration run (docs/calibration.md), in one call: find every shipped GPU
# config whose device_name is the GPU present (configs/gpus/*.yaml), configure and build the
# calibrate command (-j16), measure the dense GEMM efficiency with torch when present, run
# `calibrate` once per matching config (every default kernel shape: 64x64x128 and 128x128x128;
# with 2+ GPUs and CLUSTER set, the first one also measures the NCCL hops), then write under $OUT
#   configs/<gpu>.yaml                        the updated GPU configs (and the cluster, with CLUSTER)
#   raw/calibration-<gpu>.json, -kernels.csv, -hops.csv   every measurement and fit
#   summary.txt                               the fit tables, also printed last
#   results.tgz                               all of it plus the logs (environment, build, runs)
# and print the fit tables last. The configs are updated in place in this tree too (a copy on the
# device machine), so a validation run after it uses the fresh calibration.
# Then, unless REPLAYS=0 or only the calibrate-only binary built, every plan of REPLAY_PLANS is
# replayed on this GPU (`validate --replay`, traces from TRACE_PRIOR) and each config is refitted
# with the grid and those ring cells (`calibrate --refit ... --cells ...`, docs/calibration.md
# "Replayed ring cells"):
#   replays/<gpu>/<plan>/cells.csv, validation.json   the replays (what the refit fitted)
#   raw/refit/calibration-<gpu>.json, -kernels.csv     the refit
#   REPLAYS=1|0                             replay and refit (default 1)
#   REPLAY_PLANS=configs/plans/calibration  the calibration replays (held out from the validation matrix)
#   BACKWARD_REPLAY_PLANS=configs/plans/calibration-backward
#                                           replays whose backward cells alone are fitted (`--backward-cells`:
#                                           few K/V heads per rank, the backward's critical path; docs/calibration.md)
#   TRACE_PRIOR=configs/sparsity/llama-3-8b-262k.yaml   sparsity prior of their traces
#   REPLAY_CASE_S=90                        timeout of one replay
#   GPU_CONFIGS="configs/gpus/a.yaml ..."   configs to calibrate (default: those matching the GPU)
#   GPU_CONFIG=configs/gpus/a.yaml          the same, one config (kept for measure/device/run_all_on_device.sh)
#   CLUSTER=configs/clusters/x.yaml         cluster whose LEVEL gets the measured hop curve (2+ GPUs)
#   LEVEL=intra_node                        fabric level of CLUSTER
#   CALIBRATE_ARGS="--repeats 7 --banded"   extra arguments (e.g. --quick, --shapes, --devices 0,1); banded
#                                           placement by default, as real vertical-slash steps (docs/calibration.md)
#   CALIBRATE_TARGET=sparsering|sparsering_calibrate
#       which binary to build; `sparsering` (default) falls back to the calibrate-only binary
#       (tests/measure/calibration/CMakeLists.txt) when it does not build
#   GPU_NAME="NVIDIA H100 80GB HBM3" LIST_ONLY=1
#       print the configs that match that device name and stop (no GPU needed; checked by
#       tests/measure/device/run_calibrate_test.py)
# Third-party dependencies the machine lacks come from .device/deps (kernels/bench/make_device_deps.sh).
set -uo pipefail
OUT=${OUT:-$PWD/out-calibrate}
CLUSTER=${CLUSTER:-}
LEVEL=${LEVEL:-intra_node}
CALIBRATE_ARGS=${CALIBRATE_ARGS-"--repeats 7 --banded"}
TARGET=${CALIBRATE_TARGET:-sparsering}
BUILD=${BUILD:-build-calibrate}
REPLAYS=${REPLAYS:-1}
REPLAY_PLANS=${REPLAY_PLANS:-configs/plans/calibration}
REPLAY_PLANS=${REPLAY_PLANS%/}
BACKWARD_REPLAY_PLANS=${BACKWARD_REPLAY_PLANS-configs/plans/calibration-backward}
BACKWARD_REPLAY_PLANS=${BACKWARD_REPLAY_PLANS%/}  # compared with each plan's folder below
TRACE_PRIOR=${TRACE_PRIOR:-configs/sparsity/llama-3-8b-262k.yaml}
REPLAY_CASE_S=${REPLAY_CASE_S:-90}
start=$(date +%s)
stamp() { echo "[device $(( $(date +%s) - start ))s] $*"; }

# device_name of a GPU config: the value of its top-level key, unquoted, without a trailing comment.
device_name_of() {
  sed -n 's/^device_name:[[:space:]]*//p' "$1" | head -1 | sed -e 's/[[:space:]]#.*$//' -e 's/[[:space:]]*$//' \
    -e 's/^"\(.*\)"$/\1/' -e "s/^'\(.*\)'\$/\1/"
}

gpu_name=${GPU_NAME:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)}
configs=${GPU_CONFIGS:-${GPU_CONFIG:-}}
if [ -z "$configs" ]; then
  for f in configs/gpus/*.yaml; do
    [ "$(device_name_of "$f")" = "$gpu_name" ] && configs="$configs $f"
  done
  configs=${configs# }
fi
if [ -z "$configs" ]; then
  echo "no GPU config in configs/gpus/ has device_name \"$gpu_name\" (the GPU present); the configs name:" >&2
  for f in configs/gpus/*.yaml; do echo "  $f: \"$(device_name_of "$f")\"" >&2; done
  echo "add a config for this GPU or give GPU_CONFIGS=..." >&2
  exit 2
fi
if [ "${LIST_ONLY:-0}" = 1 ]; then
  echo "$configs"
  exit 0
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT/raw" "$OUT/configs" "$WORK/logs"
{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv
  nvidia-smi topo -m 2>/dev/null
  nvcc --version | tail -2
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown) (working tree may differ: see git status)"
  git status --short 2>/dev/null | head -40
} > "$WORK/logs/env.txt" 2>&1
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
stamp "$gpus GPU(s): $gpu_name; calibrating $configs"

prefix=""
if [ -d .device/deps ]; then
  prefix="-DCMAKE_PREFIX_PATH=$PWD/.device/deps"
  export PATH="$PWD/.device/deps/bin:$PATH" LD_LIBRARY_PATH="$PWD/.device/deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
build_log="$WORK/logs/build.log"
if ! cmake -S . -B $BUILD -G Ninja -DSPARSERING_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_POLICY_VERSION_MINIMUM=3.5 $prefix > "$build_log" 2>&1; then
  stamp "configure FAILED"; tail -30 "$build_log"; cp "$build_log" "$OUT/"; exit 1
fi
BIN=""
if [ "$TARGET" = sparsering ]; then
  if cmake --build $BUILD --target sparsering -j16 >> "$build_log" 2>&1; then
    BIN=$BUILD/cli/sparsering
  else
    stamp "sparsering did not build (see build.log); building the calibrate-only binary"
    TARGET=sparsering_calibrate
  fi
fi
if [ -z "$BIN" ]; then
  if ! cmake --build $BUILD --target sparsering_calibrate -j16 >> "$build_log" 2>&1; then
    stamp "build FAILED"; grep -E "error" "$build_log" | head -30; cp "$build_log" "$OUT/"; exit 1
  fi
  BIN=$BUILD/tests/measure/calibration/sparsering_calibrate
fi
stamp "built $BIN ($(grep -o 'Kernel build identity: .*' "$build_log" | head -1))"

# Dense GEMM rate (cuBLAS through torch): median bf16 8192^3 matmul, measured once; each config
# divides it by its own peak_tflops_bf16.
tflops=""
if python3 -c 'import torch' 2> /dev/null; then
  tflops=$(python3 - <<'PY' 2> "$WORK/logs/gemm.log"
import sys, torch
n = 8192
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    a @ b
times = []
for _ in range(10):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); a @ b; e.record(); torch.cuda.synchronize()
    times.append(s.elapsed_time(e) / 1e3)
t = sorted(times)[len(times) // 2]
tflops = 2 * n ** 3 / t / 1e12
print(f"torch {torch.__version__} bf16 {n}^3 matmul: {tflops:.1f} TFLOP/s", file=sys.stderr)
print(f"{tflops:.3f}")
PY
)
  stamp "GEMM: $(tail -1 "$WORK/logs/gemm.log")"
fi

# Replays every plan of REPLAY_PLANS on this GPU (measure/device/replay_plan.sh), predicted on a
# cluster whose GPU is $1, then refits $1 with the grid run's measurements and the replays' cells.
source measure/device/replay_plan.sh
replay_calibration() {
  local config=$1 name=$2 plan plan_name cells=() backward_cells=()
  local dir="$OUT/replays/$name"
  mkdir -p "$dir" "$WORK/replay-plans"
  sed "s|^gpu: .*|gpu: $(realpath "$config")|" configs/clusters/h200-16x8-ndr.yaml > "$WORK/replay-plans/cluster.yaml"
  # The backward replays go to replays/<gpu>/backward/ and are refitted with --backward-cells.
  for plan in "$REPLAY_PLANS"/*.yaml ${BACKWARD_REPLAY_PLANS:+"$BACKWARD_REPLAY_PLANS"/*.yaml}; do
    [ -f "$plan" ] || continue
    plan_name=$(basename "$plan" .yaml)
    local result="$dir/$plan_name" backward=0
    if [ -n "$BACKWARD_REPLAY_PLANS" ] && [ "$(dirname "$plan")" = "$BACKWARD_REPLAY_PLANS" ]; then
      backward=1
      result="$dir/backward/$plan_name"
      mkdir -p "$dir/backward"
    fi
    local log="$WORK/logs/replay-$name-$plan_name.log"
    if replay_plan "$BIN" "$plan" "$WORK/replay-plans/cluster.yaml" "$WORK/traces" "$TRACE_PRIOR" 12 3 "$REPLAY_CASE_S" \
         "$result" "$log" "$WORK/replay-plans"; then
      if [ "$backward" = 1 ]; then backward_cells+=("$result/cells.csv"); else cells+=("$result/cells.csv"); fi
    else
      stamp "replay $plan_name FAILED: $(tail -2 "$log" | tr '\n' ' ')"
    fi
  done
  stamp "replayed ${#cells[@]} calibration plans and ${#backward_cells[@]} backward ones for $config"
  # Not a failure of the calibration: the grid's fit stands, and the summary says so.
  if [ ${#cells[@]} -lt 2 ]; then
    stamp "fewer than two replays: $config keeps the grid's fit"
    echo "== $config: fewer than two replays, not refitted (the grid's fit stands)" >> "$OUT/summary.txt"
    return 0
  fi
  mkdir -p "$WORK/raw/refit" "$OUT/raw/refit"
  "$BIN" --out "$WORK/raw/refit" --force calibrate --gpu "$config" --refit "$WORK/raw/calibration-$name-kernels.csv" \
    --cells "${cells[@]}" ${backward_cells[@]+--backward-cells "${backward_cells[@]}"} \
    > "$WORK/logs/refit-$name.txt" 2> "$WORK/logs/refit-$name.log"
  local code=$?
  stamp "refit $config with ${#cells[@]} replays and ${#backward_cells[@]} backward ones: exit $code"
  cp "$config" "$OUT/configs/"
  cp "$WORK/raw/refit/calibration-$name"* "$OUT/raw/refit/" 2>/dev/null
  { echo "== $config refitted with ${#cells[@]} replays and ${#backward_cells[@]} backward ones ($gpu_name): exit $code"
    cat "$WORK/logs/refit-$name.txt"; } \
    >> "$OUT/summary.txt"
  return $code
}

status=0
first=1
: > "$OUT/summary.txt"
for config in $configs; do
  name=$(basename "$config" .yaml)
  gemm_args=""
  peak=$(sed -n 's/^peak_tflops_bf16:[[:space:]]*\([0-9.]*\).*/\1/p' "$config" | head -1)
  if [ -n "$tflops" ] && [ -n "$peak" ]; then
    gemm_args="--gemm-efficiency $(python3 -c "print(f'{min($tflops / $peak, 1.0):.4f}')")"
  fi
  cluster_args=""
  if [ -n "$CLUSTER" ] && [ "$first" = 1 ]; then
    if [ "$gpus" -ge 2 ]; then
      cluster_args="--cluster $CLUSTER --level $LEVEL"
    else
      stamp "CLUSTER given but only $gpus GPU: no hop curve"
    fi
  fi
  # The device tree is a copy: --force replaces the calibration there; the copies under $OUT are
  # what goes back into the repository.
  $BIN --out "$WORK/raw" --force -v calibrate --gpu "$config" $cluster_args $gemm_args $CALIBRATE_ARGS \
    > "$WORK/logs/calibrate-$name.txt" 2> "$WORK/logs/calibrate-$name.log"
  code=$?
  stamp "calibrate $config: exit $code"
  [ "$code" != 0 ] && status=$code && tail -5 "$WORK/logs/calibrate-$name.log"
  cp "$config" "$OUT/configs/"
  [ -n "$cluster_args" ] && cp "$CLUSTER" "$OUT/configs/"
  cp "$WORK/raw/calibration-$name"* "$OUT/raw/" 2>/dev/null
  { echo "== $config ($gpu_name): exit $code"; cat "$WORK/logs/calibrate-$name.txt"; } >> "$OUT/summary.txt"
  first=0
  if [ "$code" = 0 ] && [ "$REPLAYS" = 1 ]; then
    if [ "$TARGET" != sparsering ]; then
      stamp "no replays for $config: only the calibrate-only binary built (validate is not in it)"
      continue
    fi
    replay_calibration "$config" "$name" || status=1
  fi
done
cp "$OUT/summary.txt" "$WORK/logs/"
tar czf "$OUT/results.tgz" -C "$WORK" logs raw -C "$OUT" configs $( [ -d "$OUT/replays" ] && echo replays) 2>/dev/null
stamp "wrote $OUT (configs/, raw/, replays/, summary.txt, results.tgz)"
cat "$OUT/summary.txt"
exit $status
