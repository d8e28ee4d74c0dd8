#!/usr/bin/env bash
# Everything that needs a GPU, in one go (made for the lent H200, usable on any GPU machine):
# build, GPU and multi-rank tests under MPS, the demo, the benchmarks. Logs and JSON results go
# to OUTDIR (default ./gpu-results).
#   scripts/gpu-check.sh [OUTDIR] [ctest regex]     (IRIS_GPU_CHECK_BENCH=0: tests and demo only)
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-gpu-results}")
filter=${2:-}
mkdir -p "$out/json"
export IRIS_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on shared machines

{
  date -u; nvidia-smi; nvidia-smi topo -m; nvcc --version | tail -n1; cmake --version | head -n1
} >"$out/machine.txt" 2>&1

# Several ranks share one GPU: MPS lets their kernels run side by side instead of time-slicing.
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d && echo "MPS started" >>"$out/machine.txt"
trap 'echo quit | nvidia-cuda-mps-control' EXIT

start=$(date +%s)
# Keep going past a broken target, so that one bad file still leaves the rest to test.
if ! { cmake --preset default && cmake --build --preset default -j "$(nproc)" -- -k 0; } >"$out/build.log" 2>&1; then
  grep -E "error|FAILED" "$out/build.log" | head -n 40; echo "BUILD HAD FAILURES (see build.log)"
fi
echo "build: $(( $(date +%s) - start )) s"

ctest --preset default ${filter:+-R "$filter"} --timeout 600 >"$out/tests.log" 2>&1
tests_rc=$?
grep -E "tests passed|tests failed|\*\*\*Failed|Failed|Timeout|Skipped|Not Run" "$out/tests.log" | tail -n 40

[ "${IRIS_GPU_CHECK_BENCH:-1}" = 0 ] && { build/tools/iris-run -n 4 --timeout 60 -- build/examples/example_00_hello; exit $tests_rc; }
{
  echo "== demo"; build/tools/iris-run -n 4 --timeout 60 -- build/examples/example_00_hello
  echo "== heap set-up"; build/tools/iris-run -n 8 --timeout 300 -- build/benchmarks/bench_heap_setup --heap-gib 1 --json "$out/json/heap_setup.json"
  # Barrier latency depends on the world size; the other benchmarks measure rank 0 <-> rank 1.
  for bench in build/benchmarks/bench_*; do
    name=$(basename "$bench"); [ "$name" = bench_heap_setup ] && continue
    sizes=2; [ "$name" = bench_barrier_latency ] && sizes="2 4 8"
    for n in $sizes; do
      echo "== $name -n $n"
      build/tools/iris-run -n "$n" --timeout 300 -- "$bench" --json "$out/json/${name#bench_}_n$n.json" ||
        echo "FAILED: $name -n $n (exit $?)"
    done
  done
  # The numbered examples check their results (non-zero exit when wrong) and print a speed.
  for example in build/examples/example_0[1-9]_*; do
    for n in 2 4; do
      echo "== $(basename "$example") -n $n"
      build/tools/iris-run -n "$n" --timeout 120 -- "$example" || echo "FAILED: $(basename "$example") -n $n (exit $?)"
    done
  done
} >"$out/bench.log" 2>&1
tail -n 80 "$out/bench.log"
tar -C "$out" -cf "$out/json.tar" json && rm -rf "$out/json"
exit $tests_rc
