#!/usr/bin/env bash
# Builds the peers program (bench/peers/, Go, controller-runtime from the Go
# module proxy) into a cache outside the repository, keyed by the hash of its
# go.mod, go.sum and sources, and prints the binary's path. A second call with
# the same sources builds nothing.
#
#   bench/peers/build.sh     # -> /var/cache/allocguard/peers/<hash>/peers
#
# ALLOCGUARD_PEERS_CACHE moves the cache; GO names the go binary
# (default /usr/local/go/bin/go, else the one on PATH).
set -euo pipefail
src=$(cd "$(dirname "$0")" && pwd)
go=${GO:-/usr/local/go/bin/go}
[[ -x $go ]] || go=$(command -v go)
cache=${ALLOCGUARD_PEERS_CACHE:-/var/cache/allocguard/peers}
hash=$(cd "$src" && cat go.mod go.sum $(ls ./*.go | LC_ALL=C sort) | sha256sum | cut -c1-16)
binary=$cache/$hash/peers
if [[ ! -x $binary ]]; then
  mkdir -p "$cache/$hash"
  echo "building the peers into $binary ($($go version))" >&2
  (cd "$src" && nice -n 19 "$go" build -trimpath -buildvcs=false -gcflags=all=-dwarf=false \
    -o "$binary.tmp.$$" .)
  mv "$binary.tmp.$$" "$binary"
fi
echo "$binary"
