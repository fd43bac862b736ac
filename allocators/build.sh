#!/usr/bin/env bash
# Builds the allocator libraries allocguard injects, for every libc its users
# run, from Debian's own source packages:
#
#   glibc  jemalloc, mimalloc, tcmalloc_minimal (gperftools), compiled in a
#          debootstrap chroot of the oldest Debian the mirror serves
#          ($GLIBC_BUILD_SUITE, versions.sh), so they load on that glibc and
#          every newer one; no libstdc++ dependency.
#   musl   jemalloc and mimalloc, compiled with Debian's musl toolchain
#          (musl-gcc from musl-tools, in a $MUSL_BUILD_SUITE chroot). No
#          tcmalloc: it is C++, and Debian ships no C++ standard library for
#          musl (musl-tools wraps gcc only; there is no musl g++).
# and, in the same chroots, the stats agent liballocguard_stats.so for both
# (allocators/stats_agent/build-agent.sh, as the image's allocator stages
# build it). The agent is rebuilt whenever its sources change (their digest
# is kept in <dir>/.stats-agent), without rebuilding the allocators.
#
#   allocators/build.sh          # build what is missing; prints the output dir
#
# Output, keyed by the suites, the source package versions and the build
# revision (versions.sh):
#   $ALLOCGUARD_CACHE/allocators/<key>/glibc/libjemalloc.so.2 (+ .json manifest)
#   $ALLOCGUARD_CACHE/allocators/<key>/musl/...
#   $ALLOCGUARD_CACHE/allocators/<key>/debian-<suite>/...  Debian's own binary
#       packages of the same sources, with manifests, for comparison
# A manifest records the library, allocator, libc, source package and
# version, the suite it was built in, its NEEDED libraries and, for glibc,
# the highest GLIBC_ symbol version it requires (read from the built file).
# A second run with the output present takes about a second. The build
# chroots stay in $ALLOCGUARD_CACHE/allocators/rootfs (the tests run
# processes in them). Progress and timings go to stderr.
#
# Needs root, debootstrap, binutils (readelf, objdump), python3, unshare.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/versions.sh"

while (($#)); do
  case $1 in
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

log() { echo "allocators/build.sh: $*" >&2; }
out=$(allocators_dir)
# The stats agent's sources, by content.
agent_digest=$(cat "$here/stats_agent/stats_agent.c" "$here/stats_agent/allocator_books.h" \
  "$here/stats_agent/build-agent.sh" | sha256sum | cut -c1-16)
agent_current() { [[ $(cat "$1/.stats-agent" 2>/dev/null) == "$agent_digest" ]]; }
if [[ -e $out/.complete ]] && agent_current "$out"; then
  echo "$out"
  exit 0
fi

[[ $(id -u) == 0 ]] || { log "needs root (debootstrap, chroot)"; exit 1; }
for tool in debootstrap readelf objdump python3 unshare flock; do
  command -v $tool >/dev/null || {
    log "$tool is missing (apt-get install debootstrap binutils python3 util-linux)"
    exit 1
  }
done
mkdir -p "$ALLOCATORS_CACHE/rootfs"
# One build at a time; a second run waits, then finds the output made.
exec 9>"$ALLOCATORS_CACHE/.build.lock"
flock 9
if [[ -e $out/.complete ]] && agent_current "$out"; then
  echo "$out"
  exit 0
fi

t_start=$SECONDS
timings=()
timed() {  # label command...
  local label=$1 t0=$SECONDS
  shift
  "$@"
  timings+=("$(printf '%-44s %5d s' "$label" $((SECONDS - t0)))")
}

# The apt mirror the machine itself uses (deb822 or one-line format), as
# e2e/images/base.sh finds it.
machine_mirror() {
  local m
  m=$(awk '/^URIs:/ && $2 ~ /\/debian\/?$/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [[ $m ]] || m=$(awk '$1 == "deb" && $2 ~ /\/debian\/?$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  echo "${m:-http://deb.debian.org/debian}"
}
mirror=$(machine_mirror)

# in_chroot ROOT COMMAND...: runs COMMAND in ROOT with /proc mounted, in a
# private mount namespace, so no mount outlives the command even if the
# build is killed.
in_chroot() {
  local root=$1
  shift
  unshare --mount --propagation private --fork -- \
    bash -c 'mount -t proc proc "$1/proc" && root=$1 && shift && exec chroot "$root" "$@"' \
    in_chroot "$root" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LC_ALL=C.UTF-8 "$@"
}

# ensure_rootfs SUITE PACKAGES: a debootstrap --variant=buildd chroot of
# SUITE with PACKAGES (comma-separated) and apt sources that include the
# source packages of $SOURCE_SUITE. Built once, kept.
ensure_rootfs() {
  local suite=$1 packages=$2 root tmp
  root=$(allocators_rootfs "$suite")
  [[ -e $root/.allocguard-ready ]] && return 0
  tmp=$root.tmp
  rm -rf "$tmp"
  log "debootstrap --variant=buildd $suite from $mirror (a few minutes)"
  if ! nice -n 19 debootstrap --variant=buildd --include="$packages" "$suite" "$tmp" "$mirror" \
    >"$ALLOCATORS_CACHE/rootfs/debootstrap-$suite.log" 2>&1; then
    tail -n 20 "$ALLOCATORS_CACHE/rootfs/debootstrap-$suite.log" >&2
    log "debootstrap $suite failed (log: $ALLOCATORS_CACHE/rootfs/debootstrap-$suite.log)"
    exit 1
  fi
  # The mirror serves deb-src indexes, so `apt-get source` inside the chroot
  # fetches the pinned source packages like any Debian developer would.
  cat >"$tmp/etc/apt/sources.list" <<SRC
deb $mirror $suite main
deb-src $mirror $SOURCE_SUITE main
SRC
  cp /etc/resolv.conf "$tmp/etc/resolv.conf"
  in_chroot "$tmp" apt-get update -qq >/dev/null
  in_chroot "$tmp" apt-get clean  # the .debs debootstrap left, about 200 MB
  mv "$tmp" "$root"
  touch "$root/.allocguard-ready"
}

# build_libc LIBC SUITE: runs build-in-chroot.sh in SUITE's chroot and copies
# the libraries to $tmp_out/LIBC with a manifest beside each.
build_libc() {
  local libc=$1 suite=$2 root work
  root=$(allocators_rootfs "$suite")
  work=/build/$(allocators_key)/$libc
  rm -rf "${root:?}$work"
  install -m 0755 "$here/build-in-chroot.sh" "$root/usr/local/bin/allocguard-build-allocators"
  install -D -m 0644 "$here/glibc_compat.h" "$root/usr/local/share/allocguard/glibc_compat.h"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  in_chroot "$root" apt-get update -qq >/dev/null
  in_chroot "$root" GLIBC_COMPAT_H=/usr/local/share/allocguard/glibc_compat.h \
    nice -n 19 allocguard-build-allocators "$libc" "$work" "$work/out" \
    "$JEMALLOC_SOURCE_VERSION" "$MIMALLOC_SOURCE_VERSION" "$GPERFTOOLS_SOURCE_VERSION"
  mkdir -p "$tmp_out/$libc"
  local lib
  for lib in "$root$work/out/"*.so*; do
    cp "$lib" "$tmp_out/$libc/"
    write_manifest "$tmp_out/$libc/$(basename "$lib")" "$libc" "$suite" \
      "$(paste -sd ';' "$root$work/out/toolchain.txt")"
  done
  sed "s/^/  $libc /" "$root$work/out/timings.txt" >&2
  rm -rf "${root:?}$work"
}

# build_agent LIBC SUITE DIR: the stats agent for LIBC, built in SUITE's
# chroot, with its manifest, into DIR/LIBC; then DIR/.stats-agent.
build_agent() {
  local libc=$1 suite=$2 dir=$3 root work
  root=$(allocators_rootfs "$suite")
  work=/build/stats-agent-$libc
  rm -rf "${root:?}$work" "$root/usr/local/share/allocguard/stats_agent"
  install -d "$root/usr/local/share/allocguard/stats_agent"
  install -m 0644 "$here/stats_agent/stats_agent.c" "$here/stats_agent/allocator_books.h" \
    "$root/usr/local/share/allocguard/stats_agent/"
  install -m 0755 "$here/stats_agent/build-agent.sh" "$root/usr/local/share/allocguard/stats_agent/"
  in_chroot "$root" nice -n 19 /usr/local/share/allocguard/stats_agent/build-agent.sh build "$libc" "$work"
  mkdir -p "$dir/$libc"
  cp "$root$work/liballocguard_stats.so" "$dir/$libc/"
  "$here/stats_agent/build-agent.sh" manifest "$dir/$libc/liballocguard_stats.so" "$libc" "$suite" \
    "$(paste -sd ';' "$root$work/liballocguard_stats.toolchain")"
  rm -rf "${root:?}$work"
}

# The allocators are there, the agent is not (or is older than its sources).
if [[ -e $out/.complete ]]; then
  t0=$SECONDS
  build_agent glibc "$GLIBC_BUILD_SUITE" "$out"
  build_agent musl "$MUSL_BUILD_SUITE" "$out"
  echo "$agent_digest" >"$out/.stats-agent"
  log "stats agent built in $((SECONDS - t0)) s"
  echo "$out"
  exit 0
fi

# write_manifest LIBRARY LIBC SUITE TOOLCHAIN: LIBRARY.json beside it
# (write-manifest.sh, which the image's allocator stages use too).
write_manifest() { "$here/write-manifest.sh" "$@"; }

# Debian's own binary packages of the same source versions, as shipped in
# $SOURCE_SUITE: what injecting the system libraries would require.
fetch_debian_binaries() {
  local root dir=/build/debian-binaries
  root=$(allocators_rootfs "$MUSL_BUILD_SUITE")
  rm -rf "${root:?}$dir"
  mkdir -p "$root$dir"
  in_chroot "$root" bash -c "cd $dir && apt-get download -qq -o APT::Sandbox::User=root \
    libjemalloc2=$JEMALLOC_SOURCE_VERSION libmimalloc2.0=$MIMALLOC_SOURCE_VERSION \
    libtcmalloc-minimal4=$GPERFTOOLS_SOURCE_VERSION && for d in *.deb; do dpkg-deb -x \$d x; done" >/dev/null
  local d=$tmp_out/debian-$SOURCE_SUITE lib
  mkdir -p "$d"
  for lib in libjemalloc.so.2 libmimalloc.so.2 libtcmalloc_minimal.so.4; do
    cp -L "$root$dir/x/usr/lib/x86_64-linux-gnu/$lib" "$d/$lib"
    write_manifest "$d/$lib" glibc "$SOURCE_SUITE (Debian package)" ""
  done
  rm -rf "${root:?}$dir"
}

tmp_out=$out.tmp
rm -rf "$tmp_out"
mkdir -p "$tmp_out"
timed "rootfs $GLIBC_BUILD_SUITE (debootstrap, first run only)" \
  ensure_rootfs "$GLIBC_BUILD_SUITE" cmake,autoconf,automake,libtool
timed "rootfs $MUSL_BUILD_SUITE (debootstrap, first run only)" \
  ensure_rootfs "$MUSL_BUILD_SUITE" cmake,musl-tools
timed "glibc builds in $GLIBC_BUILD_SUITE" build_libc glibc "$GLIBC_BUILD_SUITE"
timed "musl builds in $MUSL_BUILD_SUITE" build_libc musl "$MUSL_BUILD_SUITE"
timed "stats agent (glibc) in $GLIBC_BUILD_SUITE" build_agent glibc "$GLIBC_BUILD_SUITE" "$tmp_out"
timed "stats agent (musl) in $MUSL_BUILD_SUITE" build_agent musl "$MUSL_BUILD_SUITE" "$tmp_out"
echo "$agent_digest" >"$tmp_out/.stats-agent"
timed "Debian $SOURCE_SUITE binary packages" fetch_debian_binaries
touch "$tmp_out/.complete"
rm -rf "$out"
mv "$tmp_out" "$out"

log "built in $((SECONDS - t_start)) s:"
printf '  %s\n' "${timings[@]}" >&2
python3 "$here/compat_table.py" --summary "$out" >&2
echo "$out"
