#!/usr/bin/env bash
# Builds the two images of the end-to-end test from the repository's
# Dockerfile with buildah (no Docker engine, no registry) and, when a node
# cluster runs, imports them into its containerd:
#
#   localhost/allocguard:TAG        the default target: operator, canary driver,
#                                   injection init container, guard
#   localhost/ratchet-service:TAG   --target demo-workload (e2e/workloads)
#
#   e2e/images/allocguard.sh [--tag TAG] [--no-import] [--operator-only]
#   e2e/images/allocguard.sh --allocators-only   # base images and allocator stages only
#
# --operator-only builds the operator image alone (scripts/release.sh).
#
# The same Dockerfile builds unchanged with `docker build` elsewhere. buildah
# keeps layers (--layers) between builds on this machine, and the build stage
# uses the host's compiler cache (/var/cache/allocguard/ccache, or $CCACHE_DIR),
# which scripts/test.sh fills: after the tests' build, the image's compile
# steps are cache hits, and a rebuild after a small change recompiles only
# what changed.
# The allocator stages (allocators-glibc FROM debian:bullseye-slim,
# allocators-musl FROM debian:bookworm-slim) compile jemalloc, mimalloc and
# tcmalloc from Debian's source packages; they are built first, on their own,
# so their time shows apart from the C++ build. Their layers depend only on
# the allocators/ files they copy: after the first build they are cache hits.
# --allocators-only builds the base images and the allocator stages and
# stops: scripts/test.sh runs it at the start, beside the C++ and Go builds,
# so that the node tier's image build later finds those layers cached.
# Prints the time each step took. Builds run under nice -n 19, or the nice
# level in ALLOCGUARD_BUILD_NICE (e2e/run.sh uses 0: there the image is on
# the critical path, and the sanitizer build beside it runs at nice 10).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
source "$here/versions.sh"

tag=${ALLOCGUARD_IMAGE_TAG:-e2e}
import=1
allocators_only=0
operator_only=0
while (($#)); do
  case $1 in
    --tag) tag=$2; shift 2 ;;
    --no-import) import=0; shift ;;
    --allocators-only) allocators_only=1 import=0; shift ;;
    --operator-only) operator_only=1; shift ;;
    *) echo "allocguard.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
operator_image=localhost/allocguard:$tag
workload_image=localhost/ratchet-service:$tag

ccache_dir=${CCACHE_DIR:-/var/cache/allocguard/ccache}

step() { echo "allocguard.sh: $*" >&2; }
t0=$SECONDS
"$here/base.sh" --suite bookworm --suite bullseye >/dev/null
step "base images ready in $((SECONDS - t0)) s"

bud() {  # target image
  local target=$1 image=$2 start=$SECONDS
  local args=(--pull=never --isolation=chroot --network=host --layers -f "$root/Dockerfile")
  [[ -n $image ]] && args+=(-t "$image")
  [[ -n $target ]] && args+=(--target "$target")
  # The host's compiler cache (scripts/test.sh fills it), mounted where the
  # Dockerfile's build stage looks for it: what the tests' build compiled is
  # not compiled again for the image.
  mkdir -p "$ccache_dir"
  args+=(--volume "$ccache_dir:/host-ccache" --build-arg CCACHE_DIR=/host-ccache)
  # The image's org.opencontainers.image.version label.
  args+=(--build-arg "VERSION=$(head -1 "$root/VERSION")")
  # buildah prints every step; keep it in a log and show the tail on failure.
  local log
  log=$(mktemp /tmp/allocguard-bud.XXXXXX.log)
  if ! nice -n "${ALLOCGUARD_BUILD_NICE:-19}" buildah bud "${args[@]}" "$root" >"$log" 2>&1; then
    tail -40 "$log" >&2
    step "building ${image:-stage $target} failed (full log: $log)"
    exit 1
  fi
  rm -f "$log"
  step "built ${image:-stage $target} in $((SECONDS - start)) s${image:+ ($(buildah images --format '{{.Size}}' "$image" | head -1))}"
}
# The allocator stages alone (no tag: only their cached layers remain).
bud allocators-glibc ""
bud allocators-musl ""
((allocators_only)) && exit 0
bud "" "$operator_image"
images=("$operator_image")
if ((!operator_only)); then
  bud demo-workload "$workload_image"
  images+=("$workload_image")
fi

if ((import)); then
  start=$SECONDS
  "$here/import.sh" --buildah "${images[@]}" >&2
  step "imported into the node's containerd in $((SECONDS - start)) s"
fi
printf '%s\n' "${images[@]}"
