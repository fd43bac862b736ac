#!/usr/bin/env bash
# Runs every allocguard test on this machine: installs what is missing, builds
# twice (release, and AddressSanitizer + UndefinedBehaviorSanitizer), and runs
# the whole ctest suite under both builds. Tests labelled "integration" start
# real processes under real memory cgroups with the real Debian allocators.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh

jobs=$(nproc)
for build in release asan; do
  dir=build/$build
  if [[ $build == asan ]]; then
    flags=(-DALLOCGUARD_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug)
  else
    flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
  fi
  echo "== building ($build)"
  cmake -S . -B "$dir" -G Ninja "${flags[@]}" >/dev/null
  cmake --build "$dir" -j "$jobs"
done

status=0
for build in release asan; do
  echo "== testing ($build)"
  # detect_leaks stays on: LeakSanitizer works as root on these machines.
  ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "build/$build" --output-on-failure -j "$jobs" || status=1
done
exit $status
