#!/usr/bin/env bash
# Prints the replay engine's benchmark figures (docs/benchmarks.md explains
# them): the sampler's CPU per sample, the load driver's schedule accuracy and
# highest sustained rate, wrk's throughput against the same server code, how
# long the sequential judge takes to plan a canary's looks, and the stats
# agent's CPU per allocator (about 5 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/release --target sampler_bench load_driver_bench judge_plan_bench stats_agent_bench >/dev/null

echo "== sampler"
build/release/bench/sampler_bench

echo "== the judge's look plan"
build/release/bench/judge_plan_bench

echo "== the stats agent's CPU (Debian's allocators)"
build/release/bench/stats_agent_bench

echo "== load driver"
build/release/bench/load_driver_bench --seconds 4

echo "== wrk against the same server code (2 threads, 16 connections, 10 s)"
log=$(mktemp)
build/release/bench/load_driver_bench --serve-only >"$log" &
server=$!
trap 'kill $server 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 50); do grep -q listening "$log" && break; sleep 0.1; done
port=$(awk '/listening on/ {print $3}' "$log")
wrk -t2 -c16 -d10s "http://127.0.0.1:$port/ok?k=1"
