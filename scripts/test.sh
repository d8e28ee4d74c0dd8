#!/usr/bin/env bash
# Sets up this checkout (scripts/setup.sh), builds every target and runs the tests: CPU tests
# everywhere; GPU and multi-rank tests report "skipped" on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
cmake --preset default && cmake --build --preset default && ctest --preset default
