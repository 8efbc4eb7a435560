# Sourced by the device scripts that replay plans on one GPU (run_matrix_on_device.sh: the
# validation matrix; run_calibrate_on_device.sh: the calibration replays). Defines
#   replay_plan BIN PLAN CLUSTER TRACES PRIOR LAYER ITERATIONS TIMEOUT_S RESULT LOG PLAN_COPIES
# which replays PLAN (`BIN validate --replay`, every virtual rank in turn on this GPU), predicted on
# CLUSTER: the plan is copied into PLAN_COPIES with its model and cluster made absolute; a sparse
# plan's trace is synthesized once into TRACES (seed 1, one sample; from the sparsity prior file
# PRIOR when it is not empty, else the model's own) and reused; the layer LAYER runs ITERATIONS
# timed repetitions, within TIMEOUT_S seconds. On success RESULT holds validation.json and
# cells.csv (the timeline is dropped); on failure RESULT is left as it was. The output goes to
# LOG. Returns validate's exit status (124 on timeout).
replay_plan() {
  local bin=$1 plan=$2 cluster=$3 traces=$4 prior=$5 layer=$6 iterations=$7 timeout_s=$8 result=$9 log=${10}
  local copies=${11}
  local name model tokens trace prior_tag="" trace_arg=() prior_arg=()
  name=$(basename "$plan" .yaml)
  model=$(sed -n 's|^model: .*/models/\(.*\)\.yaml|\1|p' "$plan")
  tokens=$(awk '/^seq_len_tokens:/ {print $2}' "$plan")
  if [ -n "$prior" ]; then
    prior_arg=(--prior "$prior")
    prior_tag="-prior-$(basename "$prior" .yaml)"
  fi
  mkdir -p "$traces" "$copies"
  if grep -q "enabled: true" "$plan"; then
    trace=$traces/$model-$tokens$prior_tag.safetensors
    [ -f "$trace" ] || "$bin" trace synth --model "configs/models/$model.yaml" ${prior_arg[@]+"${prior_arg[@]}"} \
      --seq-len "$tokens" --samples 1 --seed 1 --threads 0 --out "$trace" > /dev/null 2>> "$log"
    trace_arg=(--trace "$trace")
  fi
  sed -e "s|^model: .*|model: $PWD/configs/models/$model.yaml|" -e "s|^cluster: .*|cluster: $cluster|" \
    "$plan" > "$copies/$name.yaml"
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
