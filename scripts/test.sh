#!/usr/bin/env bash
# Runs every allocguard test on this machine: installs what is missing, builds
# twice (release, and AddressSanitizer + UndefinedBehaviorSanitizer), runs the
# whole ctest suite under both builds, the control-plane tier against a real
# etcd + kube-apiserver, and the node tier: the whole product on a real
# single-node cluster (e2e/run.sh). Tests labelled "integration" start real
# processes under real memory cgroups with the real Debian allocators.
#
# The work is laid out so that the two cores stay busy on a fresh machine
# (docs/e2e.md has the timings):
#
#   1. the Kubernetes, etcd and Helm binaries build in the background (Go,
#      cached by version in /var/cache/allocguard) while the release build and
#      its tests run;
#   2. then the node tier runs in the background — mostly waiting on its
#      canaries — while the sanitizer build, its tests and the control-plane
#      tier run beside it at a lower priority.
#
# ALLOCGUARD_SKIP_NODE_TIER=1 leaves the node tier out of a local run.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS

./scripts/install-deps.sh

jobs=$(nproc)
logs=$(mktemp -d /tmp/allocguard-test.XXXXXX)
node_tier=1
[[ -n ${ALLOCGUARD_SKIP_NODE_TIER:-} ]] && node_tier=0
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
  if [[ -n $controlplane_dir ]]; then
    ALLOCGUARD_CLUSTER_DIR=$controlplane_dir e2e/cluster/down.sh >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

# --- cluster binaries, in the background ---------------------------------------
# First run on a machine: about half an hour of Go builds from the module
# proxy; later runs find them cached and this returns at once.
binaries=(etcd kube-apiserver kubectl helm)
((node_tier)) && binaries+=(kube-controller-manager kube-scheduler kubelet kube-proxy)
echo "== cluster binaries: building what is not cached, in the background (log: $logs/binaries.log)"
e2e/cluster/build.sh "${binaries[@]}" >"$logs/binaries.log" 2>&1 &
binaries_pid=$!
binaries_start=$SECONDS

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
build() {  # release|asan
  local build=$1 dir=build/$1 build_start=$SECONDS flags
  if [[ $build == asan ]]; then
    flags=(-DALLOCGUARD_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug)
  else
    flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
  fi
  echo "== building ($build)"
  cmake -S . -B "$dir" -G Ninja "${flags[@]}" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache >/dev/null
  # ccache hashes the locale variables (they change the compiler's messages);
  # the Dockerfile's build stage sets the same ones, so it gets these objects.
  env -u LC_CTYPE -u LC_MESSAGES LANG=C.UTF-8 LC_ALL=C.UTF-8 cmake --build "$dir" -j "$jobs"
  echo "== built ($build) in $((SECONDS - build_start)) s"
}
unit_and_integration() {  # release|asan
  echo "== testing ($1)"
  # detect_leaks stays on: LeakSanitizer works as root on these machines.
  ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "build/$1" --output-on-failure -j "$jobs"
}

status=0
build release
unit_and_integration release || status=1

echo "== cluster binaries: waiting for the background build"
if wait "$binaries_pid"; then
  tail -3 "$logs/binaries.log"
  echo "== cluster binaries ready $((SECONDS - binaries_start)) s after they started"
  binaries_ok=1
else
  cat "$logs/binaries.log"
  echo "== cluster binaries: the build FAILED; the control-plane and node tiers cannot run"
  binaries_ok=0
  status=1
fi

# --- node tier, in the background ----------------------------------------------
# e2e/run.sh starts a node (containerd, kubelet, scheduler, controller-manager),
# builds the images from the Dockerfile with buildah, installs the chart with
# helm and runs the governed workload through hold, canary, switch, the guard's
# actions and uninstall, printing how long each stage took (docs/e2e.md). Its
# output is shown when it ends.
node_pid=""
if ((node_tier && binaries_ok)); then
  echo "== node tier: e2e/run.sh, in the background (log: $logs/e2e.log)"
  node_start=$SECONDS
  env -u ALLOCGUARD_CLUSTER_DIR e2e/run.sh >"$logs/e2e.log" 2>&1 &
  node_pid=$!
fi

# --- beside it, at a lower priority: the sanitizer build and tests, and the
# control-plane tier --------------------------------------------------------------
# The node tier's pods and its canaries keep the CPU they need; this work
# takes what they leave.
renice -n 10 -p $$ >/dev/null
build asan
unit_and_integration asan || status=1
{ ccache --show-stats | grep -E '^ *(Hits|Misses):' | sed 's/^ */== compiler cache: /'; } || true

# A real etcd + kube-apiserver on loopback (e2e/cluster/up.sh, free ports, so
# it runs beside the node tier's cluster). The tests labelled "controlplane"
# read the cluster's kubeconfig and etcd URL from the environment; without
# them (the runs above) they are reported as not run.
if ((binaries_ok)); then
  echo "== control plane: etcd + kube-apiserver"
  # A directory of its own, so that concurrent runs do not stop each other's cluster.
  controlplane_dir=$(mktemp -d /tmp/allocguard-cluster-test.XXXXXX)
  if ALLOCGUARD_CLUSTER_DIR=$controlplane_dir e2e/cluster/up.sh; then
    for build in release asan; do
      echo "== testing control plane ($build)"
      (
        source "$controlplane_dir/env"
        ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
          ctest --test-dir "build/$build" -L controlplane --output-on-failure --no-tests=error
      ) || status=1
    done
  else
    status=1
  fi
  ALLOCGUARD_CLUSTER_DIR=$controlplane_dir e2e/cluster/down.sh
  controlplane_dir=""
fi

if [[ -n $node_pid ]]; then
  echo "== node tier: waiting for e2e/run.sh"
  node_status=0
  wait "$node_pid" || node_status=$?
  cat "$logs/e2e.log"
  echo "== node tier finished in $((SECONDS - node_start)) s (exit $node_status)"
  ((node_status == 0)) || status=1
fi
rm -rf "$logs"
echo "== scripts/test.sh finished in $((SECONDS - start)) s (exit $status)"
exit $status
