#!/usr/bin/env bash
# Checks the C and C++ sources: their layout against .clang-format
# (clang-format --dry-run, every tracked .cc, .h and .c file), then
# clang-tidy's checks (.clang-tidy) over the product, test, benchmark and
# fuzz sources. Prints every finding and exits 1 if there is one.
#
#   scripts/lint.sh [BUILD_DIR [OPTION...]]   # default build/release
#   scripts/lint.sh --format-only             # clang-format alone (no build needed)
#
# OPTIONs go to scripts/clang_tidy_cached.py (e.g. --deps compiler while the
# build runs, or the files to check).
#
# clang-tidy reads the compile flags from BUILD_DIR/compile_commands.json
# (a configured CMake build; scripts/test.sh runs this after its release
# build). It runs on every core (ALLOCGUARD_LINT_JOBS to change) and takes
# the result of a file whose source, included headers, flags, checks and
# clang-tidy are unchanged from a cache outside the repository
# (scripts/clang_tidy_cached.py). docs/reliability.md has the timings.
set -euo pipefail
cd "$(dirname "$0")/.."
format_only=0
if [[ ${1:-} == --format-only ]]; then
  format_only=1
  shift
fi
build=${1:-build/release}
(($#)) && shift
status=0

t0=$SECONDS
mapfile -t sources < <(git ls-files '*.cc' '*.h' '*.c')
if clang-format --dry-run --Werror "${sources[@]}"; then
  echo "== clang-format: ${#sources[@]} files as .clang-format lays them out ($((SECONDS - t0)) s)"
else
  echo "== clang-format: FAILED: the files above differ from .clang-format's layout (clang-format -i FILE)"
  status=1
fi

((format_only)) && exit $status

if [[ ! -f $build/compile_commands.json ]]; then
  echo "== clang-tidy: no $build/compile_commands.json; configure the build first (README.md)"
  exit 2
fi
rc=0
# In the background so that a SIGTERM (scripts/test.sh's cleanup) stops it too.
scripts/clang_tidy_cached.py --build "$build" -j "${ALLOCGUARD_LINT_JOBS:-$(nproc)}" "$@" &
tidy=$!
trap 'kill "$tidy" 2>/dev/null; exit 143' TERM INT
wait "$tidy" || rc=$?
trap - TERM INT
if ((rc == 1)); then
  echo "== clang-tidy: FAILED: the findings above break .clang-tidy's checks"
elif ((rc)); then
  echo "== clang-tidy: FAILED: clang-tidy did not run (exit $rc)"
fi
((rc)) && status=1
exit $status
