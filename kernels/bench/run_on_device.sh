#!/usr/bin/env bash
# The one script the GPU machine runs (docs/PERF.md names it for every figure): configure and
# build the CUDA kernels (sm_90a, only the targets needed), run the GPU tests, compute-sanitizer
# (memcheck, racecheck) on small tests, the C API check, then the benchmark; logs and JSON go to
# $OUT and a short table is printed last.
#   BENCH=full|quick|none   benchmark size (default full)
#   BENCH_ARGS=...          extra arguments for bench_attention.py
#   TESTS=all|none          GPU tests and sanitizer (default all)
#   TEST_FILTER=...         gtest filter of the GPU tests (default all of them)
#   SANITIZE=1|0            run compute-sanitizer after the tests (default 1)
# Third-party headers / libraries the machine may lack (yaml-cpp, Eigen, CLI11, nlohmann-json,
# GoogleTest, Google Benchmark, protobuf) are carried in .device/deps, made by
# kernels/bench/make_device_deps.sh (docs/kernels.md).
set -uo pipefail
OUT=${OUT:-$PWD/out-device}
mkdir -p "$OUT"
BENCH=${BENCH:-full}
TESTS=${TESTS:-all}
BUILD=build-device
export PYTHONUNBUFFERED=1
start=$(date +%s)
stamp() { echo "[device $(( $(date +%s) - start ))s] $*"; }

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  nvcc --version | tail -2
  cmake --version | head -1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown) (working tree may differ: see git status)"
  git status --short 2>/dev/null | head -40
} > "$OUT/env.txt" 2>&1
stamp "env: $(head -2 "$OUT/env.txt" | tail -1)"

prefix=""
if [ -d .device/deps ]; then
  prefix="-DCMAKE_PREFIX_PATH=$PWD/.device/deps"
  # protoc must run at configure time (the tuner's FindProtobuf asks its version)
  export PATH="$PWD/.device/deps/bin:$PATH" LD_LIBRARY_PATH="$PWD/.device/deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
if ! cmake -S . -B $BUILD -G Ninja -DSPARSERING_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_POLICY_VERSION_MINIMUM=3.5 $prefix > "$OUT/build.log" 2>&1; then
  stamp "configure FAILED"; tail -30 "$OUT/build.log"; exit 1
fi
targets="sparsering_kernels_capi"
[ "$TESTS" != none ] && targets="$targets kernels_gpu_tests kernels_capi_tests"
if ! cmake --build $BUILD --target $targets -j16 >> "$OUT/build.log" 2>&1; then
  stamp "build FAILED"; grep -E "error|Error" "$OUT/build.log" | head -30; exit 1
fi
stamp "built"
LIB=$BUILD/kernels/cuda/libsparsering_kernels.so

test_status="skipped"
if [ "$TESTS" != none ]; then
  if $BUILD/tests/kernels_gpu/kernels_gpu_tests --gtest_filter="${TEST_FILTER:-*}" > "$OUT/tests.log" 2>&1 &&
     $BUILD/tests/kernels_gpu/kernels_capi_tests >> "$OUT/tests.log" 2>&1; then
    test_status="passed"
  else
    test_status="FAILED"
  fi
  stamp "GPU tests $test_status: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure|error" "$OUT/tests.log" | head -20
  if [ "${SANITIZE:-1}" = 1 ]; then
    {
      echo "== memcheck"
      compute-sanitizer --tool memcheck --error-exitcode 9 $BUILD/tests/kernels_gpu/kernels_gpu_tests \
        --gtest_filter='SparseAttnFwdGpu.OddLengthsAndTailBlocks:SparseAttnFwdGpu.RowsThatKeepOnlyThemselves:SparseIndexTransposeGpu.*:SparseAttnBwdGpu.CapturedInACudaGraph:SparseAttnBwdGpu.SelfOnlyVerticalsOnlyAndDense:SparseAttnBwdGpu.RandomPatternsEveryLayoutMatchReference:EstimatePatternGpu.*:RecallSelectGpu.*:SparseIndexBuildGpu.*'
      echo "memcheck exit $?"
      echo "== racecheck"
      compute-sanitizer --tool racecheck --error-exitcode 9 $BUILD/tests/kernels_gpu/kernels_gpu_tests \
        --gtest_filter='SparseAttnFwdGpu.RowsThatKeepOnlyThemselves:SparseAttnBwdGpu.SelfOnlyVerticalsOnlyAndDense:SparseIndexBuildGpu.*:EstimatePatternGpu.*'
      echo "racecheck exit $?"
    } > "$OUT/sanitizer.log" 2>&1
    stamp "sanitizer: $(grep -E 'exit|ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer.log" | tr '\n' ' ')"
  fi
fi

python3 -X faulthandler kernels/bench/check_capi.py --lib $LIB > "$OUT/capi.log" 2>&1
capi_status=$?
stamp "C API check (exit $capi_status): $(grep check_capi "$OUT/capi.log" | tail -1)"
if [ $capi_status -ge 128 ] && command -v cuda-gdb > /dev/null; then  # crashed: native backtrace
  timeout 120 cuda-gdb -batch -ex run -ex bt -ex "info sharedlibrary" --args python3 kernels/bench/check_capi.py \
    --lib $LIB > "$OUT/capi_bt.log" 2>&1
  stamp "backtrace: $(grep -E '^#' "$OUT/capi_bt.log" | head -12 | tr '\n' ' ')"
fi

case "$BENCH" in
  none) ;;
  quick) python3 kernels/bench/bench_attention.py --lib $LIB --out "$OUT/bench.json" --sizes 32768,131072 \
           --recalls 0.95 --densities 0.05 --dense-check --repeats 5 --time-budget-s 150 ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1 ;;
  *) python3 kernels/bench/bench_attention.py --lib $LIB --out "$OUT/bench.json" --dense-check \
           --time-budget-s ${BENCH_BUDGET_S:-300} ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1 ;;
esac
stamp "done (tests $test_status)"
[ -f "$OUT/bench.log" ] && tail -25 "$OUT/bench.log"
