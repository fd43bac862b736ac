#!/usr/bin/env bash
# Installs the Debian packages allocguard builds, tests and demos with.
# Safe to run again: apt-get skips what is already installed.
#
#   scripts/install-deps.sh          # build, unit and control-plane tests
#   scripts/install-deps.sh --node   # also the node tier (e2e/cluster/up.sh --with-node
#                                    # runs this itself when something is missing)
#   scripts/install-deps.sh --demo   # only what scripts/demo.sh builds and runs
set -euo pipefail

# The demo (scripts/demo.sh) builds `allocguard` and the demo workload with the
# tests switched off and preloads jemalloc: a compiler, CMake, the libraries
# the code includes (GoogleTest too: the tree declares its test binaries even
# when none is built) and Debian's jemalloc. On a fresh machine the full list
# below adds clang, its sanitizer runtimes, clang-tidy, Chromium and the rest
# of the test tools, most of the download (docs/e2e.md, "Clone to first
# verdict").
demo_packages=(
  build-essential cmake ninja-build pkg-config ccache
  libcpp-httplib-dev nlohmann-json3-dev libssl-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libyaml-cpp-dev libcli11-dev
  libjemalloc2
)

packages=(
  build-essential cmake ninja-build pkg-config clang-format ccache
  libcpp-httplib-dev nlohmann-json3-dev libssl-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libyaml-cpp-dev libcli11-dev
  # scripts/lint.sh: clang-tidy's checks (.clang-tidy); clang-format is above.
  clang-tidy
  # The sanitizer builds (ASan + UBSan with the fuzz targets of fuzz/, and
  # ThreadSanitizer): clang and its libFuzzer and sanitizer runtimes (only
  # recommended by clang, so named here).
  clang libclang-rt-14-dev
  # The allocators the replay engine preloads.
  libjemalloc2 libmimalloc2.0 libtcmalloc-minimal4
  # musl-gcc: the loader test of the libc "auto" preload path builds musl programs.
  musl-tools
  # wrk is the reference load generator for the load driver's benchmark.
  wrk
  # The control-plane tier (e2e/cluster): certificates, health checks, free ports.
  openssl curl ca-certificates python3
  # The Argo CD health checks in docs/argocd/ are Lua; their test runs them.
  lua5.4
  # The replay report's test loads it in a real headless browser.
  chromium
)

# The node tier (e2e/cluster/up.sh --with-node, e2e/images/): containerd and
# runc run the pods, the CNI plugins give them a bridge, kube-proxy programs
# Services with iptables, buildah and debootstrap build images without Docker
# or a registry.
node_packages=(containerd runc containernetworking-plugins iptables buildah debootstrap)
demo=0
if [[ ${1:-} == --node ]]; then
  packages+=("${node_packages[@]}")
elif [[ ${1:-} == --demo ]]; then
  packages=("${demo_packages[@]}")
  demo=1
elif (($#)); then
  echo "install-deps.sh: unknown argument $1" >&2
  exit 2
fi

missing=()
for p in "${packages[@]}"; do
  [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# promtool, which checks and unit-tests the chart's alerting rules
# (charts/tests/prometheus_rules_test.py), from Debian's prometheus package.
# Only the one binary is taken out of the .deb: installing the package would
# also install and start a Prometheus server. Cached outside the repository,
# keyed by the package version; linked as /usr/local/bin/promtool.
((demo)) && exit 0

cache=${ALLOCGUARD_CACHE:-/var/cache/allocguard}
if ! command -v promtool >/dev/null; then
  version=$(apt-cache policy prometheus 2>/dev/null | sed -n 's/^ *Candidate: //p')
  if [[ -z $version || $version == "(none)" ]]; then
    apt-get update -qq
    version=$(apt-cache policy prometheus | sed -n 's/^ *Candidate: //p')
  fi
  dir=$cache/promtool-${version//[^A-Za-z0-9.+-]/_}
  if [[ ! -x $dir/promtool ]]; then
    echo "fetching promtool from Debian's prometheus $version"
    work=$(mktemp -d)
    chmod 755 "$work"  # apt-get download drops its rights to the _apt user
    (cd "$work" && apt-get download -qq "prometheus=$version" >/dev/null)
    dpkg-deb --fsys-tarfile "$work"/prometheus_*.deb | tar -x -C "$work" ./usr/bin/promtool
    mkdir -p "$dir"
    mv "$work/usr/bin/promtool" "$dir/promtool"
    rm -rf "$work"
  fi
  ln -sf "$dir/promtool" /usr/local/bin/promtool
fi
