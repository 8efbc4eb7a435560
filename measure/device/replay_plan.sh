# Sourced by the device scripts that replay plans on one GPU (run_matrix_on_device.sh: the
# validation matrix; run_calibrate_on_device.sh: the calibration replays) and by the script that
# predicts their recorded replays again without one (measure/validation/predict_matrix.sh), which
# must use the same traces. Defines plan_trace and plan_copy (below) and
#   replay_plan BIN PLAN CLUSTER TRACES PRIOR LAYER ITERATIONS TIMEOUT_S RESULT LOG PLAN_COPIES
# which replays PLAN (`BIN validate --replay`, every virtual rank in turn on this GPU), predicted on
# CLUSTER: the plan is copied into PLAN_COPIES with its model and cluster made absolute; a sparse
# plan's trace is synthesized once into TRACES (seed 1, one sample; from the sparsity prior file
# PRIOR when it is not empty, else the model's own) and reused; the layer LAYER runs ITERATIONS
# timed repetitions, within TIMEOUT_S seconds. On success RESULT holds validation.json and
# cells.csv (the timeline is dropped); on failure RESULT is left as it was. The output goes to
# LOG. Returns validate's exit status (124 on timeout; 1 when the trace cannot be made).

# plan_trace BIN PLAN TRACES PRIOR LOG: prints the trace a sparse PLAN is replayed (and predicted
# again, measure/validation/predict_matrix.sh) with, synthesizing it into TRACES first when it is
# missing (seed 1, one sample; from the sparsity prior file PRIOR when it is not empty, else the
# model's own; its errors go to LOG); prints nothing for a dense plan.
plan_trace() {
  local bin=$1 plan=$2 traces=$3 prior=$4 log=$5
  local model tokens trace prior_tag="" prior_arg=()
  grep -q "enabled: true" "$plan" || return 0
  model=$(sed -n 's|^model: .*/models/\(.*\)\.yaml|\1|p' "$plan")
  tokens=$(awk '/^seq_len_tokens:/ {print $2}' "$plan")
  if [ -n "$prior" ]; then
    prior_arg=(--prior "$prior")
    prior_tag="-prior-$(basename "$prior" .yaml)"
  fi
  mkdir -p "$traces"
  trace=$traces/$model-$tokens$prior_tag.safetensors
  [ -f "$trace" ] || "$bin" trace synth --model "configs/models/$model.yaml" ${prior_arg[@]+"${prior_arg[@]}"} \
    --seq-len "$tokens" --samples 1 --seed 1 --threads 0 --out "$trace" > /dev/null 2>> "$log" || return 1
  echo "$trace"
}

# plan_copy PLAN CLUSTER COPY: PLAN written to COPY with its model path made absolute and its
# cluster replaced by CLUSTER.
plan_copy() {
  local model
  model=$(sed -n 's|^model: .*/models/\(.*\)\.yaml|\1|p' "$1")
  sed -e "s|^model: .*|model: $PWD/configs/models/$model.yaml|" -e "s|^cluster: .*|cluster: $2|" "$1" > "$3"
}

replay_plan() {
  local bin=$1 plan=$2 cluster=$3 traces=$4 prior=$5 layer=$6 iterations=$7 timeout_s=$8 result=$9 log=${10}
  local copies=${11}
  local name trace trace_arg=()
  name=$(basename "$plan" .yaml)
  mkdir -p "$copies"
  trace=$(plan_trace "$bin" "$plan" "$traces" "$prior" "$log") || return 1
  [ -n "$trace" ] && trace_arg=(--trace "$trace")
  plan_copy "$plan" "$cluster" "$copies/$name.yaml"
  timeout "$timeout_s" "$bin" validate "$copies/$name.yaml" ${trace_arg[@]+"${trace_arg[@]}"} --replay --layer "$layer" \
    --iterations "$iterations" --out "$result.tmp" --force >> "$log" 2>&1
  local code=$?
  if [ "$code" = 0 ]; then
    rm -f "$result.tmp/timeline.json"
    rm -rf "$result"
    mv "$result.tmp" "$result"
  else
    rm -rf "$result.tmp"
  fi
  return "$code"
}
