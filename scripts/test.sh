#!/usr/bin/env bash
# Runs every allocguard test on this machine: installs what is missing, builds
# three times (release with GCC; AddressSanitizer + UndefinedBehaviorSanitizer
# with clang, a build that also makes the libFuzzer targets of fuzz/;
# ThreadSanitizer with clang, whose build runs the unit and integration tests
# only), checks the sources' layout (clang-format) and clang-tidy's checks on
# what changed, runs the whole ctest suite under the first two, the fuzz
# targets' regression gate, the control-plane tier
# against a real etcd + kube-apiserver, and the node tier: the whole product
# on a real single-node cluster (e2e/run.sh). Tests labelled "integration"
# start real processes under real memory cgroups with the real Debian
# allocators.
#
# The work is laid out so that the two cores stay busy on a fresh machine
# and the node tier, whose canaries take most of a quarter of an hour of
# wall time, starts as early as it can (docs/e2e.md has the timings):
#
#   1. from the start, in the background: the Kubernetes, etcd and Helm
#      binaries (Go, cached by version in /var/cache/allocguard), and the node
#      tier's base images, the image's allocator stages and the libc
#      demonstration images (buildah, layers cached on the machine), much of
#      which waits on downloads; beside them, the release build and its tests;
#   2. the node tier (e2e/run.sh) starts in the background as soon as the
#      binaries, those images and the release build of the operator and the
#      demo workload are there (the operator image's C++ build takes its
#      objects from the release build's compiler cache), while the rest of
#      the release tree (its tests) builds;
#   3. after the release tests, at a lower priority (nice 10), so the node
#      tier's pods and canaries keep the CPU they need: the sanitizer build
#      and its tests, the fuzz regression gate, the ThreadSanitizer build and
#      its unit and integration tests (docs/reliability.md); beside them, in
#      the background, the control-plane tier (release tree at once, the
#      sanitizer tree once its own tests are done), whose tests mostly wait
#      on the API server and so fill the cores' idle time.
#
# Each step's time is printed at the end. ALLOCGUARD_SKIP_NODE_TIER=1 leaves
# the node tier out of a local run.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS

node_tier=1
[[ -n ${ALLOCGUARD_SKIP_NODE_TIER:-} ]] && node_tier=0
if ((node_tier)); then
  ./scripts/install-deps.sh --node
else
  ./scripts/install-deps.sh
fi

jobs=$(nproc)
logs=$(mktemp -d /tmp/allocguard-test.XXXXXX)
# How long each step took, printed at the end ("seconds<TAB>step").
times=()
took() { times+=("$2"$'\t'"$1"); }
took "install-deps" $((SECONDS - start))

# The layout of every C and C++ file against .clang-format (scripts/lint.sh
# --format-only: a few seconds, no build needed), counted as one test.
# clang-tidy runs after the release build (below).
format_passed=0 format_failed=0
t0=$SECONDS
if scripts/lint.sh --format-only; then
  format_passed=1
else
  format_failed=1
fi
echo "== layout (clang-format): $format_passed passed, $format_failed failed, 0 skipped"
took "layout check (clang-format)" $((SECONDS - t0))
controlplane_dir=""
# On any exit: stop what still runs in the background (e2e/run.sh tears its
# cluster down on SIGTERM) and the control-plane cluster.
cleanup() {
  local pids
  pids=$(jobs -pr)
  if [[ -n $pids ]]; then
    kill $pids 2>/dev/null || true
    wait $pids 2>/dev/null || true
  fi
  [[ -f $logs/controlplane.dir ]] && controlplane_dir=$(cat "$logs/controlplane.dir")
  if [[ -n $controlplane_dir ]]; then
    ALLOCGUARD_CLUSTER_DIR=$controlplane_dir e2e/cluster/down.sh >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

# background NAME COMMAND...: runs COMMAND with its output in $logs/NAME.log;
# $logs/NAME.rc holds its exit code and $logs/NAME.secs its time once it ends.
# A SIGTERM (cleanup) is passed on to COMMAND, and waited for: e2e/run.sh
# tears its cluster down before it exits.
background() {
  local name=$1
  shift
  (
    child=""
    trap '[[ -n $child ]] && { kill -TERM "$child" 2>/dev/null; wait "$child"; }; exit 143' TERM
    t0=$SECONDS
    "$@" >"$logs/$name.log" 2>&1 &
    child=$!
    rc=0
    wait "$child" || rc=$?
    echo $((SECONDS - t0)) >"$logs/$name.secs"
    echo $rc >"$logs/$name.rc"
  ) &
}
# finished NAME: waits (up to three hours, far above any step) until NAME has
# ended; its exit code is the step's.
finished() {
  local name=$1 waited=0
  until [[ -f $logs/$name.rc ]]; do
    ((waited < 10800)) || { echo "== $name did not end within 3 h" >&2; return 1; }
    sleep 2
    waited=$((waited + 2))
  done
  return "$(cat "$logs/$name.rc")"
}

# --- 1. from the start, in the background ----------------------------------------
# First run on a machine: about half an hour of Go builds from the module
# proxy; later runs find them cached and this returns at once.
binaries=(etcd kube-apiserver kubectl helm)
((node_tier)) && binaries+=(kube-controller-manager kube-scheduler kubelet kube-proxy)
echo "== cluster binaries: building what is not cached, in the background (log: $logs/binaries.log)"
background binaries e2e/cluster/build.sh "${binaries[@]}"

# Nothing here waits for the C++ or Go builds: the Debian base images
# (debootstrap), the Dockerfile's allocator stages (jemalloc, mimalloc and
# tcmalloc from Debian's sources, for glibc and musl) and the libc demo
# images. e2e/run.sh then finds their layers cached.
node_images() {
  export ALLOCGUARD_BUILD_NICE=0
  e2e/images/allocguard.sh --allocators-only >/dev/null
  e2e/images/libc-demo.sh --no-import >/dev/null
}
if ((node_tier)); then
  echo "== node-tier images: base, allocator stages, libc demo, in the background (log: $logs/images.log)"
  background images node_images
fi

# --- C++ builds ----------------------------------------------------------------
# The compiler cache lives outside the repository (CI builds in a fresh clone
# every time) and is keyed by content, not by path: paths below the clone are
# hashed relative to it and the working directory is not hashed. The image
# build (e2e/images/allocguard.sh) shares it.
export CCACHE_DIR=${CCACHE_DIR:-/var/cache/allocguard/ccache}
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
mkdir -p "$CCACHE_DIR"
ccache --max-size 8G >/dev/null
ccache --zero-stats >/dev/null
build() {  # release|asan|tsan [TARGET...]: the whole tree, or only TARGETs
  local build=$1 dir=build/$1 build_start=$SECONDS flags what=$1
  shift
  (($#)) && what="$build: $*"
  # The two sanitizer builds use Debian's clang and its runtimes
  # (libclang-rt-14-dev) with line tables only: stack traces keep their file
  # and line, and the compiles take about a fifth less than with full debug
  # information. The ASan build is also the fuzz build (ALLOCGUARD_FUZZ: the
  # fuzz targets link the tests' objects); at -O0 it compiles in half the
  # time of -O1. The ThreadSanitizer build is at -O0 too: clang's advice of
  # -O1 is for the speed of the instrumented program, and at -O0 the tree
  # built from a cold cache in 308 s instead of 541 s on this 2-core machine
  # while its unit and integration tests took 70 s against 68 s
  # (docs/reliability.md).
  if [[ $build == asan ]]; then
    flags=(-DALLOCGUARD_SANITIZE=ON -DALLOCGUARD_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug
      "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -gline-tables-only" "-DCMAKE_C_FLAGS_DEBUG=-O0 -gline-tables-only"
      -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
  elif [[ $build == tsan ]]; then
    flags=(-DALLOCGUARD_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
      "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O0 -gline-tables-only -DNDEBUG"
      "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O0 -gline-tables-only -DNDEBUG"
      -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
  else
    flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
  fi
  echo "== building ($what)"
  cmake -S . -B "$dir" -G Ninja "${flags[@]}" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache >/dev/null
  # ccache hashes the locale variables (they change the compiler's messages);
  # the Dockerfile's build stage sets the same ones, so it gets these objects.
  env -u LC_CTYPE -u LC_MESSAGES LANG=C.UTF-8 LC_ALL=C.UTF-8 \
    cmake --build "$dir" -j "$jobs" ${1:+--target "$@"}
  echo "== built ($what) in $((SECONDS - build_start)) s"
  took "build ($what)" $((SECONDS - build_start))
}
# Test counts over every ctest run, for the closing line. ctest counts a
# skipped test as passed; here it is counted apart, and under CI=true (as
# .ci/run runs this) a tier that skipped a test fails the run: a skip is not
# a pass.
passed=$format_passed failed=$format_failed skipped=0
count_tests() {  # NAME LOG: adds LOG's counts to the totals
  local name=$1 log=$2 total=0 fails=0 skips=0 line
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1 || true)
  if [[ $line =~ ([0-9]+)\ tests?\ failed\ out\ of\ ([0-9]+) ]]; then
    fails=${BASH_REMATCH[1]} total=${BASH_REMATCH[2]}
  fi
  skips=$(grep -cE '^[[:space:]]*[0-9]+ - .* \((Skipped|Disabled)\)$' "$log" || true)
  passed=$((passed + total - fails - skips)) failed=$((failed + fails)) skipped=$((skipped + skips))
  echo "== $name: $((total - fails - skips)) passed, $fails failed, $skips skipped"
  if ((skips)) && [[ ${CI:-} == true ]]; then
    echo "== $name: FAILED: $skips test(s) skipped in a tier that should run them all"
    return 1
  fi
}
# ctest_tier NAME BUILD ctest-args...: one ctest run over build/BUILD,
# counted; its exit code is ctest's, or 1 for a skip under CI=true.
ctest_tier() {
  local name=$1 build=$2 rc=0 log
  shift 2
  log=$logs/ctest-$build-$((++ctest_runs)).log
  # detect_leaks stays on: LeakSanitizer works as root on these machines.
  # ThreadSanitizer fails a test at its first report (docs/reliability.md).
  ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp \
    ctest --test-dir "build/$build" --output-on-failure "$@" >"$log" 2>&1 || rc=$?
  cat "$log"
  count_tests "$name" "$log" || rc=1
  return $rc
}
ctest_runs=0
unit_and_integration() {  # release|asan|tsan
  local t0=$SECONDS rc=0
  echo "== testing ($1)"
  # The control-plane tests run in their own tier below; tests labelled
  # manual need a set-up the test command does not make (their file says);
  # the fuzz targets' runs are the fuzz regression gate's.
  ctest_tier "unit and integration ($1)" "$1" -j "$jobs" -LE 'controlplane|manual|fuzz' \
    --no-tests=error || rc=$?
  took "unit and integration tests ($1)" $((SECONDS - t0))
  return $rc
}

# The fuzz targets of fuzz/ (docs/reliability.md, "Fuzzing"), built by the
# ASan build with the tests: each target's ctest test runs its committed
# corpus once and fuzzes for ALLOCGUARD_FUZZ_SECONDS (fuzz/CMakeLists.txt).
# A crash fails the run and names the saved reproducer. Each target counts
# as one test.
fuzz_regression() {
  local t0=$SECONDS rc=0
  echo "== fuzz regression: each target's corpus, then a short run"
  ctest_tier "fuzz regression" asan -L fuzz -j "$jobs" --no-tests=error || rc=$?
  took "fuzz regression (corpus + short runs)" $((SECONDS - t0))
  return $rc
}

status=$format_failed  # the layout check above
# First what the node tier needs of the release tree: the operator binary
# (whose objects the image's build stage then finds in the compiler cache,
# and which e2e/run.sh also runs as the gate from outside the cluster) and the
# demo workload. The node tier can then start while the tests compile.
build release allocguard ratchet_service

# --- 2. the node tier, in the background -------------------------------------------
# e2e/run.sh starts a node (containerd, kubelet, scheduler, controller-manager),
# builds the images from the Dockerfile with buildah, installs the chart with
# helm and runs the governed workload through hold, canary, switch, the guard's
# actions, libc and uninstall, printing how long each stage took
# (docs/e2e.md). It starts at normal priority, before this script lowers its
# own, once the cluster binaries and the images of step 1 are there; a failed
# image build is left to e2e/run.sh, which builds them again and fails with
# the build's own message. Its output is shown when it ends.
node_tier_run() {
  finished binaries || { echo "== node tier not run: the cluster binaries did not build"; return 1; }
  finished images || echo "== the background image build failed; e2e/run.sh builds the images itself"
  exec env -u ALLOCGUARD_CLUSTER_DIR e2e/run.sh
}
if ((node_tier)); then
  echo "== node tier: e2e/run.sh in the background once its binaries and images are there (log: $logs/e2e.log)"
  background e2e node_tier_run
fi

build release

# clang-tidy (.clang-tidy) over the sources that differ from the commit at
# which the whole tree was last checked clean (scripts/clang-tidy-baseline)
# and those including a header that differs; every source when .clang-tidy
# itself changed. In the background at nice 10 beside the release tests, with
# the release build's compile database and dependency log; results are
# cached by content (docs/reliability.md, "Static analysis"). Counted as one
# test.
tidy_base=$(grep -v '^#' scripts/clang-tidy-baseline | head -1)
echo "== clang-tidy: in the background, the sources changed since ${tidy_base:0:12} (log: $logs/tidy.log)"
background tidy nice -n 10 scripts/clang_tidy_cached.py --build build/release -j "$jobs" \
  --changed-since "$tidy_base"

unit_and_integration release || status=1

# --- 3. at a lower priority: the sanitizer build and tests, the control plane ----
renice -n 10 -p $$ >/dev/null

# The control-plane tier, in the background beside the sanitizer builds (its
# tests wait on the API server more than they compute): a real etcd +
# kube-apiserver on loopback (e2e/cluster/up.sh, free ports, so it runs beside
# the node tier's cluster) once the cluster binaries are built; the tests
# labelled "controlplane" of the release tree at once, those of the sanitizer
# tree once its own tests and the fuzz gate are done with build/asan. The
# tests read the cluster's kubeconfig and etcd URL from the environment.
controlplane_run() {
  local build t0 rc=0
  finished binaries || { echo "== control plane not run: the cluster binaries did not build"; return 1; }
  echo "== control plane: etcd + kube-apiserver"
  # A directory of its own, so that concurrent runs do not stop each other's
  # cluster; cleanup (above) stops it if this job is stopped.
  mktemp -d /tmp/allocguard-cluster-test.XXXXXX >"$logs/controlplane.dir"
  local dir
  dir=$(cat "$logs/controlplane.dir")
  if ! ALLOCGUARD_CLUSTER_DIR=$dir e2e/cluster/up.sh; then
    ALLOCGUARD_CLUSTER_DIR=$dir e2e/cluster/down.sh || true
    return 1
  fi
  for build in release asan; do
    if [[ $build == asan ]]; then
      finished asan-tested || { echo "== control plane (asan) not run: the sanitizer tree did not build"; rc=1; continue; }
    fi
    echo "== testing control plane ($build)"
    t0=$SECONDS
    (
      set -a
      source "$dir/env"
      set +a
      ctest_tier "control plane ($build)" "$build" -L controlplane --no-tests=error
    ) >"$logs/controlplane-$build.out" || rc=1
    echo $((SECONDS - t0)) >"$logs/controlplane-$build.secs"
    cat "$logs/controlplane-$build.out"
  done
  ALLOCGUARD_CLUSTER_DIR=$dir e2e/cluster/down.sh
  rm -f "$logs/controlplane.dir"
  return $rc
}
echo "== control plane: its tier in the background, beside the sanitizer builds (log: $logs/controlplane.log)"
background controlplane controlplane_run

build asan
unit_and_integration asan || status=1
fuzz_regression || status=1
echo 0 >"$logs/asan-tested.rc"  # build/asan is the control-plane tier's now
build tsan
unit_and_integration tsan || status=1
{ ccache --show-stats | grep -E '^ *(Hits|Misses):' | sed 's/^ */== compiler cache: /'; } || true

echo "== cluster binaries: waiting for the background build"
if finished binaries; then
  tail -3 "$logs/binaries.log"
  took "cluster binaries (background, from the start)" "$(cat "$logs/binaries.secs")"
else
  cat "$logs/binaries.log"
  echo "== cluster binaries: the build FAILED; the control-plane and node tiers cannot run"
  status=1
fi
if ((node_tier)); then
  finished images || true
  grep -E 'built|ready' "$logs/images.log" | sed 's/^/== node-tier images: /' || true
  took "node-tier images (background, from the start)" "$(cat "$logs/images.secs")"
fi

echo "== clang-tidy: waiting for it"
tidy_passed=0 tidy_failed=0
if finished tidy; then
  tidy_passed=1
else
  tidy_failed=1 status=1
fi
cat "$logs/tidy.log"
echo "== clang-tidy: $tidy_passed passed, $tidy_failed failed, 0 skipped"
passed=$((passed + tidy_passed)) failed=$((failed + tidy_failed))
took "clang-tidy (background, after the release build)" "$(cat "$logs/tidy.secs")"

# The control-plane tier's results, once its background job (above) ended.
echo "== control plane: waiting for its tier"
finished controlplane || status=1
cat "$logs/controlplane.log"
for build in release asan; do
  [[ -f $logs/controlplane-$build.out ]] || continue
  # The background job's counts are lost with it: count again from its output.
  count_tests "control plane ($build)" "$logs/controlplane-$build.out" >/dev/null || true
  took "control-plane tier ($build)" "$(cat "$logs/controlplane-$build.secs")"
done

if ((node_tier)); then
  echo "== node tier: waiting for e2e/run.sh"
  node_status=0
  finished e2e || node_status=$?
  cat "$logs/e2e.log"
  echo "== node tier finished (exit $node_status)"
  took "node tier (background, from the operator's build; includes waiting for step 1)" \
    "$(cat "$logs/e2e.secs")"
  while read -r secs name; do
    [[ -n $name ]] && took "  e2e: $name" "$secs"
  done < <(sed -n '/^== e2e summary/,$ s/^ *\([0-9][0-9]*\) s  \(.*\)$/\1 \2/p' "$logs/e2e.log")
  ((node_status == 0)) || status=1
fi
rm -rf "$logs"
echo "== step times (background steps ran beside the others)"
printf '%s\n' "${times[@]}" | while IFS=$'\t' read -r secs name; do
  printf '%7d s  %s\n' "$secs" "$name"
done
echo "== scripts/test.sh finished in $((SECONDS - start)) s (exit $status)"
# The closing line: every ctest run above, the layout check and clang-tidy,
# the node tier's stages aside.
echo "tests: $passed passed, $failed failed, $skipped skipped"
exit $status
