#!/usr/bin/env python3
"""The compatibility table in docs/allocators.md is what compat_table.py
generates: from the real build when allocators/build.sh has run on this
machine, and always from allocators/testdata/manifests, the copy of the
manifests the committed table was generated from. --check-shipped, which
e2e/images/check-allocguard.sh runs on the manifests an image ships, accepts
exactly the builds' rows."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ALLOCATORS = os.path.dirname(HERE)
DOC = os.path.join(os.path.dirname(ALLOCATORS), "docs", "allocators.md")
FIXTURE = os.path.join(ALLOCATORS, "testdata", "manifests")
SCRIPT = os.path.join(ALLOCATORS, "compat_table.py")


def check(directory):
    result = subprocess.run([sys.executable, SCRIPT, "--check", DOC, directory],
                            capture_output=True, text=True)
    sys.stdout.write(result.stdout + result.stderr)
    return result.returncode == 0


def check_shipped(directory):
    result = subprocess.run([sys.executable, SCRIPT, "--check-shipped", DOC, directory],
                            capture_output=True, text=True)
    return result.returncode == 0, result.stdout + result.stderr


def shipped_checks():
    """What an image ships (glibc/ and musl/ of the fixture) matches the table;
    Debian's own packages, a missing library or a changed figure do not."""
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        shipped = os.path.join(tmp, "lib")
        for libc in ("glibc", "musl"):
            shutil.copytree(os.path.join(FIXTURE, libc), os.path.join(shipped, libc))
        ok, out = check_shipped(shipped)
        if not ok:
            failures.append("the builds' manifests do not match the table:\n" + out)

        with_debian = os.path.join(tmp, "with-debian")
        shutil.copytree(FIXTURE, with_debian)
        ok, out = check_shipped(with_debian)
        if ok or "Debian's own packages" not in out:
            failures.append("manifests of Debian's packages passed --check-shipped:\n" + out)

        missing = os.path.join(tmp, "missing")
        shutil.copytree(shipped, missing)
        os.remove(os.path.join(missing, "musl", "libmimalloc.so.2.json"))
        ok, out = check_shipped(missing)
        if ok or "musl/libmimalloc.so.2" not in out:
            failures.append("a missing musl mimalloc passed --check-shipped:\n" + out)

        newer = os.path.join(tmp, "newer")
        shutil.copytree(shipped, newer)
        path = os.path.join(newer, "glibc", "libjemalloc.so.2.json")
        with open(path, encoding="utf-8") as f:
            m = json.load(f)
        m["max_glibc_version"] = "GLIBC_2.34"
        with open(path, "w", encoding="utf-8") as f:
            json.dump(m, f)
        ok, out = check_shipped(newer)
        if ok or "glibc ≥ 2.34" not in out:
            failures.append("a jemalloc requiring GLIBC_2.34 passed --check-shipped:\n" + out)
    for f in failures:
        print("FAIL:", f)
    return failures


def main():
    build = subprocess.run(
        ["bash", "-c", f'source "{ALLOCATORS}/versions.sh"; allocators_dir'],
        check=True, capture_output=True, text=True).stdout.strip()
    checks = [FIXTURE]
    if os.path.exists(os.path.join(build, ".complete")):
        checks.insert(0, build)
    else:
        print(f"no allocator build at {build} (allocators/build.sh); "
              f"checking against the committed manifests only")
    failed = [d for d in checks if not check(d)]
    failed += shipped_checks()
    total = len(checks) + 4
    print(f"{total - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
