#!/usr/bin/env bash
# The GPU script of the PyTorch package (docs/python.md): configure and build
# sparsering_kernels_capi and sparsering (CUDA sm_90a, Release; third-party dependencies from
# .device/deps as kernels/bench/run_on_device.sh does), run the package's GPU tests against the CPU
# oracle path and SDPA (tests/python/gpu_test.py) and its CPU tests, benchmark vs_sparse_attention
# against the same kernels through the C API and SDPA flash at 128K tokens
# (python/bench_vs_attention.py), then train the example (examples/train_long_context.py) for
# about two minutes. Logs and JSON go to $OUT; a short table is printed last.
#   SEQ_LEN=131072      benchmark length (tokens)
#   TRAIN_SEQ_LEN=65536 training length (tokens)
#   TRAIN_MINUTES=2     training time
#   STAGES="build tests bench train"
set -uo pipefail
OUT=${OUT:-$PWD/out-device-python}
mkdir -p "$OUT"
SEQ_LEN=${SEQ_LEN:-131072}
TRAIN_SEQ_LEN=${TRAIN_SEQ_LEN:-65536}
TRAIN_MINUTES=${TRAIN_MINUTES:-2}
STAGES=${STAGES:-"build tests bench train"}
BUILD=build-device
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
start=$(date +%s)
stamp() { echo "[device $(( $(date +%s) - start ))s] $*"; }
has() { case " $STAGES " in *" $1 "*) return 0;; *) return 1;; esac; }
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  python3 -c 'import transformers; print("transformers", transformers.__version__)' 2>&1 | tail -1
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
} > "$OUT/env.txt" 2>&1
stamp "env: $(head -2 "$OUT/env.txt" | tr '\n' ' ')"

if has build; then
  prefix=""
  if [ -d .device/deps ]; then
    prefix="-DCMAKE_PREFIX_PATH=$PWD/.device/deps"
    export PATH="$PWD/.device/deps/bin:$PATH" LD_LIBRARY_PATH="$PWD/.device/deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  fi
  if ! cmake -S . -B $BUILD -G Ninja -DSPARSERING_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_POLICY_VERSION_MINIMUM=3.5 $prefix > "$OUT/build.log" 2>&1; then
    stamp "configure FAILED"; tail -30 "$OUT/build.log"; exit 1
  fi
  if ! cmake --build $BUILD --target sparsering_kernels_capi sparsering vs_oracle_tool -j16 >> "$OUT/build.log" 2>&1; then
    stamp "build FAILED"; grep -E "error|Error" "$OUT/build.log" | head -30; exit 1
  fi
  stamp "built"
fi
export SPARSERING_KERNELS_LIB=$PWD/$BUILD/kernels/cuda/libsparsering_kernels.so SPARSERING_CLI=$PWD/$BUILD/cli/sparsering

gpu_status=skipped; cpu_status=skipped
if has tests; then
  python3 -X faulthandler tests/python/gpu_test.py > "$OUT/gpu_test.log" 2>&1; rc=$?
  gpu_status=$([ $rc -eq 0 ] && echo passed || echo "FAILED($rc)")
  stamp "GPU tests $gpu_status: $(tail -1 "$OUT/gpu_test.log")"
  grep FAIL "$OUT/gpu_test.log" | head -10
  python3 tests/python/op_cpu_test.py --oracle $BUILD/tests/python/vs_oracle_tool --workdir "$OUT/op_cpu" \
    > "$OUT/op_cpu_test.log" 2>&1; rc=$?
  cpu_status=$([ $rc -eq 0 ] && echo passed || echo "FAILED($rc)")
  stamp "CPU oracle tests (this machine's torch) $cpu_status: $(tail -1 "$OUT/op_cpu_test.log")"
fi

if has bench; then
  timeout 240 python3 -X faulthandler python/bench_vs_attention.py --seq-len "$SEQ_LEN" --out "$OUT/bench.json" \
    > "$OUT/bench.log" 2>&1
  stamp "bench exit $?"
fi

if has train; then
  timeout $(( TRAIN_MINUTES * 60 + 150 )) python3 -X faulthandler examples/train_long_context.py \
    --seq-len "$TRAIN_SEQ_LEN" --minutes "$TRAIN_MINUTES" --json "$OUT/train.json" > "$OUT/train.log" 2>&1
  stamp "train exit $?"
fi

echo "== summary (tests: GPU $gpu_status, CPU oracle $cpu_status)"
[ -f "$OUT/bench.log" ] && tail -5 "$OUT/bench.log"
[ -f "$OUT/train.log" ] && tail -3 "$OUT/train.log"
