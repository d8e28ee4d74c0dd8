#!/usr/bin/env bash
# Builds Iris and runs examples/00_hello: one rank per GPU (two ranks sharing the GPU when there
# is only one, so that there is someone to talk to). Without a GPU it builds, says so, and stops.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

cmake --preset default >/dev/null
cmake --build --preset default --target example_00_hello iris-run

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi
if [ "$gpus" -eq 0 ]; then
  echo "demo: built build/examples/example_00_hello, but this machine has no NVIDIA GPU, so there"
  echo "demo: is nothing to run it on. On a GPU machine this script runs it with one rank per GPU."
  exit 0
fi
ranks=$gpus
if [ "$gpus" -eq 1 ]; then
  ranks=2
  echo "demo: one GPU found; running 2 ranks that share it (start the MPS daemon for speed)."
else
  echo "demo: $gpus GPUs found; running one rank per GPU."
fi
exec build/tools/iris-run -n "$ranks" --timeout 120 -- build/examples/example_00_hello
