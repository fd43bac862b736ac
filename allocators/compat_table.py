#!/usr/bin/env python3
"""Turns the allocator build manifests into the compatibility table of
docs/allocators.md.

    compat_table.py --summary DIR          # plain text, for the build log
    compat_table.py --markdown DIR         # the generated section
    compat_table.py --update DOC DIR [--fixture FIXTURE_DIR]
                                           # rewrite DOC's generated section
                                           # (and refresh the fixture copy)
    compat_table.py --check DOC DIR        # exit 1 and show a diff if DOC's
                                           # section differs from DIR's
    compat_table.py --check-shipped DOC DIR
                                           # exit 1 and show a diff if DOC's
                                           # rows of the builds (all but Debian's
                                           # own packages) differ from DIR's

DIR is a build output directory of allocators/build.sh (subdirectories with
one <library>.json manifest per library) or a copy of its manifests.
--check-shipped takes the manifests an image ships (a copy of the image's
/opt/allocguard/lib, e2e/images/check-allocguard.sh makes one): the image
carries the builds only, and the table must describe exactly those.
Every figure in the table comes from a manifest, i.e. from the built file;
only the glibc versions of well-known distributions below are reference
facts. The build environment's C library appears as its upstream version
(glibc 2.31, not the Debian revision 2.31-13+deb11u11): the symbol versions a
library can require are those of the upstream release, and a host build and
an image build made a few security updates apart describe the same library.
"""

import argparse
import difflib
import json
import os
import re
import shutil
import sys

BEGIN = "<!-- BEGIN GENERATED: allocators/compat_table.py; do not edit by hand -->"
END = "<!-- END GENERATED -->"

# The glibc each release ships (its libc6 package's upstream version).
DISTRO_GLIBC = [
    ("RHEL/CentOS 7", (2, 17)),
    ("Amazon Linux 2", (2, 26)),
    ("RHEL 8", (2, 28)),
    ("Debian 10", (2, 28)),
    ("Ubuntu 20.04", (2, 31)),
    ("Debian 11", (2, 31)),
    ("RHEL 9", (2, 34)),
    ("Ubuntu 22.04", (2, 35)),
    ("Debian 12", (2, 36)),
]

LIBC_ORDER = {"glibc": 0, "musl": 1}
ALLOCATOR_ORDER = {"jemalloc": 0, "mimalloc": 1, "tcmalloc": 2}


def load(directory):
    """Every manifest under directory, keyed by its path relative to it."""
    manifests = []
    for dirpath, _, files in os.walk(directory):
        for name in files:
            if not name.endswith(".json"):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8") as f:
                m = json.load(f)
            m["_dir"] = os.path.relpath(dirpath, directory)
            manifests.append(m)
    if not manifests:
        raise SystemExit(f"compat_table.py: no manifest (*.json) under {directory}")
    # Builds first, Debian's own packages (built_in "<suite> (Debian package)") last.
    manifests.sort(key=lambda m: ("Debian package" in m["built_in"],
                                  LIBC_ORDER.get(m["libc"], 9),
                                  ALLOCATOR_ORDER.get(m["allocator"], 9),
                                  m["library"]))
    return manifests


def glibc_tuple(version):
    return tuple(int(n) for n in re.findall(r"\d+", version))


def fails_on(m):
    if m["libc"] != "glibc":
        return "every glibc distribution"
    need = glibc_tuple(m["max_glibc_version"])
    names = [name for name, have in DISTRO_GLIBC if have < need]
    return ", ".join(names) if names else "none of the listed"


def requires(m):
    if m["libc"] == "glibc":
        v = m["max_glibc_version"].removeprefix("GLIBC_")
        symbols = m["max_glibc_symbols"]
        shown = ", ".join(symbols[:3])
        if len(symbols) > 3:
            shown += f" and {len(symbols) - 3} more"
        return f"glibc ≥ {v} ({shown})"
    return "musl"


def built_in(m):
    """'bullseye: gcc 10.2.1, glibc 2.31-13+deb11u11' from the manifest."""
    toolchain = m.get("toolchain", "")
    parts = []
    compiler = re.search(r"compiler: (?:\S+-)?(gcc|clang) \([^)]*\) ([^;\s]+)", toolchain)
    if compiler:
        wrapper = "musl-gcc over " if m["libc"] == "musl" else ""
        parts.append(f"{wrapper}{compiler.group(1)} {compiler.group(2)}")
    libc = re.search(r"libc: (\S+) ([^;\s]+)", toolchain)
    if libc:
        upstream = re.sub(r"-[^-]*$", "", libc.group(2))  # 2.31-13+deb11u11 -> 2.31
        parts.append(f"{libc.group(1)} {upstream}")
    return m["built_in"] + (": " + ", ".join(parts) if parts else "")


def table_rows(manifests):
    rows = []
    for m in manifests:
        rows.append("| {} | {} | {} {} | {} | {} | {} | {} |".format(
            f"`{m['_dir']}/{m['library']}`", m["libc"], m["source_package"],
            m["source_version"], built_in(m), requires(m),
            ", ".join(f"`{n}`" for n in m["needed"]), fails_on(m)))
    return rows


def markdown(manifests):
    rows = [
        "| Library | libc | Built from | Built in | Requires | NEEDED | Fails to load on |",
        "|---|---|---|---|---|---|---|",
    ] + table_rows(manifests)
    listed = ", ".join(f"{name} {'.'.join(map(str, v))}" for name, v in DISTRO_GLIBC)
    rows.append("")
    rows.append(f"glibc of the listed distributions: {listed}.")
    return "\n".join(rows) + "\n"


def summary(manifests):
    lines = []
    for m in manifests:
        req = m.get("max_glibc_version", "-")
        lines.append(f"  {m['_dir'] + '/' + m['library']:<40} {req:<12} "
                     f"NEEDED {' '.join(m['needed'])}")
    return "\n".join(lines) + "\n"


def section(doc_text):
    try:
        start = doc_text.index(BEGIN) + len(BEGIN)
        end = doc_text.index(END, start)
    except ValueError:
        raise SystemExit(f"compat_table.py: markers {BEGIN!r} ... {END!r} not found")
    return start, end


def check_shipped(doc, text, directory):
    """DOC's rows of the builds equal the rows DIR's manifests generate."""
    start, end = section(text)
    have = [line for line in text[start:end].splitlines()
            if line.startswith("| `") and "(Debian package)" not in line]
    manifests = load(directory)
    packaged = [m["library"] for m in manifests if "Debian package" in m["built_in"]]
    if packaged:
        print(f"{directory}: holds Debian's own packages ({', '.join(packaged)}), "
              "which an image does not ship")
        return 1
    want = table_rows(manifests)
    if have == want:
        print(f"{doc}: the compatibility table's {len(want)} build rows match {directory}")
        return 0
    sys.stdout.writelines(difflib.unified_diff(
        [r + "\n" for r in have], [r + "\n" for r in want],
        f"{doc} (committed, build rows)", f"generated from {directory}"))
    print(f"{doc}: the compatibility table's build rows differ from what {directory} ships")
    return 1


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--summary", metavar="DIR")
    mode.add_argument("--markdown", metavar="DIR")
    mode.add_argument("--update", nargs=2, metavar=("DOC", "DIR"))
    mode.add_argument("--check", nargs=2, metavar=("DOC", "DIR"))
    mode.add_argument("--check-shipped", nargs=2, metavar=("DOC", "DIR"))
    p.add_argument("--fixture", metavar="FIXTURE_DIR",
                   help="with --update: replace this copy of the manifests")
    args = p.parse_args()

    if args.summary:
        sys.stdout.write(summary(load(args.summary)))
        return 0
    if args.markdown:
        sys.stdout.write(markdown(load(args.markdown)))
        return 0

    doc, directory = args.update or args.check or args.check_shipped
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    if args.check_shipped:
        return check_shipped(doc, text, directory)
    start, end = section(text)
    want = "\n" + markdown(load(directory))
    have = text[start:end]
    if args.check:
        if have == want:
            print(f"{doc}: the compatibility table matches {directory}")
            return 0
        sys.stdout.writelines(difflib.unified_diff(
            have.splitlines(True), want.splitlines(True),
            f"{doc} (committed)", f"generated from {directory}"))
        print(f"{doc}: the compatibility table differs from {directory}; "
              "regenerate it as docs/allocators.md (Tests) describes")
        return 1
    with open(doc, "w", encoding="utf-8") as f:
        f.write(text[:start] + want + text[end:])
    if args.fixture:
        if os.path.abspath(args.fixture) != os.path.abspath(directory):
            shutil.rmtree(args.fixture, ignore_errors=True)
            for m in load(directory):
                d = os.path.join(args.fixture, m.pop("_dir"))
                os.makedirs(d, exist_ok=True)
                with open(os.path.join(d, m["library"] + ".json"), "w",
                          encoding="utf-8") as f:
                    json.dump(m, f, indent=2, sort_keys=True)
                    f.write("\n")
    print(f"{doc}: compatibility table written from {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
