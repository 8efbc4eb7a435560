#!/usr/bin/env bash
# One GPU machine, one call: build once, calibrate the GPU (kernel cost model and NCCL hop curve),
# validate every case of configs/plans/validation/ against the fresh calibration, then run the
# ring runtime's tests and its emulated-node benchmark. Each step is its own script (named below)
# and writes under $OUT/<step>/; the summary comes last.
#   GPU_CONFIG=configs/gpus/h200.yaml                 GPU config to calibrate (updated in place)
#   CLUSTER=configs/clusters/h200-4x-nvswitch.yaml    cluster whose intra-node hop curve is measured
#   BUDGET_S=540                                      seconds for the whole run
#   RINGS=1                                           0 skips step 3
# Kernel costs are fitted on banded synthetic indices (tiles on diagonals, shared column pools, as
# in real vertical-slash patterns); the uniformly random placement (the cache's worst case) is
# measured too and kept beside it for comparison. Everything under $OUT is also packed into
# $OUT/results.tgz (the device tool returns few files).
# Third-party dependencies the machine lacks come from .device/deps (kernels/bench/make_device_deps.sh).
set -uo pipefail
OUT=${OUT:-$PWD/out-device}
export BUILD=${BUILD:-build-device}
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off on the lent machines
GPU_CONFIG=${GPU_CONFIG:-configs/gpus/h200.yaml}
CLUSTER=${CLUSTER:-configs/clusters/h200-4x-nvswitch.yaml}
BUDGET_S=${BUDGET_S:-540}
start=$(date +%s)
left() { echo $(( BUDGET_S - ($(date +%s) - start) )); }
stamp() { echo "[all $(( $(date +%s) - start ))s] $*"; }
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
mkdir -p "$OUT"
stamp "$gpus GPU(s); commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

# 1. Calibration (measure/device/run_calibrate_on_device.sh builds `sparsering` in $BUILD).
cluster_arg=""
[ "$gpus" -ge 2 ] && cluster_arg="$CLUSTER"
OUT=$OUT/calibrate-random GPU_CONFIG=$GPU_CONFIG CLUSTER=$cluster_arg CALIBRATE_ARGS="--repeats 7" \
  timeout $(( $(left) / 3 )) bash measure/device/run_calibrate_on_device.sh > "$OUT/calibrate-random.log" 2>&1
stamp "calibrate (random placement, hops) exit $?"
OUT=$OUT/calibrate GPU_CONFIG=$GPU_CONFIG CLUSTER="" CALIBRATE_ARGS="--repeats 7 --banded" \
  timeout $(( $(left) / 3 )) bash measure/device/run_calibrate_on_device.sh > "$OUT/calibrate.log" 2>&1
stamp "calibrate (banded placement) exit $?"

# 2. Validation against the calibration just written into $GPU_CONFIG.
OUT=$OUT/validation GPUS=$gpus ITERATIONS=${ITERATIONS:-3} \
  timeout $(( $(left) * 3 / 4 )) bash measure/device/run_validation_on_device.sh > "$OUT/validation.log" 2>&1
stamp "validation exit $?"

# 3. Ring runtime: tests on 2 and 4 GPUs, layer benchmark, two emulated nodes.
if [ "${RINGS:-1}" = 1 ] && [ "$(left)" -gt 60 ] && [ "$gpus" -ge 2 ]; then
  OUT=$OUT/rings BUDGET_S=$(( $(left) - 10 )) \
    timeout $(( $(left) - 5 )) bash kernels/bench/run_rings_on_device.sh > "$OUT/rings.log" 2>&1
  stamp "rings exit $?"
fi

tar czf "$OUT/results.tgz" --exclude='*/build.log' --exclude='results.tgz' -C "$OUT" . 2>/dev/null
echo "== calibration (random placement, hops)"; grep -E "^([0-9]+x[0-9]+x[0-9]+ |link fit)" "$OUT/calibrate-random.log"
echo "== calibration";  tail -25 "$OUT/calibrate.log"
echo "== rings";        tail -20 "$OUT/rings.log" 2>/dev/null
echo "== validation";   grep -E "FAILED|ok \(" "$OUT/validation.log" | tail -25; tail -25 "$OUT/validation.log"
