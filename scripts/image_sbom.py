#!/usr/bin/env python3
"""Writes the package list of an allocguard image as an SPDX 2.3 JSON document.

    image_sbom.py ROOT --image NAME --version VERSION [--created ISO8601]

ROOT is the image's root filesystem (scripts/release.sh mounts it with
`buildah mount`). The document lists:

- every Debian package of the image, from its dpkg database
  (ROOT/var/lib/dpkg/status), as pkg:deb purls;
- every allocator library the operator injects, from the manifests beside
  them (ROOT/opt/allocguard/lib/<libc>/<library>.json, written by
  allocators/write-manifest.sh): the Debian source package it was built
  from, its version, the libc and Debian suite it was built for, and the
  library file's SHA-256; the stats agent (liballocguard_stats.so, manifest
  by allocators/stats_agent/build-agent.sh) as built from allocguard's own
  source at VERSION;
- the allocguard binary itself.

Only the standard library: it runs on the release machine, not in the image.
"""

import argparse
import datetime
import json
import pathlib
import re
import sys

# The allocator manifests' own hash (allocators/elf_manifest.py writes their
# "sha256"), so the check below compares like with like.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "allocators"))
from elf_manifest import sha256  # noqa: E402


def spdx_id(text):
    """An SPDX identifier (letters, digits, '.' and '-') made from text."""
    return "SPDXRef-" + re.sub(r"[^A-Za-z0-9.-]+", "-", text).strip("-")


def dpkg_packages(status_path):
    """The installed packages of a dpkg status file: name, version, arch, source."""
    packages = []
    for stanza in status_path.read_text(encoding="utf-8").split("\n\n"):
        fields = {}
        for line in stanza.splitlines():
            if line[:1] in (" ", "\t") or ":" not in line:
                continue  # a continuation line of a multi-line field
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        if not fields.get("Package") or fields.get("Status", "").split()[-1:] != ["installed"]:
            continue  # config-files, half-installed, ...
        packages.append(
            {
                "name": fields["Package"],
                "version": fields.get("Version", ""),
                "arch": fields.get("Architecture", ""),
                # "Source: name (version)" when the binary's version differs.
                "source": fields.get("Source", fields["Package"]).split(" ")[0],
            }
        )
    return sorted(packages, key=lambda p: p["name"])


def os_release(root):
    """ID and VERSION_ID of the image's /etc/os-release (e.g. debian, 12)."""
    values = {}
    for path in (root / "etc/os-release", root / "usr/lib/os-release"):
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                key, _, value = line.partition("=")
                values[key] = value.strip().strip('"')
            break
    return values.get("ID", "debian"), values.get("VERSION_ID", "")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=pathlib.Path)
    parser.add_argument("--image", required=True, help="the image's name, e.g. ghcr.io/allocguard/allocguard:0.1.0")
    parser.add_argument("--version", required=True)
    parser.add_argument("--created", help="the document's creation time (default: now, UTC)")
    args = parser.parse_args()

    status = args.root / "var/lib/dpkg/status"
    if not status.is_file():
        sys.exit(f"image_sbom.py: {status} is missing: not a Debian image root")
    distro, distro_version = os_release(args.root)
    created = args.created or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    packages = []
    relationships = []
    root_id = spdx_id("allocguard-image")
    packages.append(
        {
            "SPDXID": root_id,
            "name": args.image,
            "versionInfo": args.version,
            "primaryPackagePurpose": "CONTAINER",
            "downloadLocation": "NOASSERTION",
            "licenseConcluded": "NOASSERTION",
            "licenseDeclared": "NOASSERTION",
            "copyrightText": "NOASSERTION",
        }
    )
    binary = args.root / "usr/local/bin/allocguard"
    if binary.is_file():
        packages.append(
            {
                "SPDXID": spdx_id("allocguard-binary"),
                "name": "allocguard",
                "versionInfo": args.version,
                "primaryPackagePurpose": "APPLICATION",
                "downloadLocation": "https://github.com/allocguard/allocguard",
                "licenseConcluded": "Apache-2.0",
                "licenseDeclared": "Apache-2.0",
                "copyrightText": "NOASSERTION",
                "checksums": [{"algorithm": "SHA256", "checksumValue": sha256(binary)}],
            }
        )
    for p in dpkg_packages(status):
        purl = f"pkg:deb/{distro}/{p['name']}@{p['version']}?arch={p['arch']}"
        if distro_version:
            purl += f"&distro={distro}-{distro_version}"
        packages.append(
            {
                "SPDXID": spdx_id(f"deb-{p['name']}-{p['arch']}"),
                "name": p["name"],
                "versionInfo": p["version"],
                "sourceInfo": f"Debian source package {p['source']}",
                "primaryPackagePurpose": "LIBRARY",
                "downloadLocation": "NOASSERTION",
                "licenseConcluded": "NOASSERTION",
                "licenseDeclared": "NOASSERTION",
                "copyrightText": "NOASSERTION",
                "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl", "referenceLocator": purl}],
            }
        )
    manifests = sorted((args.root / "opt/allocguard/lib").glob("*/*.json"))
    for path in manifests:
        m = json.loads(path.read_text(encoding="utf-8"))
        library = path.parent / m["library"]
        # The stats agent is built from this repository's own source
        # (allocators/stats_agent/build-agent.sh), not from a Debian package.
        own = m["source_package"] == "allocguard"
        version = args.version if own else m["source_version"]
        source = (f"built from allocguard {args.version} (allocators/stats_agent, {m['source_version']})"
                  if own else f"built from Debian source package {m['source_package']} {m['source_version']}")
        purl = (f"pkg:github/allocguard/allocguard@{args.version}" if own
                else f"pkg:deb/debian/{m['source_package']}@{m['source_version']}?arch=source")
        packages.append(
            {
                "SPDXID": spdx_id(f"allocator-{m['libc']}-{m['library']}"),
                "name": f"{m['allocator']} ({m['libc']}, {m['library']})",
                "versionInfo": version,
                "sourceInfo": f"{source} in {m['built_in']} ({m['toolchain']})",
                "primaryPackagePurpose": "LIBRARY",
                "downloadLocation": "NOASSERTION",
                "licenseConcluded": "NOASSERTION",
                "licenseDeclared": "NOASSERTION",
                "copyrightText": "NOASSERTION",
                "checksums": [{"algorithm": "SHA256", "checksumValue": m["sha256"]}],
                "externalRefs": [
                    {
                        "referenceCategory": "PACKAGE-MANAGER",
                        "referenceType": "purl",
                        "referenceLocator": purl,
                    }
                ],
                "comment": f"installed at /{library.relative_to(args.root)}",
            }
        )
        if library.is_file() and sha256(library) != m["sha256"]:
            sys.exit(f"image_sbom.py: {library} does not match the SHA-256 of its manifest {path}")
    for p in packages[1:]:
        relationships.append({"spdxElementId": root_id, "relationshipType": "CONTAINS", "relatedSpdxElement": p["SPDXID"]})
    relationships.insert(0, {"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES", "relatedSpdxElement": root_id})

    document = {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": f"{args.image} packages",
        "documentNamespace": f"https://github.com/allocguard/allocguard/releases/{args.version}/sbom",
        "creationInfo": {"created": created, "creators": ["Tool: allocguard scripts/image_sbom.py"]},
        "packages": packages,
        "relationships": relationships,
    }
    json.dump(document, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")
    debs = sum(1 for p in packages if p["SPDXID"].startswith("SPDXRef-deb-"))
    print(f"image_sbom.py: {debs} Debian packages, {len(manifests)} allocator libraries", file=sys.stderr)


if __name__ == "__main__":
    main()
