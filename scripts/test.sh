#!/usr/bin/env bash
# Runs every allocguard test on this machine: installs what is missing, builds
# twice (release, and AddressSanitizer + UndefinedBehaviorSanitizer), and runs
# the whole ctest suite under both builds. Tests labelled "integration" start
# real processes under real memory cgroups with the real Debian allocators.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh

jobs=$(nproc)
# The compiler cache lives outside the repository (CI builds in a fresh clone
# every time) and is keyed by content, not by path: paths below the clone are
# hashed relative to it and the working directory is not hashed. The image
# build (e2e/images/allocguard.sh) shares it.
export CCACHE_DIR=${CCACHE_DIR:-/var/cache/allocguard/ccache}
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
mkdir -p "$CCACHE_DIR"
ccache --max-size 8G >/dev/null
ccache --zero-stats >/dev/null
for build in release asan; do
  dir=build/$build
  if [[ $build == asan ]]; then
    flags=(-DALLOCGUARD_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug)
  else
    flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
  fi
  echo "== building ($build)"
  cmake -S . -B "$dir" -G Ninja "${flags[@]}" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache >/dev/null
  build_start=$SECONDS
  # ccache hashes the locale variables (they change the compiler's messages);
  # the Dockerfile's build stage sets the same ones, so it gets these objects.
  env -u LC_CTYPE -u LC_MESSAGES LANG=C.UTF-8 LC_ALL=C.UTF-8 cmake --build "$dir" -j "$jobs"
  echo "== built ($build) in $((SECONDS - build_start)) s"
done
{ ccache --show-stats | grep -E '^ *(Hits|Misses):' | sed 's/^ */== compiler cache: /'; } || true

status=0
for build in release asan; do
  echo "== testing ($build)"
  # detect_leaks stays on: LeakSanitizer works as root on these machines.
  ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "build/$build" --output-on-failure -j "$jobs" || status=1
done
# --- control-plane tier (operator/kube) ---
# A real etcd + kube-apiserver on loopback (e2e/cluster/up.sh), built from the
# Go module proxy on first use and cached by version in /var/cache/allocguard
# (the first build takes about 13 minutes on 2 cores). The tests labelled
# "controlplane" read the cluster's kubeconfig and etcd URL from the
# environment; without them (the loop above) they are reported as not run.
echo "== control plane: etcd + kube-apiserver"
cluster_start=$SECONDS
e2e/cluster/build.sh etcd kube-apiserver kubectl helm
echo "== control-plane binaries ready in $((SECONDS - cluster_start)) s"
# A directory of its own, so that concurrent runs do not stop each other's cluster.
export ALLOCGUARD_CLUSTER_DIR=${ALLOCGUARD_CLUSTER_DIR:-$(mktemp -d /tmp/allocguard-cluster-test.XXXXXX)}
trap 'e2e/cluster/down.sh >/dev/null' EXIT
if e2e/cluster/up.sh; then
  for build in release asan; do
    echo "== testing control plane ($build)"
    (
      source "$ALLOCGUARD_CLUSTER_DIR/env"
      ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
        ctest --test-dir "build/$build" -L controlplane --output-on-failure --no-tests=error
    ) || status=1
  done
else
  status=1
fi
e2e/cluster/down.sh
trap - EXIT
# --- end of control-plane tier ---

# --- node tier: the whole product on a real single-node cluster ---
# e2e/run.sh starts a node (containerd, kubelet, scheduler, controller-manager),
# builds the images from the Dockerfile with buildah, installs the chart with
# helm and runs the governed workload through hold, canary, switch and
# uninstall. It prints how long each stage took. Set ALLOCGUARD_SKIP_NODE_TIER=1
# to leave it out of a local run.
if [[ -z ${ALLOCGUARD_SKIP_NODE_TIER:-} ]]; then
  echo "== node tier: e2e/run.sh"
  node_start=$SECONDS
  e2e/run.sh || status=1
  echo "== node tier finished in $((SECONDS - node_start)) s"
fi
exit $status
