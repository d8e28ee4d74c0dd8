#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh runs (launcher, tests with their ctest files, benchmarks,
# examples) from a build made here into one archive, for a GPU machine that cannot build quickly
# or at all (the lent machine builds in minutes of device time; this archive unpacks in seconds).
#   scripts/carry-build.sh [ARCHIVE]     (default .carry/build.tar.xz; build first: ninja -C build)
# There: IRIS_GPU_CHECK_PREBUILT=ARCHIVE scripts/gpu-check.sh ... unpacks it and skips the build
# (scripts/gpu-check.sh's header has the multi-GPU run plan); the record is named after the
# commit the archive holds (build/commit).
# The binaries share most of their bytes (iris::ccl's and iris::ops's kernels), so xz with a
# dictionary larger than several binaries keeps the archive small (about 10 MB for 400 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
archive=$(realpath -m "${1:-.carry/build.tar.xz}")
[ -x build/tools/iris-run ] || { echo "carry-build: build/ has no iris-run: build first (ninja -C build)"; exit 1; }
mkdir -p "$(dirname "$archive")"
# ctest's files name the source and build directories by absolute path: record the source's.
pwd >build/source-dir
# The commit the binaries were built from, which names the GPU machine's record (its copy of
# the tree has no git metadata); "-dirty" when the tree had changes.
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ "$commit" != unknown ] && ! git diff --quiet HEAD -- 2>/dev/null && commit="$commit-dirty"
echo "$commit" >build/commit
# What the benchmarks will lack there: say so here, where it can still be fixed.
[ -x build/benchmarks/bench_gemm_all_scatter ] ||
  echo "carry-build: warning: no fused-op benchmarks in build/ (iris::ops needs CUTLASS: source scripts/setup.sh)"
if [ -x build/benchmarks/bench_ccl_bench ] && ! grep -q '^NCCL_LIBRARY:FILEPATH=/' build/CMakeCache.txt; then
  echo "carry-build: warning: the benchmarks were built without NCCL: no NCCL baselines there"
fi
mapfile -t files < <(
  { echo build/source-dir; echo build/commit; echo build/tools/iris-run
    find build -name CTestTestfile.cmake
    find build/tests build/benchmarks build/examples -type f -perm -u+x -not -path '*/CMakeFiles/*'
  } | sort -u)
tar -cf - "${files[@]}" | xz -9e -T1 --lzma2=preset=9e,dict=384MiB >"$archive"
echo "carry-build: ${#files[@]} files, $(du -h "$archive" | cut -f1) in $archive"
