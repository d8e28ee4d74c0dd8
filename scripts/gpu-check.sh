#!/usr/bin/env bash
# Everything that needs a GPU, in phases: the build (or binaries built elsewhere), the GPU and
# multi-rank tests, the benchmarks and examples. The logs and results are one record,
# RESULTS/<machine>/<date>-<commit>/, and each run appends the record's row (headline figures) to
# RESULTS/INDEX.md (benchmarks/results/INDEX.md says what a record holds).
#
# Multi-GPU run plan: a lent machine of G = 2, 4 or 8 GPUs (one rank per GPU, NVLink, never
# NVLink multicast), at most 10 minutes a command, about 30 device-minutes in all, at most 8
# files back per call. On the CPU machine first (the GPU machine then builds nothing):
#   source scripts/setup.sh && cmake --preset default && cmake --build --preset default &&
#   scripts/carry-build.sh
# which writes .carry/build.tar.xz (about 10 MB, with the commit in it). Then three `run` calls,
# each with carry [".carry"] and timeout_s 600, one right after the other:
#   1. IRIS_GPU_CHECK_PREBUILT=.carry/build.tar.xz IRIS_GPU_CHECK_ONLY=tests \
#        IRIS_GPU_CHECK_DEADLINE=540 scripts/gpu-check.sh $OUT
#   2. IRIS_GPU_CHECK_PREBUILT=.carry/build.tar.xz IRIS_GPU_CHECK_ONLY=ccl \
#        IRIS_GPU_CHECK_DEADLINE=540 scripts/gpu-check.sh $OUT
#   3. IRIS_GPU_CHECK_PREBUILT=.carry/build.tar.xz IRIS_GPU_CHECK_ONLY=ops,devapi \
#        IRIS_GPU_CHECK_DEADLINE=540 scripts/gpu-check.sh $OUT
# A step that would start past the deadline prints "SKIPPED (deadline)": run what was skipped in
# a fourth call. For ccl at 2 ranks, say (the ccl phase runs the largest team first): copy call
# 2's ccl_tuning.json into .carry/, then
#   4. IRIS_GPU_CHECK_PREBUILT=.carry/build.tar.xz IRIS_GPU_CHECK_ONLY=ccl IRIS_GPU_CHECK_RANKS=2 \
#        IRIS_GPU_CHECK_TUNING=.carry IRIS_GPU_CHECK_DEADLINE=540 scripts/gpu-check.sh $OUT
# (its files are named ...-ccl-n2..., and its ccl_tuning.json, call 2's merged with n2's,
# replaces call 2's). Each call returns $OUT/<machine>/<date>-<commit>/, its files named after
# its phases (machine-ccl.txt, bench-ccl.log, json-ccl.tar, ...), and $OUT/INDEX.md with a row
# for it. Copy the calls' folders into one, benchmarks/results/<machine>/<date>-<commit>/ (no two
# calls write the same file), and give it one row in benchmarks/results/INDEX.md
# (scripts/results-index.py on the merged folder). Calls on either side of midnight UTC name
# different dates: pass IRIS_DATE=YYYY-MM-DD to every call to keep one.
#
# What each phase runs (G = the GPU count; with G > 1 the benchmarks that compare with NCCL run
# at every power of two from 2 to G, one rank per GPU; with G = 1 the ranks share the GPU under
# MPS, at the rank counts of the single-GPU records):
#   tests   ctest (every GPU and multi-rank test, at the 2, 4 and 8 ranks CTest registers, under
#           MPS, so on fewer GPUs than ranks they share GPUs), the demo, the memory checkers when
#           on, and last the tests that trap a kernel on purpose (label trap: under MPS a trapped
#           client can stall the clients after it).
#   ccl     bench_ccl_bench, every collective 8 B-1 GiB, eager and graph, against NCCL, and its
#           SM-budget sweep, at each rank count; --tune merges each team size's table into
#           ccl_tuning.json, --csv writes CSV; scripts/plot_ccl.py draws each JSON (into the
#           JSON archive's plots/; skipped with a message where python3 cannot import
#           matplotlib).
#   ops     the fused-op benchmarks against cuBLAS + NCCL and cuBLAS + iris::ccl (those with
#           --tune merge into ops_tuning.json), GEMM against cuBLAS on one rank, examples 09-18,
#           and one Perfetto trace (trace_*.json.gz: GEMM + all-scatter, workgroup-specialized).
#   devapi  heap set-up, rma_bandwidth and signal_latency at 2 ranks, barrier_latency and
#           peer_bandwidth at each rank count (against cudaMemcpyPeer and 450 GB/s per
#           direction), examples 00-08.
# In one call they run in the order tests, ccl, devapi, ops, then the tests that trap.
# Time per phase, estimated for G = 8 from the single-GPU records (benchmarks/results/ has the
# figures; the step lines of machine*.txt will tell the real ones): tests 4.5-6 min (the memory
# checkers, on with G > 1 only when asked, add minutes); ccl 2-6 min, the least sure (28 cases x
# 28 sizes per rank count, eager and graph; ccl_bench prints "the sweep took N s"); ops 2.5-5 min;
# devapi 1.5-3 min.
#
#   scripts/gpu-check.sh [RESULTS] [ctest regex]   (RESULTS default: benchmarks/results)
# Variables:
#   IRIS_GPU_CHECK_ONLY=tests,ccl,ops,devapi  the phases to run (a comma list; default all of
#                             them). With it set, the record's files are named after the phases
#                             (machine-<phases>.txt, bench-<phases>.log, json-<phases>.tar; the
#                             phases joined by _), so that several calls add up to one record.
#   IRIS_GPU_CHECK_PREBUILT=ARCHIVE  no build: unpack the binaries of scripts/carry-build.sh.
#   IRIS_GPU_CHECK_RANKS="8"  the rank counts of the benchmark phases in this call instead of
#                             their own (rma_bandwidth, signal_latency and one-rank runs keep
#                             theirs); the record's files are then named ...-n8 too.
#   IRIS_GPU_CHECK_TUNING=DIR  ccl_tuning.json and ops_tuning.json found in DIR are where this
#                             call's --tune runs merge their entries (an earlier call's tables).
#   IRIS_GPU_CHECK_DEADLINE=SECONDS  skip the steps that would start later than this after the
#                             script began (each says SKIPPED), and cut each step's time limit
#                             to what is left, so that one call ends inside its limit.
#   IRIS_GPU_CHECK_BENCH=quick  a short pass of each benchmark phase; =0: the tests phase only.
#   IRIS_GPU_CHECK_TESTS=0    no tests phase (a second call on a built tree).
#   IRIS_GPU_CHECK_SANITIZERS=1|0  compute-sanitizer memcheck and racecheck in the tests phase.
#                             Default: on with one GPU, off with several (they were run on one
#                             GPU already) and in the quick pass.
#   IRIS_GPU_CHECK_SANITIZE="GLOB ..."  the test binaries they run (default: the device API's,
#                             the multi-rank ones and iris::ccl's: build/tests/gpu_device_api_test
#                             build/tests/mp_*_test build/tests/ccl/ccl_*_test).
#   IRIS_GPU_CHECK_MPS=1|0    MPS in the benchmark phases. Default: on with one GPU (the ranks
#                             share it), off with several (one rank per GPU). The tests always
#                             run under MPS. machine*.txt says what each phase had.
#   IRIS_GPU_CHECK_GPUS=N     the GPU count (default: CUDA_VISIBLE_DEVICES's entries, else
#                             nvidia-smi's GPUs).
#   IRIS_MACHINE, IRIS_DATE, IRIS_COMMIT  the record's name parts (defaults: the GPU's name
#                             from nvidia-smi, lowercased and short: h200, 8xh100; today's UTC
#                             date; the commit the prebuilt archive names, else git's HEAD).
# On a lent machine pass RESULTS=$OUT: the record and an INDEX.md holding its row come back, to
# be copied into benchmarks/results/. The exit status is 1 when a test, a benchmark or an
# example failed (a benchmark that finds wrong data prints WRONG: and exits non-zero).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
results=$(realpath -m "${1:-benchmarks/results}")
filter=${2:-}
t_start=$(date +%s)
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on shared machines

# ---- what to run ------------------------------------------------------------------------------
all_phases=tests,ccl,ops,devapi
phases=${IRIS_GPU_CHECK_ONLY:-$all_phases}
[ -z "${IRIS_GPU_CHECK_ONLY:-}" ] && [ "${IRIS_GPU_CHECK_BENCH:-1}" = 0 ] && phases=tests
[ "${IRIS_GPU_CHECK_TESTS:-1}" = 0 ] && phases=$(tr ',' '\n' <<<"$phases" | grep -vx tests | paste -sd, -)
for phase in ${phases//,/ }; do
  [[ ",$all_phases," == *",$phase,"* ]] ||
    { echo "gpu-check: unknown phase '$phase' in IRIS_GPU_CHECK_ONLY (phases: $all_phases)"; exit 2; }
done
has_phase() { [[ ",$phases," == *",$1,"* ]]; }
quick=0
[ "${IRIS_GPU_CHECK_BENCH:-1}" = quick ] && quick=1
# The record's files: plain names for a whole run, named after the phases (and the rank counts
# asked for) for a partial one.
ranks_env=${IRIS_GPU_CHECK_RANKS:-}
read -ra ranks_list <<<"${ranks_env//,/ }"
ranks_asked="${ranks_list[*]}"
sfx=""
# (joined by '_': a lent machine returns no file whose name holds '+')
[ -n "${IRIS_GPU_CHECK_ONLY:-}" ] && sfx="-${phases//,/_}"
[ -n "$ranks_asked" ] && sfx="${sfx:--all}-n${ranks_asked// /_}"
deadline=${IRIS_GPU_CHECK_DEADLINE:-0}

# ---- binaries built elsewhere (first: the commit they were built from names the record) ------
unpacked=""
if [ -n "${IRIS_GPU_CHECK_PREBUILT:-}" ]; then
  # Unpack scripts/carry-build.sh's archive, and make the source directory its ctest files name
  # lead here (a link where that path is free, else rewrite the files).
  tar -xJf "$IRIS_GPU_CHECK_PREBUILT" || { echo "gpu-check: cannot unpack $IRIS_GPU_CHECK_PREBUILT"; exit 1; }
  built=$(cat build/source-dir)
  if [ "$built" != "$PWD" ]; then
    if [ ! -e "$built" ]; then
      mkdir -p "$(dirname "$built")" && ln -s "$PWD" "$built"
    else
      find build -name CTestTestfile.cmake -exec sed -i "s#$built#$PWD#g" {} +
    fi
  fi
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  unpacked="unpacked $IRIS_GPU_CHECK_PREBUILT (built in $built at $(cat build/commit 2>/dev/null || echo '?')): $(( $(date +%s) - t_start )) s"
  echo "$unpacked"
fi
# The commit the results are stamped with: the prebuilt archive's, else git's (pass IRIS_COMMIT
# where neither is the tree's own).
if [ -z "${IRIS_COMMIT:-}" ]; then
  IRIS_COMMIT=$([ -n "$unpacked" ] && cat build/commit 2>/dev/null)
  [ -n "$IRIS_COMMIT" ] || IRIS_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
fi
export IRIS_COMMIT

# ---- the machine --------------------------------------------------------------------------------
# "NVIDIA H200" -> h200, "NVIDIA H100 80GB HBM3" -> h100, "NVIDIA GeForce RTX 4090" -> rtx-4090.
machine_name() {
  local names count short
  names=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null) || { echo unknown; return; }
  count=$(printf '%s\n' "$names" | grep -c .)
  short=$(printf '%s\n' "$names" | head -n1 | tr '[:upper:]' '[:lower:]' |
          awk '{ out = ""; for (i = 1; i <= NF; ++i) {
                   if ($i == "nvidia" || $i == "geforce" || $i == "tesla") continue;
                   sub(/-.*/, "", $i); out = out (out == "" ? "" : "-") $i;
                   if ($i ~ /[0-9]/) break }
                 print out == "" ? "unknown" : out }')
  [ "$count" -gt 1 ] && short="${count}x$short"
  echo "$short"
}
# The GPUs this job's processes see: CUDA_VISIBLE_DEVICES's entries where it is set (nvidia-smi
# ignores it), else nvidia-smi's.
gpu_count() {
  local n
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    n=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
  else
    n=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | grep -c .)
  fi
  [ "${n:-0}" -ge 1 ] 2>/dev/null && echo "$n" || echo 1
}
gpus=${IRIS_GPU_CHECK_GPUS:-$(gpu_count)}
machine=${IRIS_MACHINE:-$(machine_name)}
out="$results/$machine/${IRIS_DATE:-$(date -u +%F)}-$IRIS_COMMIT"
# A second run of the same commit on the same day is a record of its own: <date>-<commit>-2, ...
# A partial run (IRIS_GPU_CHECK_ONLY) joins the record whose files of its phases it would not
# overwrite, so that calls of different phases add up to one record.
taken() { [ -e "$1" ] && { [ -z "$sfx" ] || [ -e "$1/machine$sfx.txt" ]; }; }
if taken "$out"; then
  n=2
  while taken "$out-$n"; do n=$((n + 1)); done
  out="$out-$n"
fi
mkdir -p "$out"
echo "results: $out"
machine_file="$out/machine$sfx.txt"
bench_log="$out/bench$sfx.log"
json_tar="$out/json$sfx.tar"
json_dir=$(mktemp -d)  # results are tarred into $json_tar: one file back, however many
note() { echo "$*" >>"$machine_file"; }

# Rank counts. With several GPUs: powers of two from 2 to G, one rank per GPU. With one: the
# counts of the single-GPU records, every rank sharing the GPU under MPS.
top=1
while [ $((top * 2)) -le "$gpus" ]; do top=$((top * 2)); done
powers=""
for ((n = 2; n <= top; n *= 2)); do powers+="$n "; done
powers=${powers% }
# fit N: N ranks with one GPU; else at most the largest power of two up to G (quick pass).
fit() { if [ "$gpus" -le 1 ] || [ "$1" -le "$top" ]; then echo "$1"; else echo "$top"; fi; }
fit_list() { local n; for n in "$@"; do fit "$n"; done | sort -nu | paste -sd' ' -; }
if [ "$gpus" -gt 1 ]; then
  ccl_ranks=$powers ops_ranks=$powers norm_ranks=$powers devapi_ranks=$powers
  example_ranks=$(tr ' ' '\n' <<<"$powers" | awk '$1 <= 4' | paste -sd' ' -)
  heap_ranks=$top
  ccl_args=()                                   # 8 B to 1 GiB, 9 samples
  bench_mps=${IRIS_GPU_CHECK_MPS:-0}
  sanitizers=${IRIS_GPU_CHECK_SANITIZERS:-0}
else
  ccl_ranks="2 4 8" ops_ranks="2 4" norm_ranks="2 8" devapi_ranks="2 4 8" example_ranks="2 4"
  heap_ranks=8
  ccl_args=(--max-bytes 1G --samples 5)         # 8 B to 1 GiB: 8 ranks' heaps take 17 GiB
  bench_mps=${IRIS_GPU_CHECK_MPS:-1}
  sanitizers=${IRIS_GPU_CHECK_SANITIZERS:-1}
  [ -z "${IRIS_GPU_CHECK_ONLY:-}" ] && [ "${IRIS_GPU_CHECK_BENCH:-1}" = 0 ] &&
    sanitizers=${IRIS_GPU_CHECK_SANITIZERS:-0}
fi
[ $quick = 1 ] && sanitizers=${IRIS_GPU_CHECK_SANITIZERS:-0}
if [ -n "$ranks_asked" ]; then
  ccl_ranks=$ranks_asked ops_ranks=$ranks_asked norm_ranks=$ranks_asked devapi_ranks=$ranks_asked
  example_ranks=$ranks_asked heap_ranks=${ranks_asked##* }
fi
{
  date -u
  echo "GPUs: $gpus (CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset})"
  nvidia-smi; nvidia-smi topo -m; nvcc --version | tail -n1; cmake --version | head -n1
  echo "commit: $IRIS_COMMIT; phases: ${phases//,/ }$([ $quick = 1 ] && echo ' (quick pass)')"
  echo "rank counts: ccl $ccl_ranks; ops $ops_ranks (norms $norm_ranks); device API $devapi_ranks;" \
       "examples $example_ranks; tests as registered (2, 4, 8)"
  echo "sanitizers (tests phase): $([ "$sanitizers" = 1 ] && echo on || echo off);" \
       "MPS: tests on, benchmarks $([ "$bench_mps" = 1 ] && echo on || echo off)"
  [ -n "$unpacked" ] && echo "$unpacked"
} >>"$machine_file" 2>&1

# Tables of an earlier call to merge into.
for table in ccl_tuning.json ops_tuning.json; do
  if [ -n "${IRIS_GPU_CHECK_TUNING:-}" ] && [ -s "$IRIS_GPU_CHECK_TUNING/$table" ]; then
    cp "$IRIS_GPU_CHECK_TUNING/$table" "$out/$table"
    note "tuning: $table starts from $IRIS_GPU_CHECK_TUNING/$table"
  fi
done

# ---- steps, time limits, MPS ------------------------------------------------------------------
# limit SECONDS: SECONDS, or what IRIS_GPU_CHECK_DEADLINE leaves (at least 10).
limit() {
  local want=$1 left
  if [ "$deadline" -gt 0 ]; then
    left=$((deadline - ($(date +%s) - t_start)))
    [ "$left" -lt 10 ] && left=10
    [ "$left" -lt "$want" ] && want=$left
  fi
  echo "$want"
}
# step NAME CMD...: runs CMD and writes its start, duration and exit status into machine*.txt;
# past the deadline it skips CMD and says so (unless no_deadline=1: steps of a few seconds that
# finish a phase's record).
step() {
  local name=$1 start rc=0
  shift
  if [ "${no_deadline:-0}" != 1 ] && [ "$deadline" -gt 0 ] &&
     [ $(($(date +%s) - t_start)) -ge "$deadline" ]; then
    echo "SKIPPED (deadline): $name"
    note "step $name: SKIPPED (past IRIS_GPU_CHECK_DEADLINE=$deadline s)"
    return 0
  fi
  start=$(date +%s)
  "$@" || rc=$?
  note "step $name: start $(date -u -d "@$start" +%T) UTC, $(($(date +%s) - start)) s, exit $rc"
  return $rc
}
# MPS lets ranks that share a GPU run their kernels side by side instead of time-slicing.
mps=off
mps_on() {
  [ $mps = on ] && return 0
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d; then
    mps=on
  else
    note "MPS: nvidia-cuda-mps-control -d failed: running without MPS"
  fi
}
mps_off() {
  if [ $mps = on ]; then
    echo quit | timeout 30 nvidia-cuda-mps-control
    # The daemon answers until it has gone (it waits for its servers' clients).
    for _ in $(seq 20); do
      echo get_server_list | timeout 2 nvidia-cuda-mps-control >/dev/null 2>&1 || break
      sleep 0.5
    done
    mps=off
  fi
  # An empty pipe directory: a client that looks for a daemon there finds none and runs without.
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-off-$$ CUDA_MPS_LOG_DIRECTORY=/tmp/mps-off-$$
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY"
}
trap 'mps_off >/dev/null 2>&1; rm -rf "/tmp/mps-off-$$" "$json_dir"' EXIT
# A daemon that an earlier call left (one killed at its time limit) goes first.
if [ -e /tmp/mps/control ]; then
  echo quit | CUDA_MPS_PIPE_DIRECTORY=/tmp/mps timeout 30 nvidia-cuda-mps-control >/dev/null 2>&1 &&
    note "MPS: quit a daemon left in /tmp/mps by an earlier run"
fi
# phase NAME MPS(1|0) WHY: switches MPS and says so in machine*.txt and the bench log.
phase_start=0
phase() {
  if [ "$2" = 1 ]; then mps_on; else mps_off; fi
  phase_start=$(date +%s)
  note "phase $1: MPS $mps ($3), started $(date -u +%T) UTC"
  echo "==== phase $1: MPS $mps ($3), $(date -u +%T) UTC"
}
phase_end() {
  note "phase $1: $(($(date +%s) - phase_start)) s"
  echo "==== phase $1 done: $(($(date +%s) - phase_start)) s"
}

# ---- the build ------------------------------------------------------------------------------------
if [ -z "$unpacked" ]; then
  # Keep going past a broken target, so that one bad file still leaves the rest to test.
  # shellcheck disable=SC2016  # $(nproc) is for the inner shell
  if ! step build bash -c 'cmake --preset default && cmake --build --preset default -j "$(nproc)" -- -k 0' \
      >"$out/build$sfx.log" 2>&1; then
    grep -E "error|FAILED" "$out/build$sfx.log" | head -n 40; echo "BUILD HAD FAILURES (see build$sfx.log)"
  fi
  echo "build: $(($(date +%s) - t_start)) s"
fi

# NCCL for the benchmarks' baselines: where the binaries link it and the loader cannot find it,
# the nvidia-nccl wheel's copy (the GPU machines' python3 has one).
if [ -x build/benchmarks/bench_ccl_bench ] &&
   ldd build/benchmarks/bench_ccl_bench 2>/dev/null | grep -q 'libnccl.*not found'; then
  nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
  if [ -n "$nccl_dir" ] && [ -e "$nccl_dir/libnccl.so.2" ]; then
    export LD_LIBRARY_PATH="$nccl_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    note "NCCL: the loader had no libnccl.so.2; using $nccl_dir"
  else
    note "NCCL: libnccl.so.2 not found: the benchmarks that link NCCL cannot start"
  fi
fi
[ -x build/benchmarks/bench_ccl_bench ] &&
  note "NCCL library: $(ldd build/benchmarks/bench_ccl_bench 2>/dev/null | grep -o 'libnccl[^ ]* => [^ ]*' || echo 'not linked (no NCCL baseline)')"

# ---- the pieces every phase uses --------------------------------------------------------------
failed=0
# Runs one benchmark under iris-run (JSON into the archive's folder) and refreshes the archive at
# once, so that results survive a later time-out (and stay one file however many there are).
bench() {
  local n=$1 name=$2
  shift 2
  if [ ! -x "build/benchmarks/$name" ]; then echo "== $name: not built, skipped"; return 0; fi
  local args="$*"
  args=${args//$json_dir\//}
  args=${args//$out\//}
  step "$name -n $n${args:+ $args}" run_bench "$n" "$name" "$@" || failed=1
  tar -C "$json_dir" -cf "$json_tar" .
}
run_bench() {
  local n=$1 name=$2
  shift 2
  echo "== $name -n $n $* ($(date -u +%T) UTC)"
  build/tools/iris-run -n "$n" --timeout "$(limit "${bench_timeout:-240}")" -- "build/benchmarks/$name" \
    --json "$json_dir/${name#bench_}_n$n.json" "$@" || { local rc=$?; echo "FAILED: $name -n $n (exit $rc)"; return $rc; }
}
# The numbered examples check their results (non-zero exit when wrong) and print a speed.
run_example() {
  local n=$1 example=$2
  shift 2
  local args="$*"
  args=${args//$json_dir\//}
  step "${example##*/} -n $n${args:+ $args}" example_once "$n" "$example" "$@" || failed=1
}
example_once() {
  local n=$1 example=$2
  shift 2
  echo "== ${example##*/} -n $n $* ($(date -u +%T) UTC)"
  build/tools/iris-run -n "$n" --timeout "$(limit 120)" -- "$example" "$@" ||
    { local rc=$?; echo "FAILED: ${example##*/} -n $n (exit $rc)"; return $rc; }
}
examples() {  # examples GLOB RANKS...: every example matching GLOB at each rank count
  local glob=$1 example n
  shift
  for example in build/examples/example_$glob; do
    [ -x "$example" ] || continue
    for n in "$@"; do run_example "$n" "$example"; done
  done
}
tests_rc=0
run_tests() {  # run_tests <log> <ctest label option>: the tests with (-L) or without (-LE) label trap
  step "ctest $2 trap${filter:+ -R $filter}" timeout "$(limit 1800)" \
    ctest --test-dir build --output-on-failure --no-tests=error ${filter:+-R "$filter"} "$2" trap \
    --timeout 600 >"$out/$1" 2>&1 || tests_rc=1
  grep -E "tests passed|tests failed|\*\*\*Failed|Failed|Timeout|Skipped|Not Run" "$out/$1" | tail -n 40
  echo "$1: $(($(date +%s) - t_start)) s since the start"
}

# ---- the phases ---------------------------------------------------------------------------------
phase_tests() {
  phase tests 1 "ranks beyond the GPU count share GPUs"
  run_tests tests.log -LE
  { echo; echo "== demo"; } >>"$out/tests.log"
  step "demo -n 4" build/tools/iris-run -n 4 --timeout "$(limit 60)" -- build/examples/example_00_hello \
    >>"$out/tests.log" 2>&1 || { echo "FAILED: demo"; failed=1; }
  # One pass of the memory checkers over the device API tests and the iris::ccl suite: the
  # single-process one, and each multi-rank one at two ranks with every rank under the tool (not
  # those that trap on purpose: their binaries do not end in _test).
  if [ "$sanitizers" = 1 ]; then
    local tool test log launch rc
    for tool in memcheck racecheck; do
      log="$out/sanitizer-$tool.log"
      : >"$log"
      for test in ${IRIS_GPU_CHECK_SANITIZE:-build/tests/gpu_device_api_test build/tests/mp_*_test build/tests/ccl/ccl_*_test}; do
        [ -x "$test" ] || { echo "compute-sanitizer: no test binary $test"; failed=1; continue; }
        launch=()
        [[ $test == */mp_* || $test == */ccl_* ]] && launch=(build/tools/iris-run -n 2 --timeout "$(limit 240)" --)
        echo "== $tool ${test##*/}" >>"$log"
        step "compute-sanitizer $tool ${test##*/}" timeout "$(limit 300)" "${launch[@]}" \
          compute-sanitizer --tool "$tool" --error-exitcode 9 "$test" >>"$log" 2>&1
        rc=$?
        echo "compute-sanitizer $tool ${test##*/}: exit $rc ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1))"
        [ "$rc" = 0 ] || failed=1
      done
    done
  fi
  phase_end tests
}

phase_ccl() {
  local why="one rank per GPU"
  [ "$gpus" -le 1 ] && why="the ranks share the GPU"
  phase ccl "$bench_mps" "$why"
  local n
  if [ $quick = 1 ]; then
    bench "$(fit 2)" bench_ccl_bench --max-bytes 64M --samples 3
    # (on 2 GPUs the first run, at 2 ranks too, has these sizes already)
    [ "$(fit 8)" != "$(fit 2)" ] &&
      bench "$(fit 8)" bench_ccl_bench --min-bytes 8 --max-bytes 64K --samples 5 --collectives all_reduce
  else
    # Every collective and algorithm, 8 B to 1 GiB, eager and graph, NCCL and the SM-budget
    # sweep at each team size, the largest first (a deadline drops the smallest); each run
    # merges its team size's selection table into one file.
    for n in $(tr ' ' '\n' <<<"$ccl_ranks" | sort -rn); do
      bench_timeout=540 bench "$n" bench_ccl_bench "${ccl_args[@]}" --tune "$out/ccl_tuning.json" \
        --csv "$json_dir/ccl_bench_n$n.csv"
    done
  fi
  # With the ranks on one GPU: each run's large-message times split into a fixed cost per call
  # and a streaming rate against cudaMemcpy (scripts/ccl_fit.py), into the log and the archive.
  local fitted
  for fitted in "$json_dir"/ccl_bench_n*.json; do
    [[ -e $fitted.memcpy.json && $fitted != *.json.*.json ]] || continue
    no_deadline=1 step "ccl_fit ${fitted##*/}" timeout 60 python3 scripts/ccl_fit.py "$fitted" \
      --csv "${fitted%.json}.fit.csv" || echo "FAILED: ccl_fit ${fitted##*/}"
  done
  # Plots of each run (busbw and time against size, one PNG per collective) into the archive.
  if python3 -c 'import matplotlib' 2>/dev/null; then
    mkdir -p "$json_dir/plots"
    local json
    for json in "$json_dir"/ccl_bench_n*.json; do
      [[ -e $json && $json != *.json.*.json ]] || continue  # not the side files (.memcpy.json, ...)
      no_deadline=1 step "plot_ccl ${json##*/}" timeout 60 python3 scripts/plot_ccl.py "$json" \
        --out-dir "$json_dir/plots" || echo "FAILED: plot_ccl ${json##*/}"
    done
    tar -C "$json_dir" -cf "$json_tar" .
  else
    echo "plots: skipped (python3 cannot import matplotlib)"
    note "plots: skipped (python3 cannot import matplotlib)"
  fi
  phase_end ccl
}

phase_ops() {
  local why="one rank per GPU"
  [ "$gpus" -le 1 ] && why="the ranks share the GPU"
  phase ops "$bench_mps" "$why"
  local n tune=(--tune "$out/ops_tuning.json")
  # First (a few seconds, so that a deadline never drops it): one per-tile trace (Chrome/Perfetto
  # JSON, gzipped; scripts/plot_trace.py draws it) of GEMM + all-scatter, workgroup-specialized.
  local trace_ranks example
  trace_ranks=$(fit 4)
  example=build/examples/example_15_gemm_all_scatter_workgroup_specialized
  if [ -x "$example" ]; then
    run_example "$trace_ranks" "$example" --m 4096 --n 2048 --k 256 --trace "$json_dir/trace.json"
    if [ -s "$json_dir/trace.json" ]; then
      gzip -c "$json_dir/trace.json" >"$out/trace_gemm_all_scatter_workgroup_specialized_n$trace_ranks.json.gz"
      rm -f "$json_dir/trace.json"
    fi
  fi
  if [ ! -x build/benchmarks/bench_gemm_all_scatter ]; then
    echo "== the fused-op benchmarks are not built (no CUTLASS?): skipped"
  elif [ $quick = 1 ]; then
    bench 1 bench_gemm_all_scatter
    bench "$(fit 4)" bench_gemm_all_scatter --samples 5
    bench "$(fit 4)" bench_gemm_reduce_scatter --shapes small --samples 5
    bench "$(fit 4)" bench_gemm_all_reduce --quick
    bench "$(fit 4)" bench_all_gather_gemm --quick
    bench "$(fit 8)" bench_allreduce_rmsnorm --samples 5
    bench "$(fit 8)" bench_gemm_allreduce_rmsnorm --quick
  else
    # GEMM against cuBLAS on one rank (and the fused op's epilogue alone, the decode table);
    # then each fused op at each team size, against cuBLAS + iris::ccl and cuBLAS + NCCL.
    bench 1 bench_gemm_all_scatter
    for n in $ops_ranks; do bench "$n" bench_gemm_all_scatter "${tune[@]}"; done
    for n in $ops_ranks; do bench "$n" bench_gemm_reduce_scatter "${tune[@]}"; done
    for n in $ops_ranks; do bench "$n" bench_gemm_all_reduce "${tune[@]}"; done
    for n in $ops_ranks; do bench "$n" bench_all_gather_gemm "${tune[@]}"; done
    for n in $norm_ranks; do bench "$n" bench_allreduce_rmsnorm; done
    for n in $norm_ranks; do bench "$n" bench_gemm_allreduce_rmsnorm; done
  fi
  if [ $quick = 1 ]; then
    examples '1[0-9]_*' "$(fit 4)"
    # More traces, into the archive's traces/: all-scatter fused sequential and producer-
    # consumer, GEMM + reduce-scatter fused, GEMM + all-reduce one-shot; and one rank with K
    # small: what the tile-store epilogue costs per tile when nothing leaves the GPU.
    mkdir -p "$json_dir/traces"
    for example in 11_gemm_all_scatter_fused_sequential 12_gemm_all_scatter_producer_consumer; do
      [ -x "build/examples/example_$example" ] && run_example "$trace_ranks" "build/examples/example_$example" \
        --m 4096 --n 2048 --k 256 --trace "$json_dir/traces/${example#*_}_n$trace_ranks.json"
    done
    [ -x build/examples/example_11_gemm_all_scatter_fused_sequential ] && run_example 1 \
      build/examples/example_11_gemm_all_scatter_fused_sequential --m 16384 --n 4096 --k 256 \
      --trace "$json_dir/traces/gemm_all_scatter_fused_sequential_n1.json"
    [ -x build/examples/example_14_gemm_reduce_scatter ] && run_example "$trace_ranks" \
      build/examples/example_14_gemm_reduce_scatter --m 4096 --n 2048 --k 64 \
      --trace "$json_dir/traces/gemm_reduce_scatter_n$trace_ranks.json"
    [ -x build/examples/example_16_gemm_all_reduce ] && run_example "$trace_ranks" \
      build/examples/example_16_gemm_all_reduce --m 2048 --n 2048 --k 64 \
      --trace "$json_dir/traces/gemm_all_reduce_n$trace_ranks.json"
  else
    # shellcheck disable=SC2086  # a list of rank counts
    examples '09_*' $example_ranks
    # shellcheck disable=SC2086
    examples '1[0-9]_*' $example_ranks
  fi
  tar -C "$json_dir" -cf "$json_tar" .
  phase_end ops
}

phase_devapi() {
  local why="one rank per GPU"
  [ "$gpus" -le 1 ] && why="the ranks share the GPU"
  phase devapi "$bench_mps" "$why"
  local n
  [ $quick = 1 ] || bench "$heap_ranks" bench_heap_setup --heap-gib 1
  bench 2 bench_rma_bandwidth
  bench 2 bench_signal_latency
  if [ $quick = 1 ]; then
    for n in $(fit_list 2 4 8); do bench "$n" bench_barrier_latency; done
  else
    for n in $devapi_ranks; do bench "$n" bench_barrier_latency; done
    for n in $devapi_ranks; do bench "$n" bench_peer_bandwidth; done
    # shellcheck disable=SC2086  # a list of rank counts
    examples '0[0-8]_*' $example_ranks
  fi
  phase_end devapi
}

# ---- the run ------------------------------------------------------------------------------------
has_phase tests && phase_tests
# The shorter device-API phase before the fused ops, so that a deadline drops the longer one.
for phase_name in ccl devapi ops; do
  has_phase $phase_name || continue
  logged=$( [ -e "$bench_log" ] && wc -l <"$bench_log" || echo 0)
  "phase_$phase_name" >>"$bench_log" 2>&1
  tail -n +$((logged + 1)) "$bench_log" |
    grep -E "lowest ratio|highest ratio|lowest fraction|FAILED|WRONG|wrong data|SKIPPED" | tail -n 40
  echo "phase $phase_name: $(grep "^phase $phase_name: [0-9]" "$machine_file" | tail -n 1 | cut -d' ' -f3-)"
done
# Last: the tests that trap a kernel on purpose (under MPS a trapped client can stall the
# clients after it).
if has_phase tests; then
  phase tests-trap 1 "ranks beyond the GPU count share GPUs"
  run_tests tests-trap.log -L
  phase_end tests-trap
fi
mps_off >/dev/null 2>&1

# The record's row in RESULTS/INDEX.md, with the headline figures of whatever ran.
what="gpu-check on $gpus GPU$([ "$gpus" -gt 1 ] && echo s)"
[ -n "$unpacked" ] && what+=", prebuilt"
what+=": ${phases//,/, }"
[ $quick = 1 ] && what+=" (quick pass)"
has_phase tests && [ -n "$filter" ] && what+=" (tests matching '$filter')"
has_phase tests && [ "$sanitizers" = 1 ] && what+=", sanitizers"
[ "$gpus" -gt 1 ] && what+="; benchmarks one rank per GPU at ${ccl_ranks// //} ranks, MPS $([ "$bench_mps" = 1 ] && echo on || echo off) there"
python3 scripts/results-index.py "$out" --what "$what" --index "$results/INDEX.md" ||
  echo "gpu-check: could not add $out to $results/INDEX.md (python3 missing?)"
files=$(find "$out" -maxdepth 1 -type f | wc -l)
[ "$files" -gt 7 ] && echo "gpu-check: note: $out holds $files files; a lent machine returns at most 8 (with INDEX.md)"
echo "gpu-check: $(($(date +%s) - t_start)) s in all"
[ $tests_rc = 0 ] && [ $failed = 0 ]
