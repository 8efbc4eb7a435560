#!/usr/bin/env bash
# Predicts the validation matrix again, without a GPU: for every case with a recorded replay
# (docs/validation/matrix/<kind>/<case>/validation.json), `sparsering validate --replay --measured`
# runs this tree's simulator on the case's plan and compares it with the recorded compute matrices
# (docs/VALIDATION.md, "Predicting the matrix again"). Writes OUT/<kind>/<case>/validation.json and
# prints the matrix table (measure/validation/validation_matrix_table.py) of OUT.
#
#   BIN=build/ci/cli/sparsering OUT=/tmp/matrix-again bash measure/validation/predict_matrix.sh
#
# KINDS (default "h200 h100-sxm") picks the GPU kinds; each is predicted on
# configs/clusters/<kind without -sxm>-16x8-ndr.yaml with GPU config GPU_<kind> (dashes as underscores) if set
# (a file path, e.g. an older calibration to compare with), else configs/gpus/<kind>.yaml. CASES is a regex over case names.
# TRACES (default OUT/traces) holds the synthetic traces the sparse cases need (`trace synth
# --seed 1`, one sample, as measure/device/run_matrix_on_device.sh makes them); missing ones are made.
# The calibration replays are predicted again the same way (docs/calibration.md, "Replayed ring
# cells"), from their plans, recorded files and sparsity prior:
#   PLANS=configs/plans/calibration RECORDED=docs/calibration/h200-8a07dff2-replays \
#   PRIOR=configs/sparsity/llama-3-8b-262k.yaml KINDS=h200 OUT=DIR bash measure/validation/predict_matrix.sh
# (RECORDED: the folder of the recorded cases, default MATRIX/<kind>; PLANS: their plans, default
# configs/plans/validation/matrix; PRIOR: the traces' sparsity prior, default the model's own).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-build/ci/cli/sparsering}
OUT=${OUT:?set OUT to a folder for the predictions}
KINDS=${KINDS:-"h200 h100-sxm"}
CASES=${CASES:-.}
LAYER=${LAYER:-12}
MATRIX=${MATRIX:-docs/validation/matrix}
PLANS=${PLANS:-configs/plans/validation/matrix}
PRIOR=${PRIOR:-}
TRACES=${TRACES:-$OUT/traces}
source measure/device/replay_plan.sh  # plan_trace and plan_copy: the replays' traces and plan copies
mkdir -p "$OUT" "$TRACES"
for kind in $KINDS; do
  cluster=configs/clusters/${kind%-sxm}-16x8-ndr.yaml
  [ -f "$cluster" ] || { echo "no cluster $cluster" >&2; exit 2; }
  gpu_var="GPU_${kind//-/_}"
  gpu=${!gpu_var:-configs/gpus/$kind.yaml}
  mkdir -p "$OUT/$kind/.plans"
  sed "s|^gpu: .*|gpu: $(realpath "$gpu")|" "$cluster" > "$OUT/$kind/.plans/cluster.yaml"
  for plan in "$PLANS"/*.yaml; do
    name=$(basename "$plan" .yaml)
    [[ "$name" =~ $CASES ]] || continue
    recorded=${RECORDED:-$MATRIX/$kind}/$name/validation.json
    [ -f "$recorded" ] || { echo "$kind $name: no recorded replay, skipped" >&2; continue; }
    trace_arg=()
    trace=$(plan_trace "$BIN" "$plan" "$TRACES" "$PRIOR" /dev/stderr)
    [ -n "$trace" ] && trace_arg=(--trace "$trace")
    plan_copy "$plan" "$OUT/$kind/.plans/cluster.yaml" "$OUT/$kind/.plans/$name.yaml"
    ranks=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['ranks'])" "$recorded")
    "$BIN" validate "$OUT/$kind/.plans/$name.yaml" "${trace_arg[@]}" --replay --ranks "$ranks" --layer "$LAYER" \
      --measured "$recorded" --out "$OUT/$kind/$name" --force > "$OUT/$kind/.plans/$name.log" 2>&1 ||
      { echo "$kind $name: FAILED: $(tail -2 "$OUT/$kind/.plans/$name.log")" >&2; continue; }
    rm -f "$OUT/$kind/$name/timeline.json"
  done
done
python3 measure/validation/validation_matrix_table.py "$OUT"
