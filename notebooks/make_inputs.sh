#!/usr/bin/env bash
# Writes the inputs the notebooks read: CLI outputs on the bundled examples, nothing else.
#   notebooks/make_inputs.sh [SPARSERING_BINARY] [OUT_DIR]
# Defaults: $SPARSERING or build/cli/sparsering, and $SPARSERING_NOTEBOOK_INPUTS or
# build-notebooks/inputs (git-ignored, like every build-* folder).
# The notebooks find the folder through SPARSERING_NOTEBOOK_INPUTS (notebooks/run_notebooks.sh
# sets it). About a minute on two cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
sr=${1:-${SPARSERING:-$repo/build/cli/sparsering}}
out=${2:-${SPARSERING_NOTEBOOK_INPUTS:-$repo/build-notebooks/inputs}}
[ -x "$sr" ] || { echo "make_inputs.sh: no sparsering binary at $sr (build it, or pass its path)" >&2; exit 2; }
mkdir -p "$out"
sample=$repo/traces/samples/qwen2.5-3b-32k.safetensors

# traces.ipynb: the sample trace summarized at several recall targets (per head at 0.95).
"$sr" trace info "$sample" --per-head --format json > "$out/trace_info_per_head.json"
for p in 0.5 0.7 0.8 0.9 0.95 0.99 1.0; do
  "$sr" trace info "$sample" --recall "$p" --format json > "$out/trace_info_recall_$p.json"
done

# plans.ipynb: the MTraining setup (Qwen2.5-3B, 512K tokens, 32 A100 in 4 nodes) under three
# layouts, on a synthetic 512K trace, and the tuner's ranked candidates on the same inputs.
"$sr" trace synth --model "$repo/configs/models/qwen2.5-3b.yaml" --seq-len 512K --seed 1 \
  --vertical-slots 1024 --slash-slots 2048 --out "$out/qwen2.5-3b-512k.safetensors" --force > /dev/null
for layout in contiguous zigzag striped; do
  "$sr" simulate --plan "$repo/configs/plans/qwen2.5-3b-512k-mtraining-$layout-flat.yaml" \
    --trace "$out/qwen2.5-3b-512k.safetensors" --out "$out/sim-$layout" --force > /dev/null
  rm -f "$out/sim-$layout/timeline.json"  # the Perfetto file; the notebooks draw from result.json
done
"$sr" tune --model "$repo/configs/models/qwen2.5-3b.yaml" --cluster "$repo/configs/clusters/mtraining-4x8-a100.yaml" --trace "$out/qwen2.5-3b-512k.safetensors" \
  --seq-len 512K --top 25 --format json --out "$out/tuned.yaml" --force > "$out/tune.json"

cat > "$out/inputs.json" <<JSON
{"sample_trace": "$sample", "sim": {"contiguous": "sim-contiguous/result.json", "zigzag": "sim-zigzag/result.json",
 "striped": "sim-striped/result.json"}, "tune": "tune.json", "validation_dir": "$repo/docs/validation"}
JSON
echo "notebook inputs written to $out"
