#!/usr/bin/env bash
# Everything that needs a GPU, in one go (made for the lent H200, usable on any GPU machine):
# build, GPU and multi-rank tests under MPS, the demo, the benchmarks. The logs and JSON results
# are one record, RESULTS/<machine>/<date>-<commit>/, and the record's row (headline figures) is
# appended to RESULTS/INDEX.md (benchmarks/results/INDEX.md says what a record holds).
#   scripts/gpu-check.sh [RESULTS] [ctest regex]   (RESULTS default: benchmarks/results;
#                                                   IRIS_GPU_CHECK_BENCH=0: tests and demo only;
#                                                   IRIS_GPU_CHECK_BENCH=quick: a short pass of
#                                                   the benchmarks, collectives and ops first, no
#                                                   sanitizers; IRIS_GPU_CHECK_SANITIZERS=0: no
#                                                   sanitizers; IRIS_GPU_CHECK_TESTS=0: no
#                                                   tests, for a second call on a built tree;
#                                                   IRIS_GPU_CHECK_PREBUILT=ARCHIVE: no build,
#                                                   the binaries of scripts/carry-build.sh)
# <machine> is the GPU's name from nvidia-smi, lowercased and short (h200; 8xh200 for eight),
# or IRIS_MACHINE; <date> is today's UTC date. On a lent machine pass RESULTS=$OUT: the record
# and an INDEX.md holding its row come back, to be copied into benchmarks/results/.
set -uo pipefail
cd "$(dirname "$0")/.."
results=$(realpath -m "${1:-benchmarks/results}")
filter=${2:-}
# The commit the results are stamped with; pass IRIS_COMMIT where the tree's git metadata is not
# the tree's own (a copied working tree).
export IRIS_COMMIT=${IRIS_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
# "NVIDIA H200" -> h200, "NVIDIA H100 80GB HBM3" -> h100, "NVIDIA GeForce RTX 4090" -> rtx-4090.
machine_name() {
  local names count short
  names=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null) || { echo unknown; return; }
  count=$(printf '%s\n' "$names" | grep -c .)
  short=$(printf '%s\n' "$names" | head -n1 | tr 'A-Z' 'a-z' |
          awk '{ out = ""; for (i = 1; i <= NF; ++i) {
                   if ($i == "nvidia" || $i == "geforce" || $i == "tesla") continue;
                   sub(/-.*/, "", $i); out = out (out == "" ? "" : "-") $i;
                   if ($i ~ /[0-9]/) break }
                 print out == "" ? "unknown" : out }')
  [ "$count" -gt 1 ] && short="${count}x$short"
  echo "$short"
}
machine=${IRIS_MACHINE:-$(machine_name)}
out="$results/$machine/$(date -u +%F)-$IRIS_COMMIT"
# A second run of the same commit on the same day is a record of its own: <date>-<commit>-2, ...
if [ -e "$out" ]; then
  n=2
  while [ -e "$out-$n" ]; do n=$((n + 1)); done
  out="$out-$n"
fi
json_dir=$(mktemp -d)  # results are tarred into $out/json.tar: one file back, however many
mkdir -p "$out"
echo "results: $out"
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
if [ -n "${IRIS_GPU_CHECK_PREBUILT:-}" ]; then
  # Binaries built elsewhere (scripts/carry-build.sh): unpack them, and make the source directory
  # their ctest files name lead here (a link where that path is free, else rewrite the files).
  tar -xJf "$IRIS_GPU_CHECK_PREBUILT"
  built=$(cat build/source-dir)
  if [ "$built" != "$PWD" ]; then
    if [ ! -e "$built" ]; then
      mkdir -p "$(dirname "$built")" && ln -s "$PWD" "$built"
    else
      sed -i "s#$built#$PWD#g" $(find build -name CTestTestfile.cmake)
    fi
  fi
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "unpacked $IRIS_GPU_CHECK_PREBUILT (built in $built): $(( $(date +%s) - start )) s"
# Keep going past a broken target, so that one bad file still leaves the rest to test.
elif ! { cmake --preset default && cmake --build --preset default -j "$(nproc)" -- -k 0; } >"$out/build.log" 2>&1; then
  grep -E "error|FAILED" "$out/build.log" | head -n 40; echo "BUILD HAD FAILURES (see build.log)"
fi
echo "build: $(( $(date +%s) - start )) s"

# Tests that trap a kernel on purpose (label trap, tests/CMakeLists.txt says why) run last, after
# the benchmarks and examples: under MPS a trapped client can stall the clients after it.
tests_rc=0
run_tests() {  # run_tests <log> <ctest label option>
  ctest --test-dir build --output-on-failure --no-tests=error ${filter:+-R "$filter"} "$2" trap \
    --timeout 600 >"$out/$1" 2>&1 || tests_rc=1
  grep -E "tests passed|tests failed|\*\*\*Failed|Failed|Timeout|Skipped|Not Run" "$out/$1" | tail -n 40
  echo "$1: $(( $(date +%s) - start )) s since the build began"
}
[ "${IRIS_GPU_CHECK_TESTS:-1}" != 0 ] && run_tests tests.log -LE

# The record's row in RESULTS/INDEX.md, with the headline figures of whatever ran.
index_row() {
  python3 scripts/results-index.py "$out" --what "$1" --index "$results/INDEX.md" ||
    echo "gpu-check: could not add $out to $results/INDEX.md (python3 missing?)"
}

if [ "${IRIS_GPU_CHECK_BENCH:-1}" = 0 ]; then
  build/tools/iris-run -n 4 --timeout 60 -- build/examples/example_00_hello
  [ "${IRIS_GPU_CHECK_TESTS:-1}" != 0 ] && run_tests tests-trap.log -L
  index_row "gpu-check: tests${filter:+ matching '$filter'}, demo"
  exit $tests_rc
fi

# Runs one benchmark under iris-run and refreshes json.tar at once, so that results survive a
# later time-out (and stay one file however many benchmarks there are).
bench() {
  local n=$1 name=$2; shift 2
  echo "== $name -n $n"
  build/tools/iris-run -n "$n" --timeout 240 -- "build/benchmarks/$name" --json "$json_dir/${name#bench_}_n$n.json" "$@" ||
    echo "FAILED: $name -n $n (exit $?)"
  tar -C "$json_dir" -cf "$out/json.tar" .
}
quick=0
[ "${IRIS_GPU_CHECK_BENCH:-1}" = quick ] && quick=1
# The numbered examples check their results (non-zero exit when wrong) and print a speed.
run_example() {
  local n=$1 example=$2
  shift 2
  echo "== ${example##*/} -n $n $*"
  build/tools/iris-run -n "$n" --timeout 120 -- "$example" "$@" || echo "FAILED: ${example##*/} -n $n (exit $?)"
}
{
  echo "== demo"; build/tools/iris-run -n 4 --timeout 60 -- build/examples/example_00_hello
  if [ $quick = 1 ]; then
    if [ -x build/benchmarks/bench_gemm_all_scatter ]; then
      bench 1 bench_gemm_all_scatter
      bench 4 bench_gemm_all_scatter --samples 5
      bench 4 bench_gemm_reduce_scatter --shapes small --samples 5
      bench 4 bench_gemm_all_reduce --quick
      bench 4 bench_all_gather_gemm --quick
      bench 8 bench_allreduce_rmsnorm --samples 5
      bench 8 bench_gemm_allreduce_rmsnorm --quick
    fi
    for example in build/examples/example_1[0-9]_*; do run_example 4 "$example"; done
    # Per-tile traces of the fused patterns (Chrome/Perfetto JSON; scripts/plot_trace.py draws
    # them): all-scatter fused sequential, producer-consumer and workgroup-specialized, GEMM +
    # reduce-scatter fused, GEMM + all-reduce one-shot.
    mkdir -p "$out/traces"
    for example in 11_gemm_all_scatter_fused_sequential 12_gemm_all_scatter_producer_consumer \
                   15_gemm_all_scatter_workgroup_specialized; do
      [ -x "build/examples/example_$example" ] && run_example 4 "build/examples/example_$example" \
        --m 4096 --n 2048 --k 256 --trace "$out/traces/${example#*_}_n4.json"
    done
    # One rank, K small: what the tile-store epilogue costs per tile when nothing leaves the GPU.
    [ -x build/examples/example_11_gemm_all_scatter_fused_sequential ] && run_example 1 \
      build/examples/example_11_gemm_all_scatter_fused_sequential --m 16384 --n 4096 --k 256 \
      --trace "$out/traces/gemm_all_scatter_fused_sequential_n1.json"
    [ -x build/examples/example_14_gemm_reduce_scatter ] && run_example 4 \
      build/examples/example_14_gemm_reduce_scatter --m 4096 --n 2048 --k 64 \
      --trace "$out/traces/gemm_reduce_scatter_n4.json"
    [ -x build/examples/example_16_gemm_all_reduce ] && run_example 4 \
      build/examples/example_16_gemm_all_reduce --m 2048 --n 2048 --k 64 \
      --trace "$out/traces/gemm_all_reduce_n4.json"
    bench 2 bench_ccl_bench --max-bytes 64M --samples 3
    bench 8 bench_ccl_bench --min-bytes 8 --max-bytes 64K --samples 5 --collectives all_reduce
    bench 2 bench_rma_bandwidth
    bench 2 bench_signal_latency
    for n in 2 4 8; do bench "$n" bench_barrier_latency; done
  else
    bench 8 bench_heap_setup --heap-gib 1
    bench 2 bench_rma_bandwidth
    bench 2 bench_signal_latency
    for n in 2 4 8; do bench "$n" bench_barrier_latency; done
    for n in 2 4 8; do bench "$n" bench_peer_bandwidth; done
    for example in build/examples/example_[0-9][0-9]_*; do
      for n in 2 4; do run_example "$n" "$example"; done
    done
    # iris::ccl: the collectives' benchmark; --tune at 8 ranks writes the selection table
    # measured on this machine. iris::ops: GEMM and GEMM + all-scatter against cuBLAS.
    for n in 2 4; do bench "$n" bench_ccl_bench --max-bytes 256M --samples 5; done
    bench 8 bench_ccl_bench --max-bytes 256M --samples 5 --tune "$json_dir/ccl_tuning_n8.json"
    if [ -x build/benchmarks/bench_gemm_all_scatter ]; then
      for n in 1 2 4; do bench "$n" bench_gemm_all_scatter; done
      for n in 2 4; do bench "$n" bench_gemm_reduce_scatter; done
      for n in 2 4; do bench "$n" bench_gemm_all_reduce; done
      for n in 2 4; do bench "$n" bench_all_gather_gemm; done
      for n in 2 8; do bench "$n" bench_allreduce_rmsnorm; done
      for n in 2 8; do bench "$n" bench_gemm_allreduce_rmsnorm; done
    fi
  fi
} >"$out/bench.log" 2>&1
grep -E "lowest ratio|highest ratio|FAILED|WRONG|wrong data" "$out/bench.log" | head -n 40
# One pass of the memory checkers over the device API tests and the iris::ccl suite: the
# single-process one, and each multi-rank one at two ranks with every rank under the tool (not
# those that trap on purpose: their binaries do not end in _test).
tools=(memcheck racecheck)
{ [ "${IRIS_GPU_CHECK_SANITIZERS:-1}" = 0 ] || [ $quick = 1 ]; } && tools=()
for tool in "${tools[@]}"; do
  log="$out/sanitizer-$tool.log"
  : >"$log"
  for test in build/tests/gpu_device_api_test build/tests/mp_*_test build/tests/ccl/ccl_*_test; do
    launch=()
    [[ $test == */mp_* || $test == */ccl_* ]] && launch=(build/tools/iris-run -n 2 --timeout 240 --)
    echo "== $tool ${test##*/}" >>"$log"
    timeout 300 "${launch[@]}" compute-sanitizer --tool "$tool" --error-exitcode 9 "$test" >>"$log" 2>&1
    echo "compute-sanitizer $tool ${test##*/}: exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1))"
  done
done
[ "${IRIS_GPU_CHECK_TESTS:-1}" != 0 ] && run_tests tests-trap.log -L
index_row "gpu-check: tests${filter:+ matching '$filter'}, $([ $quick = 1 ] && echo "quick ")benchmarks, examples${tools:+, sanitizers}"
exit $tests_rc
