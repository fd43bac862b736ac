#!/usr/bin/env python3
"""Checks that every place that names allocguard's release names the one in
the repository's VERSION file (docs/install.md, "Versions"):

- charts/allocguard/Chart.yaml: `version` and `appVersion` (the image tag the
  chart uses by default is appVersion);
- the binary (ALLOCGUARD_BINARY): `allocguard --version` prints
  "allocguard <version>", `allocguard version -o json` prints
  {"version": "<version>"}, and an unknown -o value is refused;
- the Dockerfile labels the image with org.opencontainers.image.version from
  the VERSION build argument, and e2e/images/allocguard.sh passes the file.

Run: ALLOCGUARD_BINARY=build/release/operator/cli/allocguard \\
     python3 charts/tests/version_test.py
"""
import json
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


version = (ROOT / "VERSION").read_text().splitlines()[0].strip()
check(re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", version) is not None,
      f"VERSION is a semantic version ({version!r})")

chart = (ROOT / "charts/allocguard/Chart.yaml").read_text()
for key in ("version", "appVersion"):
    m = re.search(rf'^{key}:\s*"?([^"\s]+)"?\s*$', chart, re.M)
    found = m.group(1) if m else None
    check(found == version, f"Chart.yaml {key} is {version} (found {found})")

binary = os.environ.get("ALLOCGUARD_BINARY")
if not binary:
    check(False, "ALLOCGUARD_BINARY names the allocguard binary")
else:
    def run(*args):
        return subprocess.run([binary, *args], capture_output=True, text=True, timeout=30)

    r = run("--version")
    check(r.returncode == 0 and r.stdout.strip() == f"allocguard {version}",
          f"allocguard --version prints 'allocguard {version}' (got {r.returncode}: {r.stdout.strip()!r})")
    r = run("version")
    check(r.returncode == 0 and r.stdout.strip() == f"allocguard {version}",
          f"allocguard version prints 'allocguard {version}' (got {r.stdout.strip()!r})")
    r = run("version", "-o", "json")
    try:
        parsed = json.loads(r.stdout)
    except ValueError:
        parsed = None
    check(r.returncode == 0 and parsed == {"version": version},
          f"allocguard version -o json prints {{\"version\": \"{version}\"}} (got {r.stdout.strip()!r})")
    r = run("version", "-o", "yaml")
    check(r.returncode != 0, f"allocguard version -o yaml is refused (exit {r.returncode})")

dockerfile = (ROOT / "Dockerfile").read_text()
check('org.opencontainers.image.version="$VERSION"' in dockerfile and "ARG VERSION" in dockerfile,
      "the Dockerfile labels the image with the VERSION build argument")
images = (ROOT / "e2e/images/allocguard.sh").read_text()
check('VERSION=$(head -1 "$root/VERSION")' in images,
      "e2e/images/allocguard.sh passes the VERSION file as the build argument")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("every place names version", version)
