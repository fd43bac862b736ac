#!/usr/bin/env bash
# What the stats agent costs the demo workload: its CPU and p99 latency with
# and without the agent, on the demo's load, in one replay run whose variants
# alternate (A B A B ...), so that a machine whose load drifts affects both
# sides alike.
#
#   bench/stats_agent_overhead_bench.sh [--build-dir build/release] [--rounds 3]
#       [--duration 2m] [--interval-ms 2000] [--allocator glibc512] [--allocator jemalloc]
#       [--out DIR]
#
# For each round and each --allocator (default: glibc512, the demo's emulation
# of a 64-core node, MALLOC_ARENA_MAX=512, where the agent's mallinfo2 walks
# the most free chunks; and jemalloc), two variants run one after the other:
# `<allocator>-off-r<N>` as injected without the agent, then
# `<allocator>-agent-r<N>` with liballocguard_stats.so preloaded
# (ALLOCGUARD_STATS_INTERVAL_MS=--interval-ms). Every variant is
# `allocguard replay --no-early-stop` of e2e/workloads/ratchet_service under
# e2e/workloads/demo.load.yaml for --duration.
#
# Prints per round and variant: the workload's CPU as a share of one core
# (its processes' utime + stime over the sampled span, from the replay's
# CSV), its p99 latency, and for the agent variants the publisher thread's
# own CPU (agent_cpu_ns over the samples it published, read from its books
# file, copied every second while the run lasts since the agent removes it
# at exit). Then per allocator the medians, and the median of the per-round
# differences (agent - off). The load average before and after is printed
# beside them. Figures, not a test.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

build=$repo/build/release
rounds=3
duration=2m
interval_ms=2000
allocators=()
out=
while (($#)); do
  case $1 in
    --build-dir) build=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --interval-ms) interval_ms=$2; shift 2 ;;
    --allocator) allocators+=("$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [--build-dir DIR] [--rounds N] [--duration D] [--interval-ms N]" \
         "[--allocator glibc512|glibc|jemalloc|mimalloc|tcmalloc]... [--out DIR]" >&2; exit 2 ;;
  esac
done
[[ $build = /* ]] || build=$repo/$build
((${#allocators[@]})) || allocators=(glibc512 jemalloc)
[[ -n $out ]] || out=$(mktemp -d /tmp/stats_agent_overhead.XXXXXX)
mkdir -p "$out"

allocguard=$build/operator/cli/allocguard
service=$build/e2e/workloads/ratchet_service
agent=$build/allocators/liballocguard_stats.so
if [[ ! -x $allocguard || ! -x $service || ! -f $agent ]]; then
  nice -n 19 cmake --build "$build" -j2 --target allocguard ratchet_service allocguard_stats >/dev/null
fi

spec_of() {
  case $1 in
    glibc512) echo "glibc,MALLOC_ARENA_MAX=512" ;;
    glibc | jemalloc | mimalloc | tcmalloc) echo "$1" ;;
    *) echo "unknown allocator $1" >&2; exit 2 ;;
  esac
}

variants=()
stats_dirs=()
for ((r = 1; r <= rounds; r++)); do
  for a in "${allocators[@]}"; do
    spec=$(spec_of "$a")
    variants+=(--variant "$a-off-r$r=$spec")
    dir=$out/stats/$a-agent-r$r
    mkdir -p "$dir" "$out/kept/$a-agent-r$r"
    stats_dirs+=("$dir")
    variants+=(--variant "$a-agent-r$r=$spec,LD_PRELOAD=$agent,ALLOCGUARD_STATS_DIR=$dir,ALLOCGUARD_STATS_INTERVAL_MS=$interval_ms")
  done
done

# The agent removes its books at exit: keep a copy of each, once a second.
(
  while :; do
    for d in "${stats_dirs[@]}"; do
      cp -f "$d"/books-* "$out/kept/$(basename "$d")/" 2>/dev/null || true
    done
    sleep 1
  done
) &
copier=$!
trap 'kill $copier 2>/dev/null || true' EXIT

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "stats agent overhead: ${#allocators[@]} allocator(s) x $rounds rounds x 2 variants of $duration," \
  "agent interval ${interval_ms} ms; out: $out" >&2
"$allocguard" replay --load "$repo/e2e/workloads/demo.load.yaml" "${variants[@]}" \
  --duration "$duration" --max-duration "$duration" --no-early-stop --out "$out" \
  -- "$service" --port '{port}' >"$out/replay.txt" 2>"$out/replay.log" || true
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
kill $copier 2>/dev/null || true

python3 - "$out" "$rounds" "$load_before" "$load_after" "$interval_ms" "${allocators[@]}" <<'EOF'
import csv, glob, json, os, statistics, struct, sys

out, rounds, load_before, load_after, interval_ms = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
allocators = sys.argv[6:]

def cpu_share(name):
    """The workload's CPU over the sampled span as a share of one core."""
    path = os.path.join(out, name + ".csv")
    rows = [r for r in csv.reader(l for l in open(path) if not l.startswith("#"))]
    head, rows = rows[0], [r for r in rows[1:] if r]
    t, c = head.index("t_s"), head.index("cpu_s")
    rows = [r for r in rows if r[c] != ""]
    span = float(rows[-1][t]) - float(rows[0][t])
    return (float(rows[-1][c]) - float(rows[0][c])) / span, span

def p99(name):
    with open(os.path.join(out, name + ".json")) as f:
        return json.load(f).get("p99Milliseconds")

def agent_cpu(name):
    """The publisher thread's CPU per sample interval, summed over the
    processes that published (books files kept by the copier)."""
    share, samples = 0.0, 0
    for path in glob.glob(os.path.join(out, "kept", name, "books-*")):
        data = open(path, "rb").read()
        if len(data) != 280:
            continue
        interval, = struct.unpack_from("<I", data, 28)
        sequence, = struct.unpack_from("<Q", data, 32)
        cpu_ns, = struct.unpack_from("<Q", data, 48)
        if sequence > 0 and interval > 0:
            share += cpu_ns / (sequence * interval * 1e6)
            samples += sequence
    return (share, samples) if samples else (None, 0)

def fmt(v, spec):
    return "-" if v is None else format(v, spec)

print(f"load average before {load_before}, after {load_after}; agent interval {interval_ms} ms")
print(f"{'round':>5}  {'variant':<22} {'CPU % core':>10} {'p99 ms':>8} {'agent thread % core':>20} {'samples':>8}")
per = {a: {"off": [], "agent": [], "p99off": [], "p99agent": [], "thread": []} for a in allocators}
for r in range(1, rounds + 1):
    for a in allocators:
        for side in ("off", "agent"):
            name = f"{a}-{side}-r{r}"
            try:
                share, span = cpu_share(name)
            except (OSError, ValueError, IndexError):
                print(f"{r:>5}  {name:<22} {'no samples':>10}")
                continue
            lat = p99(name)
            thread, samples = agent_cpu(name) if side == "agent" else (None, 0)
            per[a][side].append(share)
            per[a]["p99" + side].append(lat)
            if thread is not None:
                per[a]["thread"].append(thread)
            print(f"{r:>5}  {name:<22} {share * 100:>10.2f} {fmt(lat, '8.1f'):>8} "
                  f"{fmt(None if thread is None else thread * 100, '20.3f'):>20} "
                  f"{samples if side == 'agent' else '':>8}")

print()
print(f"{'allocator':<10} {'CPU % off':>10} {'CPU % agent':>12} {'diff (median of rounds)':>24} "
      f"{'p99 off':>8} {'p99 agent':>10} {'p99 diff':>9} {'agent thread %':>15}")
for a in allocators:
    p = per[a]
    n = min(len(p["off"]), len(p["agent"]))
    if n == 0:
        print(f"{a:<10} no complete round")
        continue
    diffs = [p["agent"][i] - p["off"][i] for i in range(n)]
    lat = [(p["p99off"][i], p["p99agent"][i]) for i in range(n)
           if p["p99off"][i] is not None and p["p99agent"][i] is not None]
    p99_diff = statistics.median([b - o for o, b in lat]) if lat else None
    print(f"{a:<10} {statistics.median(p['off']) * 100:>10.2f} {statistics.median(p['agent']) * 100:>12.2f} "
          f"{statistics.median(diffs) * 100:>+24.2f} "
          f"{fmt(statistics.median([o for o, _ in lat]) if lat else None, '8.1f'):>8} "
          f"{fmt(statistics.median([b for _, b in lat]) if lat else None, '10.1f'):>10} "
          f"{fmt(p99_diff, '+9.1f'):>9} "
          f"{fmt(statistics.median(p['thread']) * 100 if p['thread'] else None, '15.3f'):>15}")
EOF
