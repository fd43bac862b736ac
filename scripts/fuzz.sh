#!/usr/bin/env bash
# Runs the libFuzzer targets of fuzz/ for as long as asked and prints, per
# target, its executions, executions per second, crashes and corpus size.
#
#   scripts/fuzz.sh [seconds-per-target] [target...]   # default: 60 s, every target
#   scripts/fuzz.sh 600 quantity_fuzzer policy_fuzzer
#   scripts/fuzz.sh --runs 10000000 policy_fuzzer      # a number of executions instead
#
# Builds build/fuzz first (clang, ALLOCGUARD_FUZZ=ON: libFuzzer, ASan, UBSan;
# only the fuzz targets and the libraries they link). Each target starts from
# its committed seeds (fuzz/corpus/<target>/) and from what earlier runs found
# (build/fuzz/work/<target>/, kept between runs); a run stops at its first
# crash, leak, timeout or out-of-memory, whose input is saved under
# build/fuzz/work/artifacts/<target>/ and named in the output. docs/reliability.md
# ("Fuzzing") says how to turn one into a unit test.
#
# Runs at the priority it is started with: `nice -n 15 scripts/fuzz.sh ...`
# beside other work.
set -euo pipefail
cd "$(dirname "$0")/.."
runs= label=
if [[ ${1:-} == --runs ]]; then
  runs=${2:-}
  shift 2 || true
  if [[ ! $runs =~ ^[0-9]+$ ]]; then
    echo "usage: scripts/fuzz.sh --runs executions-per-target [target...]" >&2
    exit 2
  fi
  limit=(-runs="$runs")
  label="$runs executions"
else
  seconds=${1:-60}
  shift || true
  if [[ ! $seconds =~ ^[0-9]+$ ]]; then
    echo "usage: scripts/fuzz.sh [seconds-per-target] [target...]" >&2
    exit 2
  fi
  limit=(-max_total_time="$seconds")
  label="$seconds s"
fi

dir=build/fuzz
export CCACHE_DIR=${CCACHE_DIR:-/var/cache/allocguard/ccache}
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
if [[ ! -f $dir/build.ninja ]]; then
  cmake -S . -B "$dir" -G Ninja -DALLOCGUARD_FUZZ=ON -DCMAKE_CXX_FLAGS="-O1 -g" \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache >/dev/null
fi
env -u LC_CTYPE -u LC_MESSAGES LANG=C.UTF-8 LC_ALL=C.UTF-8 \
  cmake --build "$dir" -j "$(nproc)" --target fuzzers >/dev/null

targets=("$@")
if ((${#targets[@]} == 0)); then
  for d in fuzz/corpus/*/; do targets+=("$(basename "$d")"); done
fi

status=0
rows=()
for t in "${targets[@]}"; do
  bin=$dir/fuzz/$t
  [[ -x $bin ]] || { echo "no fuzz target $t (fuzz/CMakeLists.txt lists them)" >&2; exit 2; }
  work=$dir/work/$t artifacts=$dir/work/artifacts/$t
  mkdir -p "$work" "$artifacts"
  log=$dir/work/$t.log
  echo "== $t: $label (log: $log)"
  rc=0
  started=$SECONDS
  # Bounded memory for long runs. With ASan's defaults kubeconfig_fuzzer
  # grew by about 1 MB a thousand executions (967 MB after 420 000) and would
  # reach -rss_limit_mb long before 10 million: ASan's 256 MB quarantine of
  # freed memory, and its store of allocation stacks, which never shrinks
  # and gains an entry for every new stack (a parser's recursion makes many).
  # With a 32 MB quarantine it still grew 0.24 MB a thousand; without the
  # stacks as well it stayed near 100 MB. One execution frees far less than
  # 32 MB, so a use after free within it is still caught; a report then
  # lacks the allocation's stack, which replaying the saved input in the
  # ASan build's unit test gives.
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:quarantine_size_mb=32:malloc_context_size=0} \
    "$bin" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$work" "fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  per_s=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  crashes=0
  if ((rc != 0)); then
    crashes=1
    status=1
    repro=$(grep -aoE 'Test unit written to .*' "$log" | tail -1 || true)
    repro=${repro#Test unit written to }
    what='fuzz invariant broken|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error'
    grep -aE "$what" "$log" | head -3 | sed 's/^/   /' || true
    echo "   reproducer: ${repro:-(none written; see the log)}"
  fi
  # The corpus libFuzzer ended with (seeds and what it kept), as it last printed it.
  corpus=$(grep -aoE 'corp: [0-9]+/[0-9.]+[a-zA-Z]*' "$log" | tail -1 | sed 's/corp: //' || true)
  rows+=("$(printf '%-20s %12s %9s %8s %12s %9s' \
    "$t" "${execs:-?}" "${per_s:-?}" "$crashes" "${corpus:-?}" "$((SECONDS - started))")")
done
echo "== fuzzing: $label per target"
printf '%-20s %12s %9s %8s %12s %9s\n' target executions exec/s crashes 'corpus n/size' seconds
printf '%s\n' "${rows[@]}"
exit $status
