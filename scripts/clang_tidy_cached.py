#!/usr/bin/env python3
"""Runs clang-tidy (.clang-tidy) over the C++ sources, in parallel, and
takes the result of a file that has not changed from a cache.

    scripts/clang_tidy_cached.py [--build build/release] [-j N] [--cache DIR]
                                 [--deps build|compiler] [--dry-run]
                                 [--changed-since COMMIT | FILE...]

The sources are those of the build's compile database (CMake writes it,
CMAKE_EXPORT_COMPILE_COMMANDS) and the C++ files no release target compiles
(the fuzz targets of fuzz/, which only the sanitizer build makes, and
allocators/tests/cxx_probe.cc), which are checked with the flags of the
operator's sources. FILE... checks only those. --changed-since COMMIT
checks only the sources that differ from COMMIT (in the work tree, new
files included) and those that include a header that differs; all of them
when .clang-tidy differs, or when COMMIT is not in the repository.

A file's result is cached outside the repository (default
/var/cache/allocguard/clang-tidy, or $ALLOCGUARD_CACHE/clang-tidy) under a
key made of clang-tidy's version, its configuration (.clang-tidy, comments
aside), the file's compile flags, and
the contents of the file and of every header it includes. The headers are
those of the build's dependency log (ninja -t deps), or of the compiler's
-M output for a file whose object is missing or older than one of them, and
for every file with --deps compiler (while the build runs).
Paths below the repository are hashed relative to it, so that a fresh clone
elsewhere (as CI makes) finds the results of an earlier one.

A header's findings are reported once, though every file that includes it
reports them. Exit status: 0 clean, 1 findings (printed), 2 clang-tidy
failed to run.
"""

import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))
# Stands for the repository's path in cache keys and cached output.
ROOT_MARK = "@ALLOCGUARD_ROOT@"
# Files no target of the release build compiles, checked with the flags of
# UNLISTED_FLAGS_FROM (directories are scanned for *.cc).
UNLISTED = ["fuzz", "allocators/tests/cxx_probe.cc"]
UNLISTED_FLAGS_FROM = "operator/common/status.cc"
# clang-tidy parses with clang the flags written for GCC: it does not know
# some of GCC's warning options.
EXTRA_ARGS = ["--extra-arg=-Wno-unknown-warning-option"]
# Entries unused for this long are removed from the cache.
CACHE_DAYS = 30
FINDING = re.compile(r"^(.+?):(\d+):(\d+): (warning|error): (.*) \[([^\]]+)\]$")


def rel(path):
    return os.path.relpath(path, ROOT)


def command_args(entry):
    if "arguments" in entry:
        return list(entry["arguments"])
    return shlex.split(entry["command"])


def without_output(args):
    """The compile arguments without -o FILE and -c: what the result depends on."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a != "-c":
            out.append(a)
    return out


def output_of(args):
    return args[args.index("-o") + 1] if "-o" in args else None


def load_entries(build):
    with open(os.path.join(build, "compile_commands.json")) as f:
        db = json.load(f)
    entries = {}
    for e in db:
        path = os.path.realpath(os.path.join(e["directory"], e["file"]))
        if path.startswith(ROOT + os.sep) and not path.startswith(os.path.realpath(build)):
            entries[path] = {"directory": e["directory"], "file": path,
                             "arguments": command_args(e)}
    template = entries.get(os.path.join(ROOT, UNLISTED_FLAGS_FROM))
    if template is None:
        sys.exit(f"clang_tidy_cached: {UNLISTED_FLAGS_FROM} is not in the compile database")
    extra = []
    for u in UNLISTED:
        p = os.path.join(ROOT, u)
        if os.path.isdir(p):
            extra += [os.path.join(p, n) for n in sorted(os.listdir(p)) if n.endswith(".cc")]
        elif os.path.exists(p):
            extra.append(p)
    for path in extra:
        if path in entries:
            continue
        args = without_output(template["arguments"])
        src = template["file"]
        args = [path if a == src else a for a in args] + ["-c"]
        entries[path] = {"directory": template["directory"], "file": path, "arguments": args}
    return entries


def ninja_deps(build):
    """object path (absolute) -> (valid, [dependency paths, absolute])."""
    try:
        out = subprocess.run(["ninja", "-C", build, "-t", "deps"], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    deps, current = {}, None
    for line in out.splitlines():
        if not line:
            current = None
        elif not line.startswith(" "):
            m = re.match(r"^(.*): #deps \d+, deps mtime \d+ \((VALID|STALE)\)$", line)
            if m:
                current = os.path.normpath(os.path.join(build, m.group(1)))
                deps[current] = (m.group(2) == "VALID", [])
        elif current is not None:
            deps[current][1].append(os.path.normpath(os.path.join(build, line.strip())))
    return deps


def compiler_deps(entry):
    args = without_output(entry["arguments"]) + ["-M", "-MF", "/dev/stdout"]
    try:
        out = subprocess.run(args, cwd=entry["directory"], capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    words = out.replace("\\\n", " ").split(":", 1)[1].split()
    return [os.path.normpath(os.path.join(entry["directory"], w)) for w in words]


class Hasher:
    def __init__(self):
        self.memo = {}

    def file(self, path):
        h = self.memo.get(path)
        if h is None:
            try:
                with open(path, "rb") as f:
                    h = hashlib.sha256(f.read()).hexdigest()
            except OSError:
                h = "missing"
            self.memo[path] = h
        return h


def key_of(entry, deps, hasher, fixed):
    h = hashlib.sha256(fixed)
    root_args = [a.replace(ROOT, ROOT_MARK) for a in without_output(entry["arguments"])]
    h.update(json.dumps(root_args).encode())
    # Sorted by the name hashed, not by the path: a clone under /tmp and one
    # under /work order their own files before and after /usr/include, and
    # must still reach the same key.
    named = {(ROOT_MARK + "/" + rel(d) if d.startswith(ROOT + os.sep) else d): d
             for d in set(deps) | {entry["file"]}}
    for name in sorted(named):
        h.update(f"{name}\0{hasher.file(named[name])}\n".encode())
    return h.hexdigest()


def dependencies(entry, ninja):
    """The headers entry's file includes (absolute paths), from the build's
    dependency log when its object is up to date, else from the compiler."""
    out = output_of(entry["arguments"])
    if out:
        obj = os.path.normpath(os.path.join(entry["directory"], out))
        record = ninja.get(obj)
        if record and record[0] and os.path.exists(obj):
            built = os.path.getmtime(obj)
            try:
                if all(os.path.getmtime(d) <= built for d in record[1]):
                    return record[1]
            except OSError:
                pass
    return compiler_deps(entry)


def run_tidy(entry, db_dir):
    proc = subprocess.run(["clang-tidy", "--quiet", "-p", db_dir, *EXTRA_ARGS, entry["file"]],
                          capture_output=True, text=True)
    # 1 with findings is a result; any other failure (a crash, a missing
    # compile command) is not, and is not cached.
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not proc.stdout.strip()):
        return None, proc.stdout + proc.stderr
    return proc.stdout, None


def split_findings(text):
    """The findings of one clang-tidy output: {(path, line, col, check): block}."""
    blocks, current = {}, None
    for line in text.splitlines():
        m = FINDING.match(line)
        if m:
            key = (m.group(1), int(m.group(2)), int(m.group(3)),
                   m.group(6).replace(",-warnings-as-errors", ""))
            current = blocks.setdefault(key, [])
            if current:  # the same finding again from another template instance
                current = []
            current.append(line)
        elif current is not None:
            current.append(line)
    return {k: "\n".join(v) for k, v in blocks.items()}


def changed_since(commit):
    """The absolute paths that differ between `commit` and the work tree
    (new untracked files included), or None when `commit` is unknown."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    if git("cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        return None
    diff = git("diff", "--name-only", commit, "--")
    new = git("ls-files", "--others", "--exclude-standard")
    if diff.returncode != 0 or new.returncode != 0:
        return None
    names = diff.stdout.split() + new.stdout.split()
    return {os.path.join(ROOT, n) for n in names}


def prune(cache):
    limit = time.time() - CACHE_DAYS * 86400
    for sub in os.listdir(cache):
        d = os.path.join(cache, sub)
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            p = os.path.join(d, name)
            try:
                if os.path.getmtime(p) < limit:
                    os.remove(p)
            except OSError:
                pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build/release"))
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count())
    default_cache = os.path.join(os.environ.get("ALLOCGUARD_CACHE", "/var/cache/allocguard"),
                                 "clang-tidy")
    parser.add_argument("--cache", default=default_cache)
    # "compiler" when the build may be running: its dependency log is then
    # being written.
    parser.add_argument("--deps", choices=["build", "compiler"], default="build",
                        help="where the included headers are read from")
    parser.add_argument("--dry-run", action="store_true",
                        help="only list the files that are not in the cache")
    parser.add_argument("--changed-since", metavar="COMMIT",
                        help="only the sources that differ from COMMIT, or include a header "
                             "that does")
    parser.add_argument("files", nargs="*")
    opts = parser.parse_args()
    if opts.changed_since and opts.files:
        parser.error("--changed-since and FILE... do not go together")
    start = time.monotonic()
    build = os.path.realpath(opts.build)

    entries = load_entries(build)
    if opts.files:
        chosen = {}
        for f in opts.files:
            p = os.path.realpath(f)
            if p not in entries:
                sys.exit(f"clang_tidy_cached: {f} is not in the compile database")
            chosen[p] = entries[p]
        entries = chosen

    version = subprocess.run(["clang-tidy", "--version"], capture_output=True, text=True,
                             check=True).stdout
    # The configuration as clang-tidy reads it: a comment in .clang-tidy
    # does not change a result.
    config = subprocess.run(["clang-tidy", "--dump-config"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout
    fixed = "\0".join([version, config, json.dumps(EXTRA_ARGS)]).encode()

    os.makedirs(opts.cache, exist_ok=True)
    ninja = ninja_deps(build) if opts.deps == "build" else {}
    hasher = Hasher()
    keys = {}
    with concurrent.futures.ThreadPoolExecutor(opts.jobs) as pool:
        deps = dict(zip(entries, pool.map(lambda e: dependencies(e, ninja), entries.values())))
    for path, entry in entries.items():
        if deps[path] is not None:
            keys[path] = key_of(entry, deps[path], hasher, fixed)

    scope = "every source"
    if opts.changed_since:
        changed = changed_since(opts.changed_since)
        if changed is None:
            scope = f"every source ({opts.changed_since} is not in this repository)"
        elif os.path.join(ROOT, ".clang-tidy") in changed:
            scope = f"every source (.clang-tidy changed since {opts.changed_since})"
        else:
            # A file whose headers are unknown (deps None) is checked.
            entries = {p: e for p, e in entries.items()
                       if p in changed or deps[p] is None or changed & set(deps[p])}
            scope = f"the sources changed since {opts.changed_since[:12]} or including a changed header"

    outputs, todo = {}, []
    for path in sorted(entries):
        key = keys.get(path)
        cached = os.path.join(opts.cache, key[:2], key) if key else None
        if cached and os.path.exists(cached):
            with open(cached) as f:
                outputs[path] = f.read().replace(ROOT_MARK, ROOT)
            os.utime(cached)
        else:
            todo.append(path)

    if opts.dry_run:
        for path in todo:
            print(rel(path))
        print(f"clang-tidy: {scope}: {len(entries)} files, {len(todo)} to check, "
              f"{len(entries) - len(todo)} in the cache ({opts.cache})")
        return 0

    failures = []
    with tempfile.TemporaryDirectory() as db_dir:
        with open(os.path.join(db_dir, "compile_commands.json"), "w") as f:
            json.dump([{"directory": e["directory"], "file": e["file"],
                        "arguments": e["arguments"]} for e in entries.values()], f)
        with concurrent.futures.ThreadPoolExecutor(opts.jobs) as pool:
            futures = {pool.submit(run_tidy, entries[p], db_dir): p for p in todo}
            for fut in concurrent.futures.as_completed(futures):
                path = futures[fut]
                out, error = fut.result()
                if out is None:
                    failures.append((path, error))
                    continue
                outputs[path] = out
                key = keys.get(path)
                # A file edited while clang-tidy read it: its result is not
                # that of the key's contents.
                if key and key_of(entries[path], deps[path], Hasher(), fixed) != key:
                    key = None
                if key:
                    d = os.path.join(opts.cache, key[:2])
                    os.makedirs(d, exist_ok=True)
                    tmp = os.path.join(d, f".{key}.{os.getpid()}")
                    with open(tmp, "w") as f:
                        f.write(out.replace(ROOT, ROOT_MARK))
                    os.replace(tmp, os.path.join(d, key))
    prune(opts.cache)

    findings = {}
    for path in sorted(outputs):
        for k, block in split_findings(outputs[path]).items():
            findings.setdefault(k, block)
    for k in sorted(findings):
        print(findings[k].replace(ROOT + os.sep, ""))
    for path, error in failures:
        print(f"clang-tidy failed on {rel(path)}:\n{error}", file=sys.stderr)
    counts = {}
    for k in findings:
        counts[k[3]] = counts.get(k[3], 0) + 1
    if counts:
        print("findings per check: " + ", ".join(
            f"{c} {n}" for c, n in sorted(counts.items(), key=lambda x: (-x[1], x[0]))))
    print(f"clang-tidy: {scope}: {len(entries)} files, {len(todo)} checked, "
          f"{len(entries) - len(todo)} from the cache ({opts.cache}), "
          f"{len(findings)} findings, {time.monotonic() - start:.1f} s with -j {opts.jobs}")
    if failures:
        return 2
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
