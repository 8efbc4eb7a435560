#!/usr/bin/env bash
# The validation run (docs/VALIDATION.md): builds the sparsering binary (CUDA + NCCL, sm_90a, -j16),
# synthesizes the Qwen2.5-3B traces the cases need, runs every case of configs/plans/validation/
# that the GPUs present allow (2-GPU rings when >= 2 GPUs, 4-GPU flat and hierarchical rings when
# >= 4, replays of 8 and 32 virtual ranks on one GPU), writes each case's validation.json under
# $OUT/<case>/ and prints the validation table last (figures read from the JSON files).
#   GPUS=n          GPUs to use (default: all visible)
#   CASES=regex     only the cases whose name matches (default: all)
#   ITERATIONS=i    timed repetitions per measurement (default 3)
#   LAYER=l         model layer whose patterns are run (default 12)
# Third-party dependencies come from .device/deps (kernels/bench/make_device_deps.sh), configured
# exactly as kernels/bench/run_on_device.sh does.
set -uo pipefail
OUT=${OUT:-$PWD/out-validation}
mkdir -p "$OUT"
BUILD=${BUILD:-build-validation-device}
ITERATIONS=${ITERATIONS:-3}
LAYER=${LAYER:-12}
CASES=${CASES:-.}
# SPARSERING_COMMIT (in the environment) names the tree's commit in every result; without it
# `validate` records `git rev-parse HEAD`, marked "+modified" when the tracked files differ from it
# (a device copy's git metadata can be older than its files).
export PYTHONUNBUFFERED=1
start=$(date +%s)
stamp() { echo "[validation $(( $(date +%s) - start ))s] $*"; }
GPUS=${GPUS:-$(nvidia-smi -L 2>/dev/null | wc -l)}
stamp "GPUs: $GPUS ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1))"

prefix=""
if [ -d .device/deps ]; then
  prefix="-DCMAKE_PREFIX_PATH=$PWD/.device/deps"
  export PATH="$PWD/.device/deps/bin:$PATH" LD_LIBRARY_PATH="$PWD/.device/deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
if ! cmake -S . -B $BUILD -G Ninja -DSPARSERING_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_POLICY_VERSION_MINIMUM=3.5 $prefix > "$OUT/build.log" 2>&1; then
  stamp "configure FAILED"; tail -30 "$OUT/build.log"; exit 1
fi
if ! cmake --build $BUILD --target sparsering -j16 >> "$OUT/build.log" 2>&1; then
  stamp "build FAILED"; grep -E "error|Error" "$OUT/build.log" | head -30; exit 1
fi
BIN=$BUILD/cli/sparsering
stamp "built"

# Traces: one synthetic sample per length (default 8192 candidate slots), made here (75 MB each).
TRACES=$BUILD/validation-traces
mkdir -p $TRACES
trace_for() {  # tokens -> path
  local path=$TRACES/qwen2.5-3b-$1.safetensors
  if [ ! -f "$path" ]; then
    $BIN trace synth --model configs/models/qwen2.5-3b.yaml --seq-len "$1" --samples 1 --seed 1 --threads 0 \
      --out "$path" > /dev/null 2>> "$OUT/traces.log" || { echo "trace synth $1 failed" >> "$OUT/traces.log"; }
  fi
  echo "$path"
}

run_case() {  # plan, then extra flags
  local plan=$1; shift
  local name; name=$(basename "$plan" .yaml)
  [[ "$name" =~ $CASES ]] || return 0
  local tokens; tokens=$(awk '/^seq_len_tokens:/ {print $2}' "$plan")
  local trace=""
  grep -q "enabled: true" "$plan" && trace="--trace $(trace_for "$tokens")"
  local t0; t0=$(date +%s)
  if $BIN validate "$plan" $trace --layer "$LAYER" --iterations "$ITERATIONS" "$@" --out "$OUT/$name" --force \
       > "$OUT/$name.log" 2>&1; then
    stamp "$name: ok ($(( $(date +%s) - t0 ))s)"
  else
    stamp "$name: FAILED ($(( $(date +%s) - t0 ))s): $(tail -2 "$OUT/$name.log" | tr '\n' ' ')"
  fi
}

P=configs/plans/validation
for plan in $P/r0*.yaml; do run_case "$plan" --replay; done
if [ "$GPUS" -ge 2 ]; then for plan in $P/v*-2gpu.yaml; do run_case "$plan"; done; fi
if [ "$GPUS" -ge 4 ]; then for plan in $P/v*-4gpu-*.yaml; do run_case "$plan"; done; fi
stamp "cases done"

# The table (docs/VALIDATION.md), from the JSON files.
/usr/bin/python3 - "$OUT" <<'PY' | tee "$OUT/table.md"
import json, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
rows, errs, dense_fwd = [], [], {}
docs = [json.loads(p.read_text()) | {"case": p.parent.name} for p in sorted(out.glob("*/validation.json"))]
for d in docs:
    if d["dense"] and d["mode"] == "ring":
        dense_fwd[(d["seq_len_tokens"], d["ranks"], d["layout"])] = d
def pct(x): return f"{100 * x:+.1f}%"
print("| case | mode | W (levels) | layout | N | attention | fwd meas / pred ms (err) | bwd meas / pred ms (err) "
      "| compute cells median / worst err | step <= 1.1 max(comp, comm) | sparse speedup (>= 0.6/density) | target met |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for d in docs:
    f, b = d["forward"], d["backward"]
    errs += [abs(f["error"]), abs(b["error"])]
    levels = "x".join(str(s) for s in d["ring_levels"])
    cells = f"{100 * f['compute_error']['median_abs']:.1f}% / {100 * f['compute_error']['worst_abs']:.1f}% fwd, " \
            f"{100 * b['compute_error']['median_abs']:.1f}% / {100 * b['compute_error']['worst_abs']:.1f}% bwd"
    ratios = f["step_overlap_ratio"] + b["step_overlap_ratio"]
    overlap = "-" if d["mode"] != "ring" or not ratios else \
        f"{max(ratios):.2f} ({'met' if d['targets']['step_overlap_met'] else 'MISSED'})"
    speed = "-"
    key = (d["seq_len_tokens"], d["ranks"], d["layout"])
    if not d["dense"] and d["mode"] == "ring" and key in dense_fwd and d["seq_len_tokens"] >= 262144:
        dd = dense_fwd[key]
        density = (d["predicted_work"]["tiles"] + d["predicted_work"]["column_chunks"]) / max(1, dd["predicted_work"]["tiles"])
        s = dd["forward"]["measured_ms"] / max(1e-9, f["measured_ms"])
        speed = f"{s:.1f}x vs {0.6 / density:.1f}x ({'met' if s >= 0.6 / density else 'MISSED'})"
    met = "yes" if d["targets"]["layer_time_met"] else "NO"
    rows.append(d)
    print(f"| {d['case']} | {d['mode']} | {d['ranks']} ({levels}) | {d['layout']} | {d['seq_len_tokens'] // 1024}K | "
          f"{'dense' if d['dense'] else 'sparse'} | {f['measured_ms']:.2f} / {f['predicted_ms']:.2f} ({pct(f['error'])}) | "
          f"{b['measured_ms']:.2f} / {b['predicted_ms']:.2f} ({pct(b['error'])}) | {cells} | {overlap} | {speed} | {met} |")
if errs:
    med, worst = statistics.median(errs), max(errs)
    print(f"\nper-layer attention time, all cases, fwd and bwd: median |error| {100 * med:.1f}% "
          f"(target 5%: {'met' if med <= 0.05 else 'MISSED'}), worst {100 * worst:.1f}% "
          f"(target 10%: {'met' if worst <= 0.10 else 'MISSED'}); {len(docs)} cases")
else:
    print("no validation.json written")
PY
stamp "done"
