#!/usr/bin/env bash
# The guard's own CPU and memory while it samples a busy workload.
#
#   bench/guard_overhead_bench.sh [--build-dir build/guard] [--seconds 60]
#                                 [--interval 2s] [--workers 4] [--mib 64]
#
# Starts --workers busy processes (guard_test_workload churn: malloc/free of
# small blocks in a loop over --mib MiB each, under jemalloc through
# LD_PRELOAD, as an injected pod runs) and one sleeping one, then
# `allocguard guard --pid <each> --expected-allocator jemalloc
# --action Backpressure --threshold-bytes 1Gi --no-kube` for --seconds, and
# prints the guard's CPU time (utime + stime from /proc/<pid>/stat) as a share
# of one core, its VmRSS, RssAnon and VmHWM at the end, the samples it took
# (from its /metrics) and the load average beside them. Figures, not a test.
#
# Binaries come from --build-dir (allocguard and guard_test_workload are
# built there with -j2 when missing). Everything started is stopped on exit.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

build=$repo/build/guard
seconds=60
interval=2s
workers=4
mib=64
while (($#)); do
  case $1 in
    --build-dir) build=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --mib) mib=$2; shift 2 ;;
    *) echo "usage: $0 [--build-dir DIR] [--seconds N] [--interval D] [--workers N] [--mib N]" >&2; exit 2 ;;
  esac
done
[[ $build = /* ]] || build=$repo/$build

allocguard=$build/operator/cli/allocguard
workload=$build/operator/guard/guard_test_workload
if [[ ! -x $allocguard || ! -x $workload ]]; then
  cmake --build "$build" -j2 --target allocguard guard_test_workload >/dev/null
fi
jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# A sleeping process and the busy workers, each given to the guard with --pid
# (it follows each one's process tree, as it follows a container's).
LD_PRELOAD=$jemalloc "$workload" sleep >/dev/null &
parent=$!
pids+=("$parent")
worker_pids=()
for ((i = 0; i < workers; i++)); do
  LD_PRELOAD=$jemalloc "$workload" churn "$mib" >/dev/null &
  worker_pids+=($!)
  pids+=($!)
done
pid_flags=(--pid "$parent")
for p in "${worker_pids[@]}"; do pid_flags+=(--pid "$p"); done
sleep 1

ticks=$(getconf CLK_TCK)
cpu_of() { awk -v t="$ticks" '{print ($14 + $15) / t}' "/proc/$1/stat"; }
kib_of() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }

"$allocguard" guard "${pid_flags[@]}" --expected-allocator jemalloc --action Backpressure \
  --threshold-bytes 1Gi --interval "$interval" --no-kube \
  --metrics-bind-address "127.0.0.1:$port" >/tmp/guard_overhead_bench.log 2>&1 &
guard=$!
pids+=("$guard")
sleep 1
cpu0=$(cpu_of "$guard")
t0=$(date +%s.%N)
sleep "$seconds"
cpu1=$(cpu_of "$guard")
t1=$(date +%s.%N)
metrics=$(curl -s "127.0.0.1:$port/metrics")
samples=$(awk '$1 == "allocguard_guard_samples_total" {print $2}' <<<"$metrics")
judged=$(awk '$1 == "allocguard_guard_judged_bytes" {printf "%.0f", $2 / 1048576}' <<<"$metrics")
procs=$(awk '$1 == "allocguard_guard_workload_processes" {print $2}' <<<"$metrics")
workload_cpu=0
for p in "${worker_pids[@]}"; do workload_cpu=$(awk -v a="$workload_cpu" -v b="$(cpu_of "$p")" 'BEGIN {print a + b}'); done

awk -v c0="$cpu0" -v c1="$cpu1" -v t0="$t0" -v t1="$t1" -v n="$samples" \
  -v rss="$(kib_of "$guard" VmRSS)" -v anon="$(kib_of "$guard" RssAnon)" \
  -v hwm="$(kib_of "$guard" VmHWM)" -v interval="$interval" -v procs="$procs" \
  -v judged="$judged" -v wcpu="$workload_cpu" -v load="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
  wall = t1 - t0; cpu = c1 - c0
  printf "guard: interval %s, %.0f s measured, %d samples in total, workload %d processes (%s MiB anon+dirty, %.0f CPU-s)\n", interval, wall, n, procs, judged, wcpu
  printf "guard CPU: %.3f s = %.3f %% of one core\n", cpu, 100 * cpu / wall
  printf "guard memory: VmRSS %.1f MiB, RssAnon %.1f MiB, VmHWM %.1f MiB\n", rss / 1024, anon / 1024, hwm / 1024
  printf "load average: %s\n", load
}'
