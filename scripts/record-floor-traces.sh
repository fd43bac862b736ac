#!/usr/bin/env bash
# Records long floor traces of the workloads in e2e/workloads under each
# allocator, for the verdict corpus (operator/memory/testdata/, docs/verdicts.md,
# "Recorded runs of 32 minutes"). Each recording is one `allocguard replay`
# of one variant with early stopping off, so the trace runs its whole length
# whatever the judge would have said. The recordings named on the command
# line run side by side, each in its own memory cgroup; two recordings of
# the same variant started together (`-a`, `-b`, `-c`) measure how much
# two replicas' floor noise has in common (docs/verdicts.md, "Canary
# replicas on the corpus").
#
#   scripts/record-floor-traces.sh [--build DIR] [--out DIR] [--duration 32m] NAME...
#   scripts/record-floor-traces.sh --list
#
# The replay tool's own checks apply: a recording whose load fell behind or
# whose workload answered wrongly says so in its verdict line and its .json.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build/release
out=out/floor-traces
duration=32m
names=()
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --list) list=1; shift ;;
    -*) echo "record-floor-traces.sh: unknown flag $1" >&2; exit 64 ;;
    *) names+=("$1"); shift ;;
  esac
done

demo=(--load e2e/workloads/demo.load.yaml -- "$build/e2e/workloads/ratchet_service" --port '{port}')
libc=(--load e2e/workloads/libc_demo.load.yaml -- "$build/e2e/workloads/libc_demo" --port '{port}')
# NAME: the variant (allocator and environment) and the workload.
declare -A spec=(
  [demo-jemalloc-a]="jemalloc"
  [demo-jemalloc-b]="jemalloc"
  [demo-jemalloc-c]="jemalloc"
  [demo-glibc-a]="glibc"
  [demo-glibc-b]="glibc"
  [demo-glibc-c]="glibc"
  [demo-glibc512]="glibc,MALLOC_ARENA_MAX=512"
  [demo-glibc-arena2]="glibc,MALLOC_ARENA_MAX=2"
  [demo-mimalloc]="mimalloc"
  [demo-tcmalloc]="tcmalloc"
  [demo-jemalloc-leak]="jemalloc"
  [demo-glibc-leak]="glibc"
  [libc-demo-glibc]="glibc"
  [libc-demo-jemalloc]="jemalloc"
)
if [[ -n ${list:-} ]] || ((${#names[@]} == 0)); then
  printf '%s\n' "${!spec[@]}" | sort
  exit 0
fi
for name in "${names[@]}"; do
  [[ -n ${spec[$name]:-} ]] || { echo "record-floor-traces.sh: no recording $name (--list)" >&2; exit 64; }
done

mkdir -p "$out"
pids=()
for name in "${names[@]}"; do
  case $name in
    libc-demo-*) workload=("${libc[@]}") ;;
    *-leak) workload=("${demo[@]}" --leak) ;;
    *) workload=("${demo[@]}") ;;
  esac
  "$build/operator/cli/allocguard" replay --variant "$name=${spec[$name]}" \
    --duration "$duration" --no-early-stop --out "$out" "${workload[@]}" \
    >"$out/$name.log" 2>&1 &
  pids+=($!)
  echo "recording $name (${spec[$name]}) for $duration: $out/$name.csv, log $out/$name.log"
done
status=0
for i in "${!pids[@]}"; do
  code=0
  wait "${pids[$i]}" || code=$?
  # The replay's exit code is its verdict (0 Flat, 2 Ratchet, 8 Inconclusive, ...);
  # 1 and 64 are errors, 6 and 7 a run that did not measure what it should.
  echo "${names[$i]}: exit $code, $(grep -m1 "^${names[$i]}: " "$out/${names[$i]}.log" || true)"
  case $code in 1 | 6 | 7 | 64) status=1 ;; esac
done
exit $status
