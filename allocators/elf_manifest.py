#!/usr/bin/env python3
"""Writes the manifest of one built allocator library (JSON, to stdout).

    elf_manifest.py LIBRARY --allocator jemalloc --libc glibc \
        --source-package jemalloc --source-version 5.3.0-1 --built-in bullseye

What a library requires of the system it is loaded into is read from the ELF
file itself with binutils (readelf, objdump), never typed in: its NEEDED
libraries and, for glibc builds, every GLIBC_x.y symbol version it requires.
The highest of those is the oldest glibc the library loads on; the symbols
that require it are listed so a reader sees why.
"""

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys


def run(*argv):
    return subprocess.run(argv, check=True, capture_output=True,
                          text=True).stdout


def needed_libraries(path):
    """The DT_NEEDED entries, in link order."""
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]",
                      run("readelf", "-d", "--wide", path))


def soname(path):
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]",
                  run("readelf", "-d", "--wide", path))
    return m.group(1) if m else None


def required_versions(path):
    """{file: [version, ...]} from the version-needs section (.gnu.version_r).

    Only this section says what the library requires; the version
    definitions (.gnu.version_d) are what it provides.
    """
    out = run("readelf", "-V", "--wide", path)
    needs = {}
    in_needs = False
    current = None
    for line in out.splitlines():
        if line.startswith("Version needs section"):
            in_needs = True
            continue
        if line.startswith("Version ") and "section" in line:
            in_needs = False
            continue
        if not in_needs:
            continue
        m = re.search(r"File: (\S+)", line)
        if m:
            current = m.group(1)
            needs.setdefault(current, [])
            continue
        m = re.search(r"Name: (\S+)", line)
        if m and current:
            needs[current].append(m.group(1))
    return {f: sorted(set(v), key=version_key) for f, v in needs.items()}


def version_key(name):
    """GLIBC_2.2.5 -> (2, 2, 5); names without numbers sort first."""
    nums = re.findall(r"\d+", name)
    return tuple(int(n) for n in nums) if nums else (-1,)


def symbols_requiring(path, version):
    """Dynamic symbols this library imports at exactly `version`."""
    symbols = []
    for line in run("objdump", "-T", path).splitlines():
        # Undefined symbols: "... *UND*  ... (GLIBC_2.29) exp" with binutils
        # 2.40 (Debian 12), "... *UND*  ... GLIBC_2.29  exp" with 2.35
        # (Debian 11, where the image's glibc builds are made).
        fields = line.split()
        if "*UND*" in fields and (version in fields or f"({version})" in fields):
            symbols.append(fields[-1])
    return sorted(set(symbols))


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("library")
    p.add_argument("--allocator", required=True)
    p.add_argument("--libc", required=True, choices=["glibc", "musl"])
    p.add_argument("--source-package", required=True)
    p.add_argument("--source-version", required=True)
    p.add_argument("--built-in", required=True,
                   help="Debian suite of the build chroot")
    p.add_argument("--toolchain", default="",
                   help="compiler and libc the library was built with")
    args = p.parse_args()

    path = args.library
    manifest = {
        "library": os.path.basename(path),
        "soname": soname(path),
        "allocator": args.allocator,
        "libc": args.libc,
        "source_package": args.source_package,
        "source_version": args.source_version,
        "built_in": args.built_in,
        "toolchain": args.toolchain,
        "needed": needed_libraries(path),
        "size_bytes": os.path.getsize(path),
        "sha256": sha256(path),
    }
    if args.libc == "glibc":
        needs = required_versions(path)
        glibc = sorted({v for vs in needs.values() for v in vs
                        if re.fullmatch(r"GLIBC_\d+(\.\d+)*", v)},
                       key=version_key)
        if not glibc:
            print(f"{path}: no GLIBC_ symbol version required; "
                  "not a glibc build?", file=sys.stderr)
            return 1
        manifest["max_glibc_version"] = glibc[-1]
        manifest["max_glibc_symbols"] = symbols_requiring(path, glibc[-1])
        manifest["required_versions"] = needs
    json.dump(manifest, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
