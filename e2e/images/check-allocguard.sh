#!/usr/bin/env bash
# Checks the allocator libraries an allocguard image ships against the
# contract the operator's injection relies on and against the docs:
#
#   e2e/images/check-allocguard.sh [IMAGE] [--workload IMAGE] [--manifests DIR]
#
#   IMAGE (default localhost/allocguard:e2e, from e2e/images/allocguard.sh):
#   - /opt/allocguard/lib holds exactly glibc/{libjemalloc.so.2,
#     libmimalloc.so.2,libtcmalloc_minimal.so.4} and musl/{libjemalloc.so.2,
#     libmimalloc.so.2}, each with its <library>.json manifest, nothing else,
#     and the image sets ALLOCGUARD_ALLOCATOR_DIR=/opt/allocguard/lib;
#   - read from the files with readelf: no glibc build requires a symbol
#     version above GLIBC_2.17 or NEEDs libstdc++.so.6 or libgcc_s.so.1; the
#     musl builds require no GLIBC_ version and NEED only libc.so;
#   - every manifest parses and describes its file (name, libc, SHA-256,
#     highest GLIBC_ version);
#   - the compatibility table of docs/allocators.md has exactly the rows these
#     manifests generate (allocators/compat_table.py --check-shipped).
#   --workload IMAGE (the demo-workload target, localhost/ratchet-service:TAG):
#     it carries Debian 12's own /usr/lib/x86_64-linux-gnu/libjemalloc.so.2.
#   --manifests DIR keeps the copy of the image's manifests there.
#
# Needs root (buildah mount), binutils and python3. Exit status 1 on any
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
glibc/libjemalloc.so.2
glibc/libjemalloc.so.2.json
glibc/libmimalloc.so.2
glibc/libmimalloc.so.2.json
glibc/libtcmalloc_minimal.so.4
glibc/libtcmalloc_minimal.so.4.json
musl
musl/libjemalloc.so.2
musl/libjemalloc.so.2.json
musl/libmimalloc.so.2
musl/libmimalloc.so.2.json'
have=$(cd "$lib" 2>/dev/null && find . -mindepth 1 | sed 's|^\./||' | LC_ALL=C sort)
if [[ $have == "$want" ]]; then
  pass "$image: /opt/allocguard/lib holds exactly the 5 libraries and their manifests"
else
  fail "$image: /opt/allocguard/lib differs from the layout:"
  diff <(echo "$want") <(echo "$have") | sed 's/^/      /'
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

for f in "$lib"/glibc/*.so.*[0-9] "$lib"/musl/*.so.*[0-9]; do
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
