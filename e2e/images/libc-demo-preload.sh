#!/usr/bin/env bash
# Runs the libc demonstration images (e2e/images/libc-demo.sh) outside any
# cluster, each with the allocator builds of an allocguard image preloaded the
# way the injection does it, and prints what each process's GET /allocator
# answered (or the loader's message when it did not start):
#
#   e2e/images/libc-demo-preload.sh [--image IMAGE] [--workload IMAGE]
#
#   --image     the allocguard image whose /opt/allocguard/lib is injected
#               (default localhost/allocguard:e2e)
#   --workload  an image with Debian 12's own libjemalloc.so.2 in
#               /usr/lib/x86_64-linux-gnu (the demo-workload target,
#               default localhost/ratchet-service:e2e): also preloaded, to show
#               the failure the builds avoid
#
# The library volume is laid out as the injection's init container does
# (operator/admission/library_layout.h): <v>/glibc/<lib>, <v>/musl/<lib>,
# <v>/lib/x86_64-linux-gnu/<lib>, <v>/lib64/<lib> and <v>/lib/<lib> linking
# to the glibc build, and <v>/$LIB/<lib> (a directory named "$LIB") to the
# musl build; libc "auto" preloads <v>/$LIB/<lib>, which glibc's loader
# expands and musl's takes literally. Each process runs as uid 65532 in a
# chroot of its image's root filesystem, mounted read-only, with the volume at
# /opt/allocguard/inject and /proc (in a private mount namespace), on a port
# of its own on the host's network, and is killed after the answer. Needs root, buildah, curl,
# python3 and unshare.
set -euo pipefail

image=localhost/allocguard:e2e workload=localhost/ratchet-service:e2e
while (($#)); do
  case $1 in
    --image) image=$2; shift 2 ;;
    --workload) workload=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "libc-demo-preload.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

pids=()
source "$(dirname "$0")/mount-images.sh"
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  unmount_images
}
trap cleanup EXIT

# The library volume.
src=$(mount_image "$image")/opt/allocguard/lib
vol=$tmp/volume
mkdir -p "$vol/lib/x86_64-linux-gnu" "$vol/lib64" "$vol/\$LIB" "$vol/debian12"
cp -a "$src/glibc" "$src/musl" "$vol/"
for f in "$vol"/glibc/*.so.*[0-9]; do
  l=$(basename "$f")
  ln -s "../../glibc/$l" "$vol/lib/x86_64-linux-gnu/$l"
  ln -s "../glibc/$l" "$vol/lib64/$l"
  ln -s "../glibc/$l" "$vol/lib/$l"
done
for f in "$vol"/musl/*.so.*[0-9]; do
  l=$(basename "$f")
  ln -s "../musl/$l" "$vol/\$LIB/$l"
done
if [[ -n $workload ]]; then
  cp -L "$(mount_image "$workload")/usr/lib/x86_64-linux-gnu/libjemalloc.so.2" "$vol/debian12/"
fi
inject=/opt/allocguard/inject

# run VARIANT ROOTFS PORT PRELOAD: one line of the table.
port=18600
run() {
  local variant=$1 rootfs=$2 preload=$3 out=$tmp/out.$port pid answer malloc status
  port=$((port + 1))
  # No fork anywhere: unshare execs python, python execs the demo, so $! is
  # the demo's PID (a PID namespace's parent-death signal would not survive
  # the uid change).
  unshare --mount --propagation private -- \
    python3 - "$rootfs" "$vol" "$inject" "$port" "$preload" >"$out" 2>&1 <<'PY' &
import os, subprocess, sys
rootfs, vol, inject, port, preload = sys.argv[1:]
def sh(*argv):
    subprocess.run(argv, check=True)
# The image's writable layer gets the mount points; then the root goes
# read-only, as under readOnlyRootFilesystem.
os.makedirs(rootfs + "/proc", exist_ok=True)
os.makedirs(rootfs + inject, exist_ok=True)
sh("mount", "--bind", rootfs, rootfs)
sh("mount", "-t", "proc", "proc", rootfs + "/proc")
sh("mount", "--bind", vol, rootfs + inject)
sh("mount", "-o", "remount,bind,ro", rootfs + inject)
sh("mount", "-o", "remount,bind,ro", rootfs)
os.chroot(rootfs)
os.chdir("/")
os.setgroups([])
os.setgid(65532)
os.setuid(65532)
env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
if preload:
    env["LD_PRELOAD"] = preload
os.execve("/usr/local/bin/libc_demo", ["libc_demo", "--port", port], env)
PY
  pid=$!
  pids+=("$pid")
  answer= malloc=
  for _ in $(seq 50); do
    if answer=$(curl -sf --max-time 2 "http://127.0.0.1:$port/allocator"); then
      malloc=$(curl -sf --max-time 2 "http://127.0.0.1:$port/malloc")
      break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [[ -n $answer ]]; then
    status="running; /allocator: $answer (malloc in $malloc)"
  else
    wait "$pid" 2>/dev/null && status="exit 0" || status="exit $?"
    status="did not start ($status): $(grep -v '^libc_demo: listening' "$out" | head -n2 | paste -sd ' ')"
  fi
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  local warn
  warn=$(grep -i 'ld.so\|error' "$out" | head -n1 || true)
  [[ -n $answer && -n $warn ]] && status+="; loader: $warn"
  printf '%-9s %-44s %s\n' "$variant" "${preload:-(none)}" "$status"
}

printf '%-9s %-44s %s\n' image LD_PRELOAD result
for variant in debian11 debian12 musl static; do
  rootfs=$(mount_image "localhost/libc-demo:$variant")
  run "$variant" "$rootfs" ""
  for l in libjemalloc.so.2 libmimalloc.so.2 libtcmalloc_minimal.so.4; do
    run "$variant" "$rootfs" "$inject/\$LIB/$l"
  done
  case $variant in
    debian11 | debian12 | static)
      run "$variant" "$rootfs" "$inject/glibc/libjemalloc.so.2"
      run "$variant" "$rootfs" "$inject/musl/libjemalloc.so.2"
      [[ -n $workload ]] && run "$variant" "$rootfs" "$inject/debian12/libjemalloc.so.2"
      ;;
    musl)
      run "$variant" "$rootfs" "$inject/musl/libjemalloc.so.2"
      run "$variant" "$rootfs" "$inject/glibc/libjemalloc.so.2"
      ;;
  esac
done
