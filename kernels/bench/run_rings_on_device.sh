#!/usr/bin/env bash
# The NCCL ring runtime's device script: configure and build only the ring targets (sm_90a), run
# the CPU topology tests, the nccl tests on 2 GPUs and on 4 GPUs (a killed peer, flat and
# hierarchical rings against the single-GPU kernels), then time one flat and one hierarchical
# sparse layer at 256K tokens (Qwen2.5-3B-like shape per rank: 16 q heads, 2 kv heads, D 128).
# Logs go to $OUT; a short table is printed last.
#   BENCH=none   skip the timings;  TESTS=none   skip the tests
# Third-party dependencies the machine lacks come from .device/deps (make_device_deps.sh); NCCL
# comes from the CUDA toolkit or, failing that, from the nvidia-nccl Python wheel.
set -uo pipefail
OUT=${OUT:-$PWD/out-device}
mkdir -p "$OUT"
BUILD=${BUILD:-build-device-ring}
BENCH=${BENCH:-full}
TESTS=${TESTS:-all}
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
start=$(date +%s)
stamp() { echo "[rings $(( $(date +%s) - start ))s] $*"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt" 2>&1
nvidia-smi topo -m >> "$OUT/env.txt" 2>&1
stamp "GPUs: $(nvidia-smi -L | wc -l)"

prefix=""
if [ -d .device/deps ]; then
  prefix="-DCMAKE_PREFIX_PATH=$PWD/.device/deps"
  export PATH="$PWD/.device/deps/bin:$PATH" LD_LIBRARY_PATH="$PWD/.device/deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
nccl=""
if ! ls /usr/local/cuda/include/nccl.h /usr/include/nccl.h > /dev/null 2>&1; then
  wheel=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null ||
          python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "nccl"))')
  lib=$(ls "$wheel"/lib/libnccl.so* | head -1)
  nccl="-DNCCL_INCLUDE_DIR=$wheel/include -DNCCL_LIBRARY=$lib"
  export LD_LIBRARY_PATH="$wheel/lib:${LD_LIBRARY_PATH:-}"
  stamp "NCCL from the wheel: $lib"
fi
if ! cmake -S . -B $BUILD -G Ninja -DSPARSERING_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_POLICY_VERSION_MINIMUM=3.5 $prefix $nccl > "$OUT/build.log" 2>&1; then
  stamp "configure FAILED"; tail -30 "$OUT/build.log"; exit 1
fi
if ! cmake --build $BUILD --target ring_cpu_tests nccl_tests nccl_ring_worker ring_layer_bench -j16 >> "$OUT/build.log" 2>&1; then
  stamp "build FAILED"; grep -E "error" "$OUT/build.log" | head -30; exit 1
fi
stamp "built"

summary=()
left() { echo $(( ${BUDGET_S:-280} - ($(date +%s) - start) )); }
if [ "$TESTS" != none ]; then
  $BUILD/tests/ring/ring_cpu_tests > "$OUT/tests.log" 2>&1
  summary+=("ring_cpu_tests: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests.log" | tr '\n' ' ')")
  echo "== 2 GPUs" >> "$OUT/tests.log"
  CUDA_VISIBLE_DEVICES=0,1 timeout $(( $(left) / 2 )) $BUILD/tests/nccl/nccl_tests >> "$OUT/tests.log" 2>&1
  summary+=("nccl_tests on 2 GPUs (exit $?): $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/tests.log" | tail -3 | tr '\n' ' ')")
  stamp "2-GPU tests done"
  echo "== 4 GPUs" >> "$OUT/tests.log"
  timeout $(( $(left) * 2 / 3 )) $BUILD/tests/nccl/nccl_tests --gtest_filter=-NcclWorld.* >> "$OUT/tests.log" 2>&1
  summary+=("nccl_tests on 4 GPUs (exit $?): $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/tests.log" | tail -3 | tr '\n' ' ')")
  stamp "4-GPU tests done"
  grep -E "^\[  FAILED|Failure|error|Expected|Which is|max_abs|estimate:" "$OUT/tests.log" | head -30
fi
if [ "$BENCH" != none ] && [ "$(left)" -gt 20 ]; then
  timeout $(( $(left) / 2 )) $BUILD/tests/nccl/ring_layer_bench --label flat4 --layout striped --tokens 262144 --ranks 4 > "$OUT/bench.log" 2>&1
  timeout $(( $(left) - 3 )) $BUILD/tests/nccl/ring_layer_bench --label hier2x2 --layout striped --tokens 262144 --levels 2,2 >> "$OUT/bench.log" 2>&1
  stamp "bench done"
  if [ "$(left)" -gt 30 ]; then
    # Two emulated nodes of 2 GPUs: one process each, distinct NCCL_HOSTID, so NCCL carries the
    # inter-node hops over sockets on loopback (docs/VALIDATION.md). Inner rings {0,1}, {2,3}.
    export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
    for layer in "flat4x --ranks 4" "hier2x2x --levels 2,2"; do
      set -- $layer
      name=$1; shift
      rm -f "$OUT/nccl.id"
      NCCL_HOSTID=emulated-node-b timeout $(( $(left) / 2 - 2 )) $BUILD/tests/nccl/ring_layer_bench --label "$name-nodeB" --layout striped \
        --tokens 262144 --iterations 2 --id-file "$OUT/nccl.id" --local-ranks 2,3 "$@" > "$OUT/bench_nodeB.log" 2>&1 &
      NCCL_HOSTID=emulated-node-a timeout $(( $(left) / 2 - 2 )) $BUILD/tests/nccl/ring_layer_bench --label "$name-nodeA" --layout striped \
        --tokens 262144 --iterations 2 --id-file "$OUT/nccl.id" --local-ranks 0,1 --write-id 1 "$@" >> "$OUT/bench.log" 2>&1
      wait
      cat "$OUT/bench_nodeB.log" >> "$OUT/bench.log"
    done
    rm -f "$OUT/nccl.id" "$OUT/bench_nodeB.log"
    stamp "two emulated nodes done"
  fi
  grep -E "^(==|forward|backward|shuffle|SUMMARY)" "$OUT/bench.log"
fi
printf '%s\n' "${summary[@]}"
