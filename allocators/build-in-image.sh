#!/usr/bin/env bash
# Runs INSIDE the Dockerfile's allocator stages (allocators-glibc FROM
# debian:bullseye-slim, allocators-musl FROM debian:bookworm-slim): the image
# build's counterpart of allocators/build.sh, with the container in place of
# the debootstrap chroot. Compiles with the same build-in-chroot.sh and writes
# the same manifests (write-manifest.sh), so the image ships what build.sh
# builds on a host.
#
#   build-in-image.sh glibc|musl OUT
#
# OUT receives the libraries and a <library>.json manifest beside each. The
# stage's Debian suite must be the one versions.sh names for LIBC
# (GLIBC_BUILD_SUITE, MUSL_BUILD_SUITE). The source packages come from a
# deb-src line for $SOURCE_SUITE on the mirror the image's own apt sources use
# (deb822 .sources or one-line sources.list): the machine's mirror for a base
# image made by e2e/images/base.sh, deb.debian.org for the official images.
# Timings go to stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/versions.sh"
(($# == 2)) || { echo "usage: build-in-image.sh glibc|musl OUT" >&2; exit 2; }
libc=$1 out=$2
log() { echo "build-in-image($libc): $*" >&2; }

case $libc in
  glibc) want_suite=$GLIBC_BUILD_SUITE ;;
  musl) want_suite=$MUSL_BUILD_SUITE ;;
  *) log "unknown libc $libc"; exit 2 ;;
esac
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
if [[ $suite != "$want_suite" ]]; then
  log "this stage runs Debian '$suite', allocators/versions.sh builds $libc in '$want_suite'; change the stage's FROM to match"
  exit 1
fi

# The first Debian archive URI of the image's apt sources (not
# debian-security), in either format.
mirror=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) { print $i; exit } }' \
  /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
[[ $mirror ]] || mirror=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\/.*\/debian\/?$/) { print $i; exit } }' \
  /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
[[ $mirror ]] || { log "no Debian archive in the image's apt sources"; exit 1; }
echo "deb-src $mirror $SOURCE_SUITE main" >/etc/apt/sources.list.d/allocguard-src.list
log "sources: deb-src $mirror $SOURCE_SUITE main"
apt-get update -qq >/dev/null

work=$(mktemp -d /tmp/allocators.XXXXXX)
t0=$SECONDS
GLIBC_COMPAT_H=$here/glibc_compat.h "$here/build-in-chroot.sh" "$libc" "$work" "$work/out" \
  "$JEMALLOC_SOURCE_VERSION" "$MIMALLOC_SOURCE_VERSION" "$GPERFTOOLS_SOURCE_VERSION"
mkdir -p "$out"
toolchain=$(paste -sd ';' "$work/out/toolchain.txt")
for lib in "$work/out/"*.so*; do
  cp "$lib" "$out/"
  "$here/write-manifest.sh" "$out/$(basename "$lib")" "$libc" "$suite" "$toolchain"
done
sed "s/^/build-in-image($libc): /; s/\$/ s/" "$work/out/timings.txt" >&2
log "built in $((SECONDS - t0)) s: $(cd "$out" && echo *)"
rm -rf "$work" /etc/apt/sources.list.d/allocguard-src.list
