#!/usr/bin/env bash
# Builds the libc demonstration images (e2e/images/libc-demo.Containerfile)
# with buildah, no Docker engine or registry, and, when a node cluster runs,
# imports them into its containerd:
#
#   localhost/libc-demo:debian11   glibc 2.31, dynamic (Debian 11's gcc)
#   localhost/libc-demo:debian12   glibc 2.36, dynamic (Debian 12's gcc)
#   localhost/libc-demo:musl       musl, dynamic, FROM scratch
#   localhost/libc-demo:static     static (glibc), FROM scratch
#
#   e2e/images/libc-demo.sh [--no-import]
#
# The program is e2e/workloads/libc_demo.c (GET /allocator says which
# allocator serves malloc). Builds start from the base images of
# e2e/images/base.sh (bookworm and bullseye) and keep layers (--layers):
# a rebuild with libc_demo.c unchanged takes seconds. Prints the time each
# step took; the image names go to stdout. Builds run under nice -n 19, or
# the nice level in ALLOCGUARD_BUILD_NICE (as e2e/images/allocguard.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

import=1
while (($#)); do
  case $1 in
    --no-import) import=0; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "libc-demo.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

step() { echo "libc-demo.sh: $*" >&2; }
t0=$SECONDS
"$here/base.sh" --suite bookworm --suite bullseye >/dev/null
step "base images ready in $((SECONDS - t0)) s"

images=()
for variant in debian11 debian12 musl static; do
  image=localhost/libc-demo:$variant
  start=$SECONDS
  log=$(mktemp /tmp/libc-demo-bud.XXXXXX.log)
  if ! nice -n "${ALLOCGUARD_BUILD_NICE:-19}" buildah bud --pull=never --isolation=chroot --network=host --layers \
    -f "$here/libc-demo.Containerfile" --target "$variant" -t "$image" \
    "$root/e2e/workloads" >"$log" 2>&1; then
    tail -40 "$log" >&2
    step "building $image failed (full log: $log)"
    exit 1
  fi
  rm -f "$log"
  step "built $image in $((SECONDS - start)) s ($(buildah images --format '{{.Size}}' "$image" | head -1))"
  images+=("$image")
done

if ((import)); then
  start=$SECONDS
  "$here/import.sh" --buildah "${images[@]}" >&2
  step "imported into the node's containerd in $((SECONDS - start)) s"
fi
printf '%s\n' "${images[@]}"
