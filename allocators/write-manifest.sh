#!/usr/bin/env bash
# Writes LIBRARY.json, the manifest of one allocator library, beside it. The
# single place that maps a library file to its allocator and pinned source
# package (versions.sh); allocators/build.sh and the image's allocator stages
# (allocators/build-in-image.sh) both call it, so their manifests agree.
#
#   write-manifest.sh LIBRARY LIBC SUITE TOOLCHAIN
#
# LIBC is glibc or musl, SUITE the Debian suite it was built in (or
# "<suite> (Debian package)"), TOOLCHAIN the build's toolchain.txt lines
# joined with ';' (may be empty). Needs python3 and binutils.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/versions.sh"

(($# == 4)) || { echo "usage: write-manifest.sh LIBRARY LIBC SUITE TOOLCHAIN" >&2; exit 2; }
lib=$1
case $(basename "$lib") in
  libjemalloc*) allocator=jemalloc pkg=jemalloc version=$JEMALLOC_SOURCE_VERSION ;;
  libmimalloc*) allocator=mimalloc pkg=mimalloc version=$MIMALLOC_SOURCE_VERSION ;;
  libtcmalloc_minimal*) allocator=tcmalloc pkg=google-perftools version=$GPERFTOOLS_SOURCE_VERSION ;;
  *) echo "write-manifest.sh: unexpected library $lib" >&2; exit 1 ;;
esac
# Written to a temporary file first: a failed run leaves no partial manifest.
python3 "$here/elf_manifest.py" "$lib" --allocator "$allocator" --libc "$2" \
  --source-package "$pkg" --source-version "$version" --built-in "$3" \
  --toolchain "$4" >"$lib.json.tmp"
mv "$lib.json.tmp" "$lib.json"
