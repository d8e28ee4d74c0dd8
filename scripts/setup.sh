#!/usr/bin/env bash
# Prepares this checkout for building: a project-local virtual environment (.venv/) with the
# build tools pinned in scripts/requirements.txt, GoogleTest from the system's packages, and the
# CUDA compiler on PATH. Run it directly, or source it (scripts/demo.sh and scripts/test.sh do)
# to get .venv/bin and CUDA on PATH. A second run only checks, and takes a moment.
#
# What it cannot install itself (not root, no apt-get) it names, with the command that gets it,
# and stops with exit code 1.
set -euo pipefail
iris_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
iris_venv="$iris_root/.venv"
iris_requirements="$iris_root/scripts/requirements.txt"

iris_say() { echo "setup: $*"; }
iris_fail() { echo "setup: $*" >&2; exit 1; }

# Debian packages: installed with apt-get when we are root, named otherwise.
iris_apt_install() {
  local why=$1; shift
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    iris_say "installing $* ($why) with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  else
    iris_fail "$why needs the system package(s) $*; install them, e.g. 'sudo apt-get install $*'" \
              "(Debian/Ubuntu), and run this again"
  fi
}

# 1. Compilers: a C++20 host compiler and CUDA's nvcc.
command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 ||
  iris_apt_install "a C++20 compiler" g++
if ! command -v nvcc >/dev/null 2>&1; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  else
    iris_fail "no CUDA compiler: nvcc is neither on PATH nor in /usr/local/cuda/bin. Install the" \
              "CUDA toolkit (13 or newer, https://developer.nvidia.com/cuda-downloads) and run this again"
  fi
fi

# 2. GoogleTest (the tests), from the system's packages.
if [ ! -f /usr/include/gtest/gtest.h ] || [ ! -f /usr/include/gmock/gmock.h ]; then
  iris_apt_install "GoogleTest, which the tests use," libgtest-dev libgmock-dev
fi

# 3. The virtual environment with the pinned tools.
if [ ! -x "$iris_venv/bin/python" ]; then
  if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    command -v python3 >/dev/null 2>&1 || iris_apt_install "Python 3" python3
    python3 -c 'import venv, ensurepip' >/dev/null 2>&1 ||
      iris_apt_install "a Python virtual environment (python3 -m venv)" python3-venv
  fi
  iris_say "creating the virtual environment $iris_venv"
  python3 -m venv "$iris_venv"
fi
iris_wanted=$(grep -v '^[[:space:]]*#' "$iris_requirements" | grep -v '^[[:space:]]*$')
# Ninja from PyPI only where the system has none (the venv's own ninja counts as ours).
if PATH=${PATH//"$iris_venv/bin:"/} command -v ninja >/dev/null 2>&1; then
  iris_wanted=$(grep -v '^ninja' <<<"$iris_wanted")
fi
iris_stamp="$iris_venv/.iris-requirements"
if [ ! -f "$iris_stamp" ] || [ "$(cat "$iris_stamp")" != "$iris_wanted" ]; then
  iris_say "installing $(tr '\n' ' ' <<<"$iris_wanted")into .venv"
  "$iris_venv/bin/python" -m pip install -q --disable-pip-version-check $iris_wanted ||
    iris_fail "pip could not install the build tools from PyPI (no network?); the list is in" \
              "scripts/requirements.txt"
  printf '%s' "$iris_wanted" >"$iris_stamp"
fi
export PATH="$iris_venv/bin:$PATH"
hash -r
iris_say "$(cmake --version | head -n1), ninja $(ninja --version), $(nvcc --version | tail -n1)"
