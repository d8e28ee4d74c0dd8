#!/usr/bin/env bash
# The two ways an application gets Iris, each followed by the consumer's own test, which starts
# two ranks through the exported iris::iris-run:
#   install           installs the build at $1 into a scratch prefix; find_package(iris)
#   add_subdirectory  Iris's source tree as a subdirectory (its tests and examples stay off)
#   tests/package/check.sh BUILD_DIR [install|add_subdirectory]   (default: both, in turn)
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 2 ]; then
  "$0" "$build" install
  "$0" "$build" add_subdirectory
  exit 0
fi
mode=$2
echo "== consumer through $mode"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
case $mode in
  install)
    cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
    test -x "$scratch/prefix/bin/iris-run"
    config=(-DCMAKE_PREFIX_PATH="$scratch/prefix")
    # A build with iris::ops installs it, and the consumer then asks for it as a component.
    if [ -n "$(find "$build" -maxdepth 2 -name 'libiris_ops.a' -print -quit)" ]; then
      config+=(-DIRIS_CONSUMER_OPS=ON)
    fi
    ;;
  add_subdirectory)
    # iris::ops stays off here: the install mode checks it, and its kernels take minutes.
    config=(-DIRIS_SOURCE_DIR="$(cd "$here/../.." && pwd)" -DIRIS_BUILD_OPS=OFF)
    ;;
  *)
    echo "check.sh: unknown mode '$mode' (install or add_subdirectory)" >&2
    exit 2
    ;;
esac
cmake -S "$here" -B "$scratch/consumer" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      "${config[@]}" >"$scratch/configure.log" 2>&1 || { cat "$scratch/configure.log"; exit 1; }
cmake --build "$scratch/consumer" >"$scratch/build.log" 2>&1 || { cat "$scratch/build.log"; exit 1; }
"$scratch/consumer/consumer"
ctest --test-dir "$scratch/consumer" --output-on-failure
if [ "$mode" = install ]; then
  # A consumer that sets no CUDA architecture is told what Iris needs.
  cmake -S "$here" -B "$scratch/default-arch" "${generator[@]}" "${config[@]}" \
        -DIRIS_CONSUMER_DEFAULT_ARCH=ON >"$scratch/default-arch.log" 2>&1 || true
  if ! grep -q "iris: CMAKE_CUDA_ARCHITECTURES" "$scratch/default-arch.log"; then
    echo "the package said nothing about a consumer without a CUDA architecture:" >&2
    cat "$scratch/default-arch.log" >&2
    exit 1
  fi
fi
