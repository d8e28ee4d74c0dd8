#!/usr/bin/env bash
# Installs the build at $1 into a scratch prefix and builds + runs the consumer against it.
set -euo pipefail
build=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
test -x "$scratch/prefix/bin/iris-run"
cmake -S "$(dirname "$0")" -B "$scratch/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$scratch/prefix" \
      -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$scratch/consumer" >/dev/null
"$scratch/consumer/consumer"
# A consumer that sets no CUDA architecture is told what Iris needs.
cmake -S "$(dirname "$0")" -B "$scratch/default-arch" -G Ninja -DCMAKE_PREFIX_PATH="$scratch/prefix" \
      -DIRIS_CONSUMER_DEFAULT_ARCH=ON >"$scratch/default-arch.log" 2>&1 || true
if ! grep -q "iris: CMAKE_CUDA_ARCHITECTURES" "$scratch/default-arch.log"; then
  echo "the package said nothing about a consumer without a CUDA architecture:" >&2
  cat "$scratch/default-arch.log" >&2
  exit 1
fi
