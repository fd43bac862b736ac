#!/usr/bin/env bash
# The allocguard demo: builds allocguard and the demo workload (nothing else),
# then replays the demo workload
# (e2e/workloads/ratchet_service) under glibc malloc and under jemalloc on the
# identical deterministic load, prints the verdicts and writes report.html.
#
#   scripts/demo.sh          glibc with a 64-core node's arena limit vs jemalloc
#   scripts/demo.sh --leak   the same workload with its leak switch on
#
# glibc allows 8 arenas per online CPU. On this small machine that is too few
# for the ratchet of a large production node to show, so the glibc variant
# emulates a 64-core node with MALLOC_ARENA_MAX=512 (8 x 64) and says so.
set -euo pipefail
cd "$(dirname "$0")/.."

leak=()
name=demo
if [[ ${1:-} == --leak ]]; then
  leak=(--leak)
  name=demo-leak
fi
duration=${DEMO_DURATION:-12m}

start=$SECONDS
# Only the packages the demo needs; the tests' (clang, Chromium, ...) are
# installed by scripts/test.sh when it runs.
./scripts/install-deps.sh --demo
echo "== packages ready after $((SECONDS - start)) s"
echo "== building (release: allocguard and the demo workload only)"
# A tree of its own (build/demo): the tests switched off, so their tools need
# not be installed for the demo, and the common heavy headers precompiled once
# (ALLOCGUARD_PCH, cmake/precompiled_headers.cmake), about a tenth less
# compiling from nothing (docs/e2e.md, "Clone to first verdict"). The compiler
# cache is the test command's; ccache caches sources compiled with a
# precompiled header only with this sloppiness.
export CCACHE_DIR=${CCACHE_DIR:-/var/cache/allocguard/ccache}
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
mkdir -p "$CCACHE_DIR"
cmake -S . -B build/demo -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF \
  -DALLOCGUARD_PCH=ON -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache \
  >/dev/null
env -u LC_CTYPE -u LC_MESSAGES LANG=C.UTF-8 LC_ALL=C.UTF-8 \
  cmake --build build/demo --target allocguard ratchet_service allocguard_stats
echo "== built after $((SECONDS - start)) s"

out=out/$name
rm -rf "$out"
mkdir -p "$out"
cat <<MSG

== replay: two variants, one after the other, up to $duration each; each stops as
   soon as its verdict is clear, so expect roughly 10-20 minutes in all.
   glibc512 = glibc malloc with MALLOC_ARENA_MAX=512, the arena limit of a 64-core node
   jemalloc = jemalloc 5.3 (Debian libjemalloc2) preloaded with LD_PRELOAD
   Both with allocguard's stats agent preloaded: the allocator's own books, bytes
   in use by the program and bytes the allocator retains (docs/allocator-books.md)
MSG
set +e
agent=$PWD/build/demo/allocators/liballocguard_stats.so
books=$PWD/$out/books
mkdir -p "$books"
build/demo/operator/cli/allocguard replay \
  --load e2e/workloads/demo.load.yaml \
  --variant "glibc512=glibc,MALLOC_ARENA_MAX=512,LD_PRELOAD=$agent,ALLOCGUARD_STATS_DIR=$books" \
  --variant "jemalloc=jemalloc,LD_PRELOAD=$agent,ALLOCGUARD_STATS_DIR=$books" \
  --books-dir "$books" \
  --duration "$duration" \
  --out "$out" \
  --report "$out/report.html" \
  -- build/demo/e2e/workloads/ratchet_service --port '{port}' "${leak[@]}"
code=$?
set -e
echo
echo "== finished after $((SECONDS - start)) s"
echo "exit code $code (0 Flat, 2 Ratchet, 3 AllocatorRetention, 4 Leak, 5 OOMKilled, 6 Errors, 7 Failed, 8 Inconclusive)"
echo "re-judge the saved samples: build/demo/operator/cli/allocguard analyze $out/glibc512.csv $out/jemalloc.csv"
echo "open the report:            $out/report.html"
# The demo succeeded if it produced a verdict; the verdict itself is the result.
((code != 1))
