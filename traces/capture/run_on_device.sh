#!/usr/bin/env bash
# The GPU machine's script for the capture (docs/capture.md): builds a randomly initialised model
# of the Qwen2 architecture in Qwen2.5-3B's shape (transformers Qwen2Config; no download), captures
# 128K tokens on one GPU with the Python capture (wall time and peak GPU memory recorded) while
# dumping its post-RoPE Q/K, runs the CUDA capture path on that dump, and runs the agreement test
# (fresh random dumps, the model's dump, and the live Python trace against the CUDA one).
# Logs and reports go to $OUT; a short table is printed last.
#   SEQ_LEN (default 128K)  LAYERS (default 36)  SLOTS (default 1024: keeps the trace under 16 MiB)
# C++ dependencies the machine lacks come from .device/deps (kernels/bench/make_device_deps.sh);
# configure flags as kernels/bench/run_on_device.sh.
set -uo pipefail
OUT=${OUT:-$PWD/out-device}
mkdir -p "$OUT"
SEQ_LEN=${SEQ_LEN:-128K}
LAYERS=${LAYERS:-36}
SLOTS=${SLOTS:-1024}
BUILD=build-device-capture
WORK=${WORK:-/tmp/sparsering-capture}
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/traces/capture${PYTHONPATH:+:$PYTHONPATH}"
start=$(date +%s)
stamp() { echo "[device $(( $(date +%s) - start ))s] $*"; }
rm -rf "$WORK"; mkdir -p "$WORK"

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)'
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown) (working tree may differ)"
} > "$OUT/env.txt" 2>&1
stamp "env: $(sed -n 2p "$OUT/env.txt"); $(sed -n 3p "$OUT/env.txt")"

# Build the CUDA capture driver in the background while the model runs.
prefix=""
if [ -d .device/deps ]; then
  prefix="-DCMAKE_PREFIX_PATH=$PWD/.device/deps"
  export PATH="$PWD/.device/deps/bin:$PATH" LD_LIBRARY_PATH="$PWD/.device/deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
( cmake -S . -B $BUILD -G Ninja -DSPARSERING_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5 $prefix && cmake --build $BUILD --target trace_capture_driver -j16 ) \
  > "$OUT/build.log" 2>&1 &
build_pid=$!

# A config-only model folder: Qwen2.5-3B's shape (configs/models/qwen2.5-3b.yaml), LAYERS layers.
python3 - "$WORK/qwen2.5-3b-random" "$LAYERS" <<'PY' > "$OUT/model.log" 2>&1
import sys
from transformers import Qwen2Config
Qwen2Config(vocab_size=151936, hidden_size=2048, intermediate_size=11008, num_hidden_layers=int(sys.argv[2]),
            num_attention_heads=16, num_key_value_heads=2, max_position_embeddings=131072, rope_theta=1000000.0,
            rms_norm_eps=1e-6, tie_word_embeddings=True, torch_dtype="bfloat16").save_pretrained(sys.argv[1])
PY
stamp "model config written ($LAYERS layers)"

trace="$OUT/qwen2.5-3b-random-$SEQ_LEN.safetensors"
python3 -m sparsering_capture --model "$WORK/qwen2.5-3b-random" --random-tokens --seq-len "$SEQ_LEN" --out "$trace" \
  --slots "$SLOTS" --dtype bf16 --device cuda --dump-qk "$WORK/dump" --model-name qwen2.5-3b-random-init \
  --report "$OUT/capture_report.json" --force > "$OUT/capture.log" 2>&1
capture_status=$?
stamp "python capture (exit $capture_status): $(tail -1 "$OUT/capture.log")"

wait $build_pid
build_status=$?
stamp "build of trace_capture_driver (exit $build_status)"
[ $build_status -ne 0 ] && grep -E "error|Error" "$OUT/build.log" | head -20
DRIVER=$BUILD/tests/capture/trace_capture_driver

cpp_status=skipped agree_status=skipped
if [ $build_status -eq 0 ] && [ $capture_status -eq 0 ]; then
  t0=$(date +%s.%N)
  $DRIVER trace capture --qk "$WORK/dump" --out "$WORK/cpp.safetensors" --slots "$SLOTS" --format json --force \
    > "$OUT/cpp_capture.json" 2> "$OUT/cpp_capture.log" && cpp_status=ok || cpp_status=FAILED
  stamp "CUDA capture on the dump: $cpp_status ($(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s)"
  model_dump=(--dump "$WORK/dump" --python-trace "$trace")
  if [ $(( $(date +%s) - start )) -gt ${DUMP_CHECK_AFTER_S:-130} ]; then  # keep inside a short device lease
    model_dump=(); stamp "late: agreement on fresh random dumps only"
  fi
  python3 tests/capture/agreement_test.py --capture $DRIVER --source . "${model_dump[@]}" \
    --slots "$SLOTS" > "$OUT/agreement.log" 2>&1 && agree_status=ok || agree_status=FAILED
  stamp "agreement test: $agree_status"
  tail -8 "$OUT/agreement.log"
fi

python3 - "$OUT/capture_report.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except OSError:
    sys.exit("no capture report")
print(f"| {'model':<28} | {'tokens':>7} | {'layers':>6} | {'wall s':>7} | {'peak GPU GiB':>12} | gpu")
print(f"| {'qwen2.5-3b shape, random':<28} | {r['seq_len']:>7} | {r['layers']:>6} | {r['wall_s']:>7.1f} | "
      f"{r['peak_gpu_bytes'] / 2**30:>12.2f} | {r['gpu']}")
PY
echo "python capture exit $capture_status, CUDA capture $cpp_status, agreement $agree_status"
