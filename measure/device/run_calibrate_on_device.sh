#!/usr/bin/env bash
# The GPU machine's calibration run (docs/calibration.md): configure, build the calibrate command
# (-j16), measure the dense GEMM efficiency with torch when present, run `calibrate` (kernel
# benchmarks; with 2+ GPUs and CLUSTER set, also the NCCL hops), then copy the updated YAML files
# and the raw measurements under $OUT and print the fit table last.
#   GPU_CONFIG=configs/gpus/h100-sxm.yaml   GPU config to calibrate (updated in place, copied to $OUT)
#   CLUSTER=configs/clusters/x.yaml         cluster whose LEVEL gets the measured hop curve (2+ GPUs)
#   LEVEL=intra_node                        fabric level of CLUSTER
#   CALIBRATE_ARGS=...                      extra arguments (e.g. --quick, --devices 0,1, --dense-sizes)
#   CALIBRATE_TARGET=sparsering|sparsering_calibrate
#       which binary to build; `sparsering` (default) falls back to the calibrate-only binary
#       (tests/measure/calibration/CMakeLists.txt) when it does not build
# Third-party dependencies the machine lacks come from .device/deps (kernels/bench/make_device_deps.sh).
set -uo pipefail
OUT=${OUT:-$PWD/out-calibrate}
mkdir -p "$OUT/raw" "$OUT/configs"
GPU_CONFIG=${GPU_CONFIG:-configs/gpus/h100-sxm.yaml}
CLUSTER=${CLUSTER:-}
LEVEL=${LEVEL:-intra_node}
CALIBRATE_ARGS=${CALIBRATE_ARGS:-}
TARGET=${CALIBRATE_TARGET:-sparsering}
BUILD=${BUILD:-build-calibrate}
start=$(date +%s)
stamp() { echo "[device $(( $(date +%s) - start ))s] $*"; }

{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv
  nvidia-smi topo -m 2>/dev/null
  nvcc --version | tail -2
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown) (working tree may differ: see git status)"
  git status --short 2>/dev/null | head -40
} > "$OUT/env.txt" 2>&1
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
stamp "$gpus GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"

prefix=""
if [ -d .device/deps ]; then
  prefix="-DCMAKE_PREFIX_PATH=$PWD/.device/deps"
  export PATH="$PWD/.device/deps/bin:$PATH" LD_LIBRARY_PATH="$PWD/.device/deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
if ! cmake -S . -B $BUILD -G Ninja -DSPARSERING_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_POLICY_VERSION_MINIMUM=3.5 $prefix > "$OUT/build.log" 2>&1; then
  stamp "configure FAILED"; tail -30 "$OUT/build.log"; exit 1
fi
BIN=""
if [ "$TARGET" = sparsering ]; then
  if cmake --build $BUILD --target sparsering -j16 >> "$OUT/build.log" 2>&1; then
    BIN=$BUILD/cli/sparsering
  else
    stamp "sparsering did not build (see build.log); building the calibrate-only binary"
    TARGET=sparsering_calibrate
  fi
fi
if [ -z "$BIN" ]; then
  if ! cmake --build $BUILD --target sparsering_calibrate -j16 >> "$OUT/build.log" 2>&1; then
    stamp "build FAILED"; grep -E "error" "$OUT/build.log" | head -30; exit 1
  fi
  BIN=$BUILD/tests/measure/calibration/sparsering_calibrate
fi
stamp "built $BIN"

# Dense GEMM efficiency (cuBLAS through torch): median bf16 8192^3 matmul rate / the config's peak.
gemm_args=""
peak=$(grep -E '^peak_tflops_bf16:' "$GPU_CONFIG" | awk '{print $2}')
if [ -n "$peak" ] && python3 -c 'import torch' 2> /dev/null; then
  eff=$(python3 - "$peak" <<'PY' 2> "$OUT/gemm.log"
import sys, torch
peak = float(sys.argv[1])
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
print(f"{min(tflops / peak, 1.0):.4f}")
PY
)
  [ -n "$eff" ] && gemm_args="--gemm-efficiency $eff"
  stamp "GEMM: $(tail -1 "$OUT/gemm.log") -> efficiency ${eff:-unmeasured}"
fi

cluster_args=""
if [ -n "$CLUSTER" ]; then
  if [ "$gpus" -ge 2 ]; then
    cluster_args="--cluster $CLUSTER --level $LEVEL"
  else
    stamp "CLUSTER given but only $gpus GPU: no hop curve"
  fi
fi
# The device tree is a copy: --force replaces the calibration there; the copies under $OUT are
# what goes back into the repository.
$BIN --out "$OUT/raw" --force -v calibrate --gpu "$GPU_CONFIG" $cluster_args $gemm_args $CALIBRATE_ARGS \
  > "$OUT/calibrate.txt" 2> "$OUT/calibrate.log"
status=$?
cp "$GPU_CONFIG" "$OUT/configs/"
[ -n "$cluster_args" ] && cp "$CLUSTER" "$OUT/configs/"
stamp "calibrate exit $status"
tail -5 "$OUT/calibrate.log"
cat "$OUT/calibrate.txt"
exit $status
