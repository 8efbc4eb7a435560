#!/usr/bin/env bash
# The validation matrix on one GPU (docs/VALIDATION.md): every plan of
# configs/plans/validation/matrix/ is replayed (`sparsering validate --replay`: every virtual rank of
# its ring in turn on this GPU) and compared with the simulator's prediction for the same layer,
# predicted on this GPU kind's cluster and calibration.
#   1. build `sparsering` (CUDA, sm_90a, Release) in $BUILD, as the other device scripts do;
#   2. unless CALIBRATE=0, calibrate this GPU first (measure/device/run_calibrate_on_device.sh: the
#      benchmark grid, then the calibration replays and the refit with their cells, about 4 minutes),
#      keeping the calibrated GPU config in $BUILD/matrix/<kind>/ (the tree's config is never
#      used stale: with CALIBRATE=0 a calibration made by an earlier call of this script on the
#      same machine is reused, and the script stops if there is none);
#   3. synthesize the traces the cases need (seed 1, one sample each);
#   4. replay each case (results kept in $BUILD/matrix/<kind>/results/<case>/ so that a second call
#      on a warm machine resumes where the first stopped); stops starting cases when fewer than
#      CASE_BUDGET_S seconds are left of BUDGET_S;
#      While the cases run, nvidia-smi samples the SM clock, power and clock-event reasons every
#      100 ms (logs/gpu-clocks.csv, the cases' times in logs/case-times.tsv, a summary per case in
#      logs/gpu-clocks.txt by measure/device/gpu_clock_summary.py);
#   5. packs the results into $OUT/matrix-<kind>.tgz (validation.json per case, the calibrated
#      GPU config, the calibration's raw data, logs) and prints the clocks of all cases and the table
#      (measure/validation/validation_matrix_table.py) last.
#   BUDGET_S=560      seconds for this call
#   CASE_BUDGET_S=45  seconds a case may take (also its timeout)
#   CASES=regex       only the cases whose name matches
#   ITERATIONS=3      timed repetitions per kernel (medians)
#   LAYER=12          model layer whose patterns are run
#   CALIBRATE=1|0|tree  calibrate first (1), reuse this machine's earlier calibration (0), or take
#                     the tree's GPU config as it is (tree: a dry run; its calibration may be stale)
#   PLANS=dir         the plans replayed (default configs/plans/validation/matrix; the calibration's
#                     replayed cells: configs/plans/calibration, docs/calibration.md)
#   SET=name          names the results: $BUILD/<SET>-results/<kind>/, $OUT/<SET>-<kind>.tgz (default matrix)
#   TRACE_PRIOR=file  synthesize the traces from this sparsity prior instead of each model's own
# Third-party dependencies come from .device/deps (kernels/bench/make_device_deps.sh).
set -uo pipefail
OUT=${OUT:-$PWD/out-matrix}
export BUILD=${BUILD:-build-device}
BUDGET_S=${BUDGET_S:-560}
CASE_BUDGET_S=${CASE_BUDGET_S:-45}
CASES=${CASES:-.}
ITERATIONS=${ITERATIONS:-3}
LAYER=${LAYER:-12}
CALIBRATE=${CALIBRATE:-1}
PLANS=${PLANS:-configs/plans/validation/matrix}
SET=${SET:-matrix}
TRACE_PRIOR=${TRACE_PRIOR:-}
# SPARSERING_COMMIT (in the environment) names the tree's commit in every result; without it
# `validate` records `git rev-parse HEAD`, marked "+modified" when the tracked files differ from it
# (a device copy's git metadata can be older than its files).
start=$(date +%s)
left() { echo $(( BUDGET_S - ($(date +%s) - start) )); }
stamp() { echo "[matrix $(( $(date +%s) - start ))s] $*"; }
mkdir -p "$OUT"

gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case "$gpu_name" in
  *H100*) KIND=h100-sxm; CLUSTER=configs/clusters/h100-16x8-ndr.yaml ;;
  *H200*) KIND=h200; CLUSTER=configs/clusters/h200-16x8-ndr.yaml ;;
  *) echo "no validation matrix cluster for GPU '$gpu_name' (H100 SXM and H200 are known)"; exit 2 ;;
esac
GPU_CONFIG=configs/gpus/$KIND.yaml
WORK=$PWD/$BUILD/$SET/$KIND
RESULTS=$PWD/$BUILD/$SET-results/$KIND
mkdir -p "$RESULTS" "$WORK/plans" "$WORK/logs"
stamp "GPU: $gpu_name -> $GPU_CONFIG, predicted on $CLUSTER; commit ${SPARSERING_COMMIT:-as validate finds it}"

# 1-2. Build and calibrate. The calibration script builds `sparsering` in $BUILD.
if [ "$CALIBRATE" = 1 ]; then
  GPU_CONFIG=$GPU_CONFIG OUT="$OUT/calibrate" CALIBRATE_ARGS="${CALIBRATE_ARGS:---repeats 7 --banded}" \
    bash measure/device/run_calibrate_on_device.sh > "$WORK/logs/calibrate.log" 2>&1
  rc=$?
  tail -25 "$WORK/logs/calibrate.log"
  [ $rc -eq 0 ] || { stamp "calibration FAILED (rc $rc)"; exit 1; }
  cp "$GPU_CONFIG" "$WORK/calibrated-gpu.yaml"
  rm -rf "$WORK/calibration-raw" && cp -r "$OUT/calibrate" "$WORK/calibration-raw"
  rm -rf "$OUT/calibrate"
elif [ "$CALIBRATE" = tree ]; then
  cp "$GPU_CONFIG" "$WORK/calibrated-gpu.yaml"  # the tree's calibration as it is (a dry run of the matrix)
elif [ ! -f "$WORK/calibrated-gpu.yaml" ]; then
  stamp "CALIBRATE=0 but this machine has no calibration from an earlier call ($WORK/calibrated-gpu.yaml)"; exit 2
fi
prefix=""
if [ -d .device/deps ]; then
  prefix="-DCMAKE_PREFIX_PATH=$PWD/.device/deps"
  export PATH="$PWD/.device/deps/bin:$PATH" LD_LIBRARY_PATH="$PWD/.device/deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
if [ ! -x "$BUILD/cli/sparsering" ] || ! cmake --build "$BUILD" --target sparsering -j16 > "$WORK/logs/build.log" 2>&1; then
  cmake -S . -B "$BUILD" -G Ninja -DSPARSERING_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5 $prefix > "$WORK/logs/build.log" 2>&1 &&
    cmake --build "$BUILD" --target sparsering -j16 >> "$WORK/logs/build.log" 2>&1 ||
    { stamp "build FAILED"; grep -E "error" "$WORK/logs/build.log" | head -30; exit 1; }
fi
BIN=$PWD/$BUILD/cli/sparsering
stamp "built; calibration: $(grep -m1 'date:' "$WORK/calibrated-gpu.yaml" | tr -s ' ')"

# The cluster the cases are predicted on, pointing at the calibrated GPU config.
sed "s|^gpu: .*|gpu: $WORK/calibrated-gpu.yaml|" "$CLUSTER" > "$WORK/cluster.yaml"

# 3-4. Traces and cases.
TRACES=$PWD/$BUILD/validation-traces
mkdir -p "$TRACES"
if [ -n "$TRACE_PRIOR" ] && [ ! -f "$TRACE_PRIOR" ]; then stamp "TRACE_PRIOR $TRACE_PRIOR does not exist"; exit 2; fi
source measure/device/replay_plan.sh
# The GPU's SM clock, power and clock-event reasons every 100 ms while the cases run, and each
# case's start and end: the power cap lowers the clock under dense work (docs/VALIDATION.md,
# "The power cap"); measure/device/gpu_clock_summary.py summarizes them per case.
CLOCKS=$WORK/logs/gpu-clocks.csv
CASE_TIMES=$WORK/logs/case-times.tsv
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader,nounits -lms 100 >> "$CLOCKS" 2>/dev/null &
sampler=$!
for plan in "$PLANS"/*.yaml; do
  name=$(basename "$plan" .yaml)
  [[ "$name" =~ $CASES ]] || continue
  result=$RESULTS/$name
  if [ -f "$result/validation.json" ]; then stamp "$name: done earlier"; continue; fi
  if [ "$(left)" -lt "$CASE_BUDGET_S" ]; then stamp "$name: not started ($(left) s left)"; continue; fi
  t0=$(date +%s.%N)
  : > "$WORK/logs/$name.log"
  if replay_plan "$BIN" "$plan" "$WORK/cluster.yaml" "$TRACES" "$TRACE_PRIOR" "$LAYER" "$ITERATIONS" "$CASE_BUDGET_S" \
       "$result" "$WORK/logs/$name.log" "$WORK/plans"; then
    stamp "$name: ok ($(( $(date +%s) - ${t0%.*} )) s)"
  else
    stamp "$name: FAILED ($(( $(date +%s) - ${t0%.*} )) s): $(tail -2 "$WORK/logs/$name.log" | tr '\n' ' ')"
  fi
  printf '%s\t%s\t%s\n' "$name" "$t0" "$(date +%s.%N)" >> "$CASE_TIMES"
done
kill "$sampler" 2> /dev/null
[ -f "$CASE_TIMES" ] && /usr/bin/python3 measure/device/gpu_clock_summary.py "$CLOCKS" "$CASE_TIMES" > "$WORK/logs/gpu-clocks.txt"

# 5. Results and the table.
tar -czf "$OUT/$SET-$KIND.tgz" -C "$RESULTS/.." "$KIND" -C "$WORK" calibrated-gpu.yaml logs \
  $( [ -d "$WORK/calibration-raw" ] && echo calibration-raw)
stamp "packed $(ls "$RESULTS" | wc -l) results into $SET-$KIND.tgz"
[ -f "$WORK/logs/gpu-clocks.txt" ] && tail -1 "$WORK/logs/gpu-clocks.txt"
/usr/bin/python3 measure/validation/validation_matrix_table.py "$RESULTS/.." | tail -12
