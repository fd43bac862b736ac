#!/usr/bin/env bash
# Builds the stats agent (liballocguard_stats.so) the way the injected
# allocators are built, for one libc, and writes its manifest. Runs where the
# allocators are compiled: in the Dockerfile's allocator stages (after
# build-in-image.sh, in a layer of its own, so a change to the agent rebuilds
# only the agent) and in allocators/build.sh's chroots.
#
#   build-agent.sh build glibc|musl OUT
#       OUT/liballocguard_stats.so, stripped, and OUT/liballocguard_stats.toolchain
#       (the compiler and libc, a line each, as build-in-chroot.sh writes them)
#   build-agent.sh manifest LIBRARY LIBC SUITE TOOLCHAIN
#       LIBRARY.json beside it (elf_manifest.py, found beside this directory)
#   build-agent.sh install glibc|musl OUT
#       both, for the Dockerfile's allocator stages: OUT/liballocguard_stats.so
#       and its manifest, the suite read from /etc/os-release
#
# glibc: gcc against the build suite's glibc (Debian 11's 2.31), so the
# agent loads on that glibc and every newer one; it looks up mallinfo2 at
# run time, so it links against no symbol newer than the allocators'. musl:
# musl-gcc. Plain C, no C++ runtime: NEEDED is libc (with libdl and
# libpthread on glibc). Debian's compiler flags (dpkg-buildflags) as for the
# allocators, stripped as dh_strip does.
#
# The manifest names the agent as allocator "stats-agent", source package
# "allocguard" and, as its version, the books format it writes
# (AG_BOOKS_VERSION in allocator_books.h): what a reader of the books must
# understand. allocators/write-manifest.sh maps the allocators; this script
# maps the agent, so the allocator stages' cached layers stay valid when the
# agent changes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
log() { echo "build-agent.sh: $*" >&2; }

build() {  # libc out
  local libc=$1 out=$2 cc lib
  case $libc in
    glibc) cc=gcc ;;
    musl) cc=musl-gcc ;;
    *) log "unknown libc $libc"; exit 2 ;;
  esac
  mkdir -p "$out"
  lib=$out/liballocguard_stats.so
  # -ldl and -pthread: on glibc < 2.34 dladdr, dlsym and pthread_create live
  # in libdl and libpthread; musl keeps them in libc.so and ignores both.
  # shellcheck disable=SC2046  # dpkg-buildflags prints several flags
  "$cc" $(dpkg-buildflags --get CFLAGS) $(dpkg-buildflags --get CPPFLAGS) \
    -std=gnu11 -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden -pthread \
    $(dpkg-buildflags --get LDFLAGS) -Wl,--no-undefined -Wl,-soname,liballocguard_stats.so \
    "$here/stats_agent.c" -ldl -o "$lib"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$lib"
  {
    echo "compiler: $($cc --version | head -n1)"
    if [[ $libc == glibc ]]; then
      echo "libc: glibc $(dpkg-query -W -f='${Version}' libc6)"
    else
      echo "libc: musl $(dpkg-query -W -f='${Version}' musl-dev)"
    fi
  } >"$out/liballocguard_stats.toolchain"
  log "built $lib for $libc"
}

manifest() {  # library libc suite toolchain
  local version
  version=$(sed -n 's/^#define AG_BOOKS_VERSION \([0-9]*\)u.*/\1/p' "$here/allocator_books.h")
  [[ -n $version ]] || { log "no AG_BOOKS_VERSION in $here/allocator_books.h"; exit 1; }
  # Written to a temporary file first: a failed run leaves no partial manifest.
  python3 "$here/../elf_manifest.py" "$1" --allocator stats-agent --libc "$2" \
    --source-package allocguard --source-version "books-format-$version" --built-in "$3" \
    --toolchain "$4" >"$1.json.tmp"
  mv "$1.json.tmp" "$1.json"
}

install() {  # libc out
  local work suite
  work=$(mktemp -d /tmp/stats-agent.XXXXXX)
  build "$1" "$work"
  suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  mkdir -p "$2"
  cp "$work/liballocguard_stats.so" "$2/"
  manifest "$2/liballocguard_stats.so" "$1" "$suite" "$(paste -sd ';' "$work/liballocguard_stats.toolchain")"
  rm -rf "$work"
}

case ${1:-} in
  build) (($# == 3)) || { log "usage: build-agent.sh build glibc|musl OUT"; exit 2; }; build "$2" "$3" ;;
  manifest) (($# == 5)) || { log "usage: build-agent.sh manifest LIBRARY LIBC SUITE TOOLCHAIN"; exit 2; }; manifest "$2" "$3" "$4" "$5" ;;
  install) (($# == 3)) || { log "usage: build-agent.sh install glibc|musl OUT"; exit 2; }; install "$2" "$3" ;;
  *) log "usage: build-agent.sh build glibc|musl OUT | manifest LIBRARY LIBC SUITE TOOLCHAIN | install glibc|musl OUT"; exit 2 ;;
esac
