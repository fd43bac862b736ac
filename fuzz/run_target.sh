#!/usr/bin/env bash
# run_target.sh FUZZER CORPUS SECONDS ARTIFACTS: the regression gate of one
# fuzz target (its ctest test). First every input of the committed CORPUS
# once, then SECONDS of fuzzing from it; new inputs go to a scratch
# directory, never into CORPUS. A crash, leak, timeout or out-of-memory
# fails the test and names the reproducer, saved under ARTIFACTS.
set -euo pipefail
fuzzer=$1 corpus=$2 seconds=$3 artifacts=$4
name=$(basename "$fuzzer")
[[ -d $corpus ]] && [[ -n $(ls -A "$corpus") ]] || { echo "$name: no corpus in $corpus"; exit 1; }
mkdir -p "$artifacts"
scratch=$(mktemp -d "/tmp/$name.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# Timeouts and memory per input: far above what any input takes (ms, MB).
common=(-artifact_prefix="$artifacts/" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1)
fail() {
  local repro
  repro=$(grep -aoE 'Test unit written to .*' "$scratch/log" | tail -1 || true)
  repro=${repro#Test unit written to }
  tail -60 "$scratch/log"
  echo "== $name: FAILED in $1; reproducer: ${repro:-(none written)}"
  echo "== reproduce: $fuzzer ${repro:-<input>}"
  exit 1
}
"$fuzzer" "${common[@]}" -runs=0 "$corpus" >"$scratch/log" 2>&1 || fail "the corpus run"
inputs=$(ls "$corpus" | wc -l)
"$fuzzer" "${common[@]}" -max_total_time="$seconds" "$scratch" "$corpus" >"$scratch/log" 2>&1 ||
  fail "$seconds s of fuzzing"
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/log" || true)
echo "== $name: $inputs corpus inputs, then ${runs:-?} executions in $seconds s: no crash"
