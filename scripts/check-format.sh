#!/usr/bin/env bash
# Checks that every tracked C++/CUDA file is laid out as .clang-format says, with the one
# clang-format version the project pins (18.1.8; other versions disagree on some constructs).
#   scripts/check-format.sh [--fix] [FILE...]
# With no FILE, checks every file `git ls-files` lists as *.hpp *.cpp *.cu *.cuh *.h (third-party
# code excluded). --fix rewrites the files in place instead of reporting them.
# clang-format is taken from $IRIS_CLANG_FORMAT, else .venv/bin/clang-format, else PATH.
# Exit status: 0 all formatted, 1 some files are not, 2 usage or tree errors, 77 the pinned
# clang-format is not available (CTest reports the test as skipped).
set -uo pipefail
pinned=18.1.8
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

fix=0
if [ "${1:-}" = --fix ]; then fix=1; shift; fi

candidates=()
[ -n "${IRIS_CLANG_FORMAT:-}" ] && candidates+=("$IRIS_CLANG_FORMAT")
candidates+=("$root/.venv/bin/clang-format")
command -v clang-format >/dev/null 2>&1 && candidates+=("$(command -v clang-format)")
clang_format=
for candidate in "${candidates[@]}"; do
  if [ -x "$candidate" ] && "$candidate" --version 2>/dev/null | grep -q "version $pinned\b"; then
    clang_format=$candidate
    break
  fi
done
if [ -z "$clang_format" ]; then
  echo "check-format: clang-format $pinned not found (looked at: ${candidates[*]}). Install it with" \
       "'python3 -m venv .venv && .venv/bin/pip install clang-format==$pinned', or point" \
       "IRIS_CLANG_FORMAT (or the CMake cache variable of the same name) at that version." >&2
  exit 77
fi

if [ $# -gt 0 ]; then
  files=("$@")
else
  if ! git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "check-format: $root is not a git work tree, so the tracked files are unknown;" \
         "name the files to check" >&2
    exit 2
  fi
  mapfile -t files < <(git -C "$root" ls-files -- '*.hpp' '*.cpp' '*.cu' '*.cuh' '*.h' |
                       grep -Ev '(^|/)(third_party|third-party|external|extern|3rdparty)/')
fi
if [ ${#files[@]} -eq 0 ]; then
  echo "check-format: no files to check" >&2
  exit 2
fi

if [ $fix = 1 ]; then
  "$clang_format" -i --style=file "${files[@]}"
  echo "check-format: formatted ${#files[@]} files with $clang_format"
  exit 0
fi

bad=()
for file in "${files[@]}"; do
  if ! "$clang_format" --dry-run --Werror --style=file "$file" >/dev/null 2>&1; then
    bad+=("$file")
  fi
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check-format: ${#bad[@]} of ${#files[@]} files differ from clang-format $pinned's layout:"
  printf '  %s\n' "${bad[@]}"
  echo "Fix them with: scripts/check-format.sh --fix ${bad[*]}"
  echo "(or see each change first: $clang_format --dry-run FILE)"
  exit 1
fi
echo "check-format: ${#files[@]} files formatted as clang-format $pinned lays them out"
