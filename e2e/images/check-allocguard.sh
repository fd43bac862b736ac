#!/usr/bin/env bash
# Checks the allocator libraries an allocguard image ships against the
# contract the operator's injection relies on and against the docs:
#
#   e2e/images/check-allocguard.sh [IMAGE] [--workload IMAGE] [--manifests DIR]
#
#   IMAGE (default localhost/allocguard:e2e, from e2e/images/allocguard.sh):
#   - /opt/allocguard/lib holds exactly glibc/{libjemalloc.so.2,
#     libmimalloc.so.2,libtcmalloc_minimal.so.4,liballocguard_stats.so} and
#     musl/{libjemalloc.so.2,libmimalloc.so.2,liballocguard_stats.so}, each
#     with its <library>.json manifest, nothing else, and the image sets
#     ALLOCGUARD_ALLOCATOR_DIR=/opt/allocguard/lib;
#   - read from the files with readelf: no glibc build requires a symbol
#     version above GLIBC_2.17 or NEEDs libstdc++.so.6 or libgcc_s.so.1; the
#     stats agent's glibc build requires no GLIBC_ version above the highest
#     of the allocators' builds; the musl builds require no GLIBC_ version
#     and NEED only libc.so;
#   - the stats agent loads and publishes books (a books-<pid> file in
#     ALLOCGUARD_STATS_DIR while the process runs, none after it exits) when
#     preloaded into: a shell of the image itself (Debian 12, glibc 2.36,
#     mallinfo2), a shell of debian:bullseye-slim (Debian 11, glibc 2.31,
#     mallinfo), and a small musl program built here with musl-gcc and run by
#     the host's musl loader;
#   - every manifest parses and describes its file (name, libc, SHA-256,
#     highest GLIBC_ version);
#   - the compatibility table of docs/allocators.md has exactly the rows these
#     manifests generate (allocators/compat_table.py --check-shipped).
#   --workload IMAGE (the demo-workload target, localhost/ratchet-service:TAG):
#     it carries Debian 12's own /usr/lib/x86_64-linux-gnu/libjemalloc.so.2.
#   --manifests DIR keeps the copy of the image's manifests there.
#
# Needs root (buildah mount, chroot), binutils, python3, musl-tools and the
# debian:bullseye-slim image (e2e/images/base.sh). Exit status 1 on any
# failed check; every check prints a line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

image=localhost/allocguard:e2e workload= manifests=
while (($#)); do
  case $1 in
    --workload) workload=$2; shift 2 ;;
    --manifests) manifests=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "check-allocguard.sh: unknown argument $1" >&2; exit 2 ;;
    *) image=$1; shift ;;
  esac
done

failed=0
pass() { echo "ok    $*"; }
fail() { echo "FAIL  $*"; failed=1; }

source "$here/mount-images.sh"
trap unmount_images EXIT

rootfs=$(mount_image "$image")
lib=$rootfs/opt/allocguard/lib

want='glibc
glibc/liballocguard_stats.so
glibc/liballocguard_stats.so.json
glibc/libjemalloc.so.2
glibc/libjemalloc.so.2.json
glibc/libmimalloc.so.2
glibc/libmimalloc.so.2.json
glibc/libtcmalloc_minimal.so.4
glibc/libtcmalloc_minimal.so.4.json
musl
musl/liballocguard_stats.so
musl/liballocguard_stats.so.json
musl/libjemalloc.so.2
musl/libjemalloc.so.2.json
musl/libmimalloc.so.2
musl/libmimalloc.so.2.json'
have=$(cd "$lib" 2>/dev/null && find . -mindepth 1 | sed 's|^\./||' | LC_ALL=C sort)
if [[ $have == "$want" ]]; then
  pass "$image: /opt/allocguard/lib holds exactly the 5 allocator libraries, the 2 stats agents and their manifests"
else
  fail "$image: /opt/allocguard/lib differs from the layout:"
  diff <(echo "$want") <(echo "$have") | sed 's/^/      /' || true  # diff exits 1: keep checking
fi
env_dir=$(buildah inspect --type image --format '{{range .OCIv1.Config.Env}}{{println .}}{{end}}' "$image" |
  sed -n 's/^ALLOCGUARD_ALLOCATOR_DIR=//p')
[[ $env_dir == /opt/allocguard/lib ]] && pass "$image: ALLOCGUARD_ALLOCATOR_DIR=$env_dir" ||
  fail "$image: ALLOCGUARD_ALLOCATOR_DIR is '$env_dir', not /opt/allocguard/lib"

max_glibc() {  # library: highest GLIBC_x.y it requires, or nothing
  readelf -V --wide "$1" | sed -n '/^Version needs section/,/^Version .*section/p' |
    grep -o 'Name: GLIBC_[0-9.]*' | sed 's/Name: //' | sort -V | tail -n1
}
needed() { readelf -d --wide "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | paste -sd ' '; }

for f in "$lib"/glibc/*.so "$lib"/glibc/*.so.*[0-9] "$lib"/musl/*.so "$lib"/musl/*.so.*[0-9]; do
  [[ -e $f ]] || continue
  name=${f#"$lib"/}
  v=$(max_glibc "$f") n=$(needed "$f")
  if [[ $name == glibc/* ]]; then
    if [[ -n $v && $(printf '%s\n' "$v" GLIBC_2.17 | sort -V | tail -n1) == GLIBC_2.17 ]]; then
      pass "$name requires at most $v (NEEDED $n)"
    else
      fail "$name requires '${v:-no GLIBC_ version}', more than GLIBC_2.17"
    fi
    [[ " $n " == *" libstdc++.so.6 "* || " $n " == *" libgcc_s.so.1 "* ]] &&
      fail "$name NEEDs a C++ runtime: $n"
  else
    [[ -z $v && $n == libc.so ]] && pass "$name: no GLIBC_ version, NEEDED $n" ||
      fail "$name: GLIBC version '$v', NEEDED '$n' (want none and libc.so)"
  fi
done

# The stats agent needs no glibc the allocators do not: a pod that loads the
# allocator loads the agent too.
agent=$lib/glibc/liballocguard_stats.so
if [[ -e $agent ]]; then
  agent_v=$(max_glibc "$agent") allocators_v=
  for f in "$lib"/glibc/lib*.so.*[0-9]; do allocators_v+="$(max_glibc "$f")"$'\n'; done
  allocators_v=$(echo -n "$allocators_v" | sort -V | tail -n1)
  if [[ -n $agent_v && -n $allocators_v &&
    $(printf '%s\n' "$agent_v" "$allocators_v" | sort -V | tail -n1) == "$allocators_v" ]]; then
    pass "glibc/liballocguard_stats.so requires $agent_v, the allocators at most $allocators_v"
  else
    fail "glibc/liballocguard_stats.so requires '${agent_v:-nothing}', the allocators at most '${allocators_v:-nothing}'"
  fi
fi

# agent_publishes LABEL ROOTFS BOOKS_DIR AGENT COMMAND...: COMMAND (run in a
# chroot of ROOTFS when ROOTFS is not empty) with AGENT preloaded and a 50 ms
# interval must publish a books-<pid> file in BOOKS_DIR while it runs and
# remove it when it exits (COMMAND must live a few intervals and end with
# exit(), not _exit: a shell such as dash ends with _exit, which runs no
# destructor). BOOKS_DIR and AGENT are as COMMAND sees them.
agent_publishes() {
  local label=$1 rootfs=$2 dir=$3 preload=$4 pid seen= status=0 _
  shift 4
  local runner=(env -i PATH=/usr/bin:/bin LD_PRELOAD="$preload" ALLOCGUARD_STATS_DIR="$dir"
    ALLOCGUARD_STATS_INTERVAL_MS=50 "$@")
  [[ -n $rootfs ]] && runner=(chroot "$rootfs" "${runner[@]}")
  timeout 20 "${runner[@]}" >"$tmp/agent.out" 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    seen=$(cd "$rootfs$dir" && ls -A | grep '^books-' | head -n1 || true)
    [[ -n $seen ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  wait "$pid" || status=$?
  if ((status != 0)); then
    fail "$label: the process with the agent preloaded exited $status: $(head -c 300 "$tmp/agent.out")"
  elif [[ -z $seen ]]; then
    fail "$label: the agent published no books while the process ran ($(head -c 300 "$tmp/agent.out"))"
  elif [[ -n $(ls -A "$rootfs$dir") ]]; then
    fail "$label: books left after a clean exit: $(ls -A "$rootfs$dir")"
  else
    pass "$label: the agent loaded and published $seen, removed at exit"
  fi
}
if [[ -e $agent ]]; then
  mkdir -p "$rootfs/tmp/allocguard-books"
  agent_publishes "$image (Debian 12, glibc $(chroot "$rootfs" ldd --version | head -n1 | awk '{print $NF}'))" \
    "$rootfs" /tmp/allocguard-books /opt/allocguard/lib/glibc/liballocguard_stats.so /bin/sleep 1
  bullseye=$(mount_image docker.io/library/debian:bullseye-slim)
  mkdir -p "$bullseye/tmp/allocguard-books"
  cp "$agent" "$bullseye/tmp/liballocguard_stats.so"
  agent_publishes "debian:bullseye-slim (Debian 11, glibc $(chroot "$bullseye" ldd --version | head -n1 | awk '{print $NF}'))" \
    "$bullseye" /tmp/allocguard-books /tmp/liballocguard_stats.so /bin/sleep 1
fi
if [[ -e $lib/musl/liballocguard_stats.so ]]; then
  # A musl process: mallocs, lives a second, exits normally.
  cat >"$tmp/musl-probe.c" <<'C'
#include <stdlib.h>
#include <time.h>
int main(void) {
  void* volatile p = malloc(1 << 20);
  struct timespec t = {1, 0};
  nanosleep(&t, NULL);
  free(p);
  return 0;
}
C
  if musl-gcc -O2 -o "$tmp/musl-probe" "$tmp/musl-probe.c" 2>"$tmp/musl-gcc.log"; then
    mkdir -p "$tmp/musl-books"
    agent_publishes "musl ($(/lib/ld-musl-x86_64.so.1 2>&1 | sed -n 's/^Version //p' | head -n1 | sed 's/^/musl /'))" \
      "" "$tmp/musl-books" "$lib/musl/liballocguard_stats.so" "$tmp/musl-probe"
  else
    fail "musl-gcc could not build the musl probe (musl-tools): $(head -n3 "$tmp/musl-gcc.log")"
  fi
fi

# The manifests: parse, describe their file, agree with readelf.
python3 - "$lib" <<'PY' || failed=1
import hashlib, json, os, re, subprocess, sys
lib = sys.argv[1]
for libc in ("glibc", "musl"):
    d = os.path.join(lib, libc)
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if not name.endswith(".json"):
            continue
        path = os.path.join(d, name)
        try:
            m = json.load(open(path, encoding="utf-8"))
        except ValueError as e:
            print(f"FAIL  {libc}/{name} does not parse: {e}")
            sys.exit(1)
        so = os.path.join(d, m["library"])
        digest = hashlib.sha256(open(so, "rb").read()).hexdigest()
        problems = []
        if m["library"] + ".json" != name:
            problems.append(f"names {m['library']}")
        if m["libc"] != libc:
            problems.append(f"says libc {m['libc']}")
        if m["sha256"] != digest:
            problems.append("SHA-256 differs from the file")
        if libc == "glibc":
            out = subprocess.run(["readelf", "-V", "--wide", so], capture_output=True,
                                 text=True, check=True).stdout
            need = out[out.find("Version needs section"):]
            vs = sorted(set(re.findall(r"Name: (GLIBC_[\d.]+)", need)),
                        key=lambda v: [int(x) for x in re.findall(r"\d+", v)])
            if m.get("max_glibc_version") != vs[-1]:
                problems.append(f"max_glibc_version {m.get('max_glibc_version')}, readelf {vs[-1]}")
        if problems:
            print(f"FAIL  {libc}/{name}: " + "; ".join(problems))
            sys.exit(1)
        print(f"ok    {libc}/{name} parses: {m['allocator']} {m['source_version']}, "
              f"built in {m['built_in']}, requires {m.get('max_glibc_version', 'musl')}")
PY

# The docs' compatibility table against what the image ships.
out=${manifests:-$tmp/manifests}
rm -rf "$out"
mkdir -p "$out"
(cd "$lib" && find . -name '*.json' -exec cp --parents {} "$out/" \;)
if python3 "$root/allocators/compat_table.py" --check-shipped "$root/docs/allocators.md" "$out" \
  >"$tmp/table.log"; then
  pass "$(cat "$tmp/table.log")"
else
  sed 's/^/      /' "$tmp/table.log"
  fail "docs/allocators.md's table differs from what $image ships (manifests: $out)"
fi

if [[ -n $workload ]]; then
  wroot=$(mount_image "$workload")
  deb=$wroot/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
  if [[ -e $deb ]]; then
    pass "$workload carries Debian 12's libjemalloc.so.2 (requires $(max_glibc "$deb"), NEEDED $(needed "$deb"))"
  else
    fail "$workload lacks /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 (Debian 12's libjemalloc2)"
  fi
fi
exit $failed
