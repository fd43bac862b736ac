#!/usr/bin/env bash
# allocguard's Pod injection webhook and the controller-runtime peer
# (bench/peers, `peers webhook`) side by side, driven by the same client.
#
#   bench/peers/webhook_side_by_side.sh [--rates 200,500,1000,1500,2000,3000]
#                                       [--rounds 2] [--seconds 5]
#                                       [--webhook-bench PATH] [--preload LIB]
#
# Both servers run as processes of their own pinned to CPU 0 with taskset:
# allocguard as `webhook_bench --listen` (net::NewHttpsServer, the production
# TLS settings, the real admission::DecidePodInjection with three policies in
# the namespace), the peer with GOMAXPROCS=1. --preload LIB runs allocguard's
# server with LD_PRELOAD=LIB, as the chart runs the operator on mimalloc
# (docs/operator.md); without it, on glibc malloc. The client is
# `webhook_bench --url`, pinned to CPU 1: open loop, 16 kept-alive TLS
# connections, latency from each request's scheduled send time. At every
# rate of every round the two are driven one after the other, allocguard
# first in odd rounds and the peer first in even ones.
#
# Before any figure, `peers compare` sends the same AdmissionReview to both,
# applies each JSON Patch to the review's Pod and compares the two Pods; the
# script stops there if they differ (beyond the differences compare.go
# allows, each with its reason).
#
# Prints a row per server, rate and round (achieved rate, errors, p50, p99,
# max, the server's CPU as a share of one core from /proc/PID/stat), each
# server's VmRSS idle and after the load, the highest rate at which its p99
# stayed at or under 5 ms with no errors in every round, its highest achieved
# rate, and `uptime` before and after.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)

rates=200,500,1000,1500,2000,3000
rounds=2
seconds=5
bench=$repo/build/release/bench/webhook_bench
preload=
while (($#)); do
  case $1 in
    --rates) rates=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --webhook-bench) bench=$2; shift 2 ;;
    --preload) preload=$2; shift 2 ;;
    *) echo "webhook_side_by_side: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ ! -x $bench ]]; then
  echo "webhook_side_by_side: $bench is missing; build it with" \
    "cmake --build build/release -j2 --target webhook_bench" >&2
  exit 1
fi
peers=$("$repo/bench/peers/build.sh")

work=$(mktemp -d /tmp/ag-webhook-side-by-side.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# The URL a server printed ("listening on URL ..."), waiting up to 10 s.
listening_url() {
  for ((i = 0; i < 100; i++)); do
    url=$(awk '/^listening on / {print $3; exit}' "$1")
    [[ -n $url ]] && { echo "$url"; return; }
    sleep 0.1
  done
  echo "webhook_side_by_side: no server came up; its output:" >&2
  cat "$1" >&2
  exit 1
}
# CPU seconds a process has used (all its threads).
cpu_seconds() {
  awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"
}
rss_mib() { awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }

: >"$work/allocguard.out"
: >"$work/peer.out"
LD_PRELOAD=$preload taskset -c 0 "$bench" --listen 0 --ca-out "$work/allocguard-ca.pem" --server-cpu 0 \
  >"$work/allocguard.out" 2>&1 &
pids+=($!)
allocguard_pid=$!
GOMAXPROCS=1 taskset -c 0 "$peers" webhook --port "$(free_port)" --cert-dir "$work/peer-certs" \
  --ca-out "$work/peer-ca.pem" >"$work/peer.out" 2>&1 &
pids+=($!)
peer_pid=$!
declare -A url ca pid
url[allocguard]=$(listening_url "$work/allocguard.out")
url[controller-runtime]=$(listening_url "$work/peer.out")
ca[allocguard]=$work/allocguard-ca.pem
ca[controller-runtime]=$work/peer-ca.pem
pid[allocguard]=$allocguard_pid
pid[controller-runtime]=$peer_pid
# Any HTTP answer over TLS means the server is serving.
for server in allocguard controller-runtime; do
  for ((i = 0; ; i++)); do
    curl -s --cacert "${ca[$server]}" -o /dev/null "${url[$server]}" && break
    ((i < 100)) || { echo "webhook_side_by_side: $server does not answer" >&2; exit 1; }
    sleep 0.1
  done
done

"$bench" --dump-review "$work/review.json"
echo "same AdmissionReview to both, each JSON Patch applied to its Pod:"
if ! "$peers" compare --review "$work/review.json" \
  --a "${url[allocguard]}" --a-ca "${ca[allocguard]}" \
  --b "${url[controller-runtime]}" --b-ca "${ca[controller-runtime]}"; then
  echo "webhook_side_by_side: the two webhooks do not produce the same Pod; no figures" >&2
  exit 1
fi

echo
echo "uptime before: $(uptime)"
echo "allocguard's malloc: ${preload:-glibc}"
echo "idle VmRSS: allocguard $(rss_mib "$allocguard_pid") MiB, controller-runtime $(rss_mib "$peer_pid") MiB"
echo "servers pinned to CPU 0 (the Go one with GOMAXPROCS=1), client on CPU 1;" \
  "$seconds s per rate, 16 TLS connections, open loop"
echo
printf '%-19s %5s %6s %10s %6s %8s %8s %8s %7s\n' server round rate/s achieved/s errors \
  "p50 ms" "p99 ms" "max ms" "cpu"
results=$work/results
: >"$results"
IFS=, read -r -a rate_list <<<"$rates"
for ((round = 1; round <= rounds; round++)); do
  order=(allocguard controller-runtime)
  ((round % 2 == 0)) && order=(controller-runtime allocguard)
  for rate in "${rate_list[@]}"; do
    for server in "${order[@]}"; do
      cpu0=$(cpu_seconds "${pid[$server]}")
      t0=$(date +%s.%N)
      line=$("$bench" --url "${url[$server]%/mutate-pods}" --ca "${ca[$server]}" \
        --rates "$rate" --seconds "$seconds" --client-cpu 1 | awk '$1 ~ /^[0-9]/' | tail -n 1)
      t1=$(date +%s.%N)
      cpu1=$(cpu_seconds "${pid[$server]}")
      # rate achieved ok errors p50 p90 p99 max cpu
      read -r _ achieved _ errors p50 _ p99 max _ <<<"$line"
      cpu=$(awk -v a="$cpu0" -v b="$cpu1" -v s="$t0" -v e="$t1" 'BEGIN {printf "%.0f%%", (b - a) / (e - s) * 100}')
      printf '%-19s %5s %6s %10s %6s %8s %8s %8s %7s\n' "$server" "$round" "$rate" "$achieved" \
        "$errors" "$p50" "$p99" "$max" "$cpu"
      echo "$server $round $rate $achieved $errors $p50 $p99 $max" >>"$results"
    done
  done
done
echo
echo "VmRSS after the load: allocguard $(rss_mib "$allocguard_pid") MiB," \
  "controller-runtime $(rss_mib "$peer_pid") MiB"
for server in allocguard controller-runtime; do
  awk -v s="$server" -v rounds="$rounds" '
    $1 == s {
      n[$3]++
      if ($7 <= 5 && $5 == 0) good[$3]++
      if ($4 > top) top = $4
    }
    END {
      best = "none"
      for (r in n) if (good[r] == rounds && (best == "none" || r + 0 > best + 0)) best = r
      printf "%s: highest rate with p99 <= 5 ms and no errors in every round: %s%s; highest achieved: %.0f/s\n",
        s, best, best == "none" ? "" : "/s", top
    }' "$results"
done
echo "uptime after: $(uptime)"
