#!/usr/bin/env python3
"""The compatibility table in docs/allocators.md is what compat_table.py
generates: from the real build when allocators/build.sh has run on this
machine, and always from allocators/testdata/manifests, the copy of the
manifests the committed table was generated from."""

import os
import subprocess
import sys

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
    print(f"{len(checks) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
