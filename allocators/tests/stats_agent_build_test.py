#!/usr/bin/env python3
"""The stats agent as allocators/build.sh builds it: built, current, and
publishing books in real processes of the rootfs it is built for.

Needs root and the output of allocators/build.sh (the libraries and the
build chroots it keeps: the oldest suite's for glibc, bookworm's with musl).
Without them it fails and says what to run: it is labelled `manual` in ctest
because that build takes minutes, not because it may be left out.

What it shows:
- build.sh's output holds the agent for both libcs, each with its manifest
  (allocator "stats-agent", source package "allocguard", the books format
  of allocator_books.h as its version, the suite it was built in, the file's
  own SHA-256), NEEDing the C library only (no C++ runtime, no libgcc_s),
  and the glibc build requiring no glibc newer than the oldest rootfs';
- the output is current: <dir>/.stats-agent is the digest of the agent's
  sources as build.sh computes it, so build.sh would rebuild nothing;
- build.sh's agent path: in a scratch cache holding the allocators but an
  agent older than its sources, build.sh rebuilds the agent for both libcs
  in the build chroots and leaves every allocator file as it was;
- that agent, preloaded into books_workload (allocators/stats_agent/tests)
  compiled inside each rootfs, publishes books-<PID> under the process's
  own PID with a valid checksum, and removes it at exit (status 0):
  Debian 11 with glibc's malloc (glibc 2.31: the mallinfo() path, flag
  MALLINFO_INT) and with the glibc jemalloc build; Debian 12 with glibc's
  malloc (mallinfo2); a musl process with musl's malloc (allocator unknown,
  no split, the object musl's loader) and with the musl jemalloc build.
  Where there is a split, in use grows by the 31.25 MiB the program
  allocates (99 % to 106 % of it plus 1 MiB, as stats_agent_integration_test
  accepts).
"""

import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import build_rootfs  # allocators/tests/build_rootfs.py, beside this file

HERE = os.path.dirname(os.path.abspath(__file__))
ALLOCATORS = os.path.dirname(HERE)
AGENT_DIR = os.path.join(ALLOCATORS, "stats_agent")
AGENT = "liballocguard_stats.so"


def versions():
    """Paths and suites computed by allocators/versions.sh, as build.sh does."""
    script = (f'source "{ALLOCATORS}/versions.sh"; allocators_dir; '
              'allocators_rootfs "$GLIBC_BUILD_SUITE"; allocators_rootfs "$MUSL_BUILD_SUITE"; '
              'echo "$GLIBC_BUILD_SUITE"; echo "$MUSL_BUILD_SUITE"; echo "$ALLOCATORS_CACHE"; '
              'allocators_key')
    out = subprocess.run(["bash", "-c", script], check=True, capture_output=True,
                         text=True).stdout.split("\n")
    return out[:7]


BUILD, OLD_ROOT, NEW_ROOT, GLIBC_SUITE, MUSL_SUITE, CACHE, KEY = versions()


def missing_prerequisites():
    return build_rootfs.missing(BUILD, (OLD_ROOT, NEW_ROOT))


def agent_digest():
    """The digest build.sh keeps in <dir>/.stats-agent (`cat ... | sha256sum | cut -c1-16`)."""
    h = hashlib.sha256()
    for name in ("stats_agent.c", "allocator_books.h", "build-agent.sh"):
        with open(os.path.join(AGENT_DIR, name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def books_version():
    with open(os.path.join(AGENT_DIR, "allocator_books.h")) as f:
        return re.search(r"#define AG_BOOKS_VERSION (\d+)u", f.read()).group(1)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def glibc_tuple(text):
    return tuple(int(n) for n in re.findall(r"\d+", text))


def note(text):
    print("  " + text, file=sys.stderr, flush=True)


# allocator_books.h, version 1: 280 bytes, little-endian, no padding.
BOOKS = struct.Struct("<8sIIiIIIQqQQQQ16Q64sQ")
ALLOCATORS_BY_ID = {0: "unknown", 1: "glibc", 2: "jemalloc", 3: "mimalloc", 4: "tcmalloc"}
NO_SPLIT, MALLINFO_INT = 0x1, 0x2
MIB = 1 << 20


def fnv1a64(data):
    h = 14695981039346656037
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def read_books(path):
    """The sample in a books file as a dict, or None while it is absent or
    caught half written (a checksum that disagrees; the agent rewrites the
    file in place)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    if len(data) != BOOKS.size:
        raise AssertionError(f"{path}: {len(data)} bytes, a version 1 sample has {BOOKS.size}")
    (magic, version, size, pid, allocator, flags, interval_ms, sequence, sample_ns, _cpu,
     in_use, retained, held, *rest) = BOOKS.unpack(data)
    obj, checksum = rest[16], rest[17]
    if checksum != fnv1a64(data[:272]):
        return None
    return {"magic": magic, "version": version, "size": size, "pid": pid,
            "allocator": ALLOCATORS_BY_ID.get(allocator, str(allocator)), "flags": flags,
            "interval_ms": interval_ms, "sequence": sequence, "sample_ns": sample_ns,
            "in_use": in_use, "retained": retained, "held": held,
            "object": obj.split(b"\0", 1)[0].decode(errors="replace")}


class Rootfs(build_rootfs.Rootfs):
    """A build chroot of allocators/build.sh with a scratch directory."""

    def __init__(self, root):
        super().__init__(root, "allocguard-agent-")

    def describe(self):
        return f"Debian {self.debian_version()} (glibc {self.glibc_version()})"

    def compile(self, compiler, name):
        src = self.copy_in(os.path.join(AGENT_DIR, "tests", "books_workload.c"), "src")
        out = f"{self.inside}/{name}"
        cc = subprocess.run(["chroot", self.root, compiler, "-O2", "-std=gnu11", "-o", out, src],
                            capture_output=True, text=True, timeout=120)
        if cc.returncode != 0:
            raise RuntimeError(f"{compiler} in {self.root}: {cc.stderr}")
        return out


def run_workload(test, rootfs, program, preload, books_dir):
    """Starts PROGRAM in ROOTFS with PRELOAD and the agent writing to
    BOOKS_DIR (as the process sees it) every 50 ms; allocates 31.25 MiB;
    returns the books before and after that and whether the file went at
    exit."""
    outside = rootfs.root + books_dir
    os.makedirs(outside, exist_ok=True)
    argv = ["chroot", rootfs.root, "env", "-i", "PATH=/usr/bin:/bin", f"LD_PRELOAD={preload}",
            f"ALLOCGUARD_STATS_DIR={books_dir}", "ALLOCGUARD_STATS_INTERVAL_MS=50", program]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as proc:
        try:
            return _drive(test, proc, outside)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _drive(test, proc, outside):
    """run_workload's conversation with the running workload."""
    first = proc.stdout.readline()
    test.assertRegex(first, r"^pid \d+$", proc.stderr.read() if proc.poll() is not None else first)
    pid = int(first.split()[1])
    path = os.path.join(outside, f"books-{pid}")

    def sample_after(t_ns):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            b = read_books(path)
            if b is not None and b["sample_ns"] > t_ns:
                return b
            time.sleep(0.02)
        test.fail(f"no books sample in {path} after {t_ns} within 10 s: "
                  f"{sorted(os.listdir(outside))}")

    before = sample_after(0)
    proc.stdin.write("alloc 8192 4000\n")
    proc.stdin.flush()
    test.assertEqual(proc.stdout.readline().strip(), f"live {8192 * 4000}")
    after = sample_after(time.time_ns())
    proc.stdin.write("exit\n")
    proc.stdin.flush()
    status = proc.wait(timeout=30)
    left = sorted(os.listdir(outside))
    return pid, before, after, status, left, proc.stderr.read()


class BuiltAgent(unittest.TestCase):
    """What build.sh left in its output directory."""

    def test_both_libcs_with_manifests(self):
        suites = {"glibc": GLIBC_SUITE, "musl": MUSL_SUITE}
        for libc, suite in suites.items():
            with self.subTest(libc=libc):
                lib = os.path.join(BUILD, libc, AGENT)
                self.assertTrue(os.path.isfile(lib), f"build.sh built no {libc} agent: {lib}")
                with open(lib + ".json") as f:
                    m = json.load(f)
                self.assertEqual((m["library"], m["soname"], m["allocator"], m["libc"]),
                                 (AGENT, AGENT, "stats-agent", libc))
                self.assertEqual((m["source_package"], m["source_version"], m["built_in"]),
                                 ("allocguard", f"books-format-{books_version()}", suite))
                self.assertEqual(m["sha256"], sha256(lib))
                allowed = ({"libc.so.6", "libdl.so.2", "libpthread.so.0"} if libc == "glibc"
                           else {"libc.so"})
                self.assertTrue(set(m["needed"]) <= allowed, m["needed"])
                self.assertIn("libc.so.6" if libc == "glibc" else "libc.so", m["needed"])
                note(f"{libc}/{AGENT}: built in {suite}, NEEDED {', '.join(m['needed'])}"
                     + (f", requires {m['max_glibc_version']}" if libc == "glibc" else ""))

    def test_glibc_agent_needs_no_newer_glibc_than_the_oldest_rootfs(self):
        with open(os.path.join(BUILD, "glibc", AGENT + ".json")) as f:
            need = json.load(f)["max_glibc_version"]
        have = Rootfs(OLD_ROOT)
        try:
            described = have.describe()
        finally:
            have.close()
        self.assertLessEqual(glibc_tuple(need), glibc_tuple(described.split("glibc ")[1]),
                             f"the agent requires {need}, {described}")

    def test_output_is_current(self):
        with open(os.path.join(BUILD, ".stats-agent")) as f:
            kept = f.read().strip()
        self.assertEqual(kept, agent_digest(),
                         "the agent in the build output is older than its sources: "
                         "run allocators/build.sh")


class AgentPath(unittest.TestCase):
    """build.sh with the allocators present and the agent stale rebuilds the
    agent alone, in a scratch cache that shares the build chroots."""

    @classmethod
    def setUpClass(cls):
        cls.cache = tempfile.mkdtemp(prefix="allocguard-agent-cache-")
        allocators = os.path.join(cls.cache, "allocators")
        out = os.path.join(allocators, KEY)
        shutil.copytree(BUILD, out, symlinks=True)
        for libc in ("glibc", "musl"):
            for name in (AGENT, AGENT + ".json"):
                os.remove(os.path.join(out, libc, name))
        with open(os.path.join(out, ".stats-agent"), "w") as f:
            f.write("an older agent\n")
        os.symlink(os.path.join(CACHE, "rootfs"), os.path.join(allocators, "rootfs"))
        cls.before = {p: (sha256(p), os.stat(p).st_mtime_ns)
                      for p in glob.glob(os.path.join(out, "*", "*"))}
        # The chroots are shared with the real cache: hold its build lock.
        os.makedirs(CACHE, exist_ok=True)
        with open(os.path.join(CACHE, ".build.lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            env = dict(os.environ, ALLOCGUARD_CACHE=cls.cache)
            cls.result = subprocess.run(["nice", "-n", "19", os.path.join(ALLOCATORS, "build.sh")],
                                        env=env, capture_output=True, text=True, timeout=900)
        cls.out = out

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.cache, ignore_errors=True)

    def test_rebuilds_the_agent_alone(self):
        r = self.result
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(r.stdout.strip(), self.out)
        self.assertIn("stats agent built in", r.stderr)
        self.assertNotIn("glibc builds in", r.stderr)
        for libc in ("glibc", "musl"):
            with self.subTest(libc=libc):
                lib = os.path.join(self.out, libc, AGENT)
                self.assertTrue(os.path.isfile(lib), r.stderr[-2000:])
                with open(lib + ".json") as f:
                    self.assertEqual(json.load(f)["sha256"], sha256(lib))
        with open(os.path.join(self.out, ".stats-agent")) as f:
            self.assertEqual(f.read().strip(), agent_digest())
        after = {p: (sha256(p), os.stat(p).st_mtime_ns) for p in self.before}
        self.assertEqual(after, self.before, "build.sh touched the allocators")
        took = re.search(r"stats agent built in \d+ s", r.stderr).group(0)
        note(f"build.sh rebuilt the agent alone ({took}); "
             f"{len(self.before)} allocator files untouched")

    def test_rebuilt_agent_is_what_the_output_holds(self):
        # The same sources in the same chroots: the same bytes (build-agent.sh
        # strips, and gcc writes no time stamps).
        for libc in ("glibc", "musl"):
            with self.subTest(libc=libc):
                self.assertEqual(sha256(os.path.join(self.out, libc, AGENT)),
                                 sha256(os.path.join(BUILD, libc, AGENT)))


class AgentPublishes(unittest.TestCase):
    """The built agent preloaded into processes of the rootfs it targets."""

    @classmethod
    def setUpClass(cls):
        cls.old = Rootfs(OLD_ROOT)
        cls.new = Rootfs(NEW_ROOT)
        cls.old_workload = cls.old.compile("gcc", "books_workload")
        cls.new_workload = cls.new.compile("gcc", "books_workload")
        cls.musl_workload = cls.new.compile("musl-gcc", "books_workload-musl")

    @classmethod
    def tearDownClass(cls):
        cls.old.close()
        cls.new.close()

    def publishes(self, rootfs, libc, workload, allocator=None):
        agent = rootfs.copy_in(os.path.join(BUILD, libc, AGENT), libc)
        preload = agent
        if allocator:
            preload = rootfs.copy_in(os.path.join(BUILD, libc, allocator), libc) + ":" + agent
        books_dir = rootfs.inside + f"/books-{libc}-{allocator or 'libc'}"
        pid, before, after, status, left, stderr = run_workload(
            self, rootfs, workload, preload, books_dir)
        self.assertEqual(status, 0, stderr)
        self.assertEqual(left, [], "books left after a clean exit")
        for b in (before, after):
            self.assertEqual((b["magic"], b["version"], b["size"], b["pid"]),
                             (b"AGBOOKS\0", 1, 280, pid))
        self.assertGreater(after["sequence"], before["sequence"])
        return before, after

    def check_split(self, before, after):
        live = 8192 * 4000
        grown = after["in_use"] - before["in_use"]
        self.assertFalse(after["flags"] & NO_SPLIT)
        self.assertGreaterEqual(grown, 0.99 * live, after)
        self.assertLessEqual(grown, 1.06 * live + MIB, after)
        self.assertGreaterEqual(after["held"], after["in_use"], after)
        return grown

    def test_debian11_glibc_malloc_through_mallinfo(self):
        before, after = self.publishes(self.old, "glibc", self.old_workload)
        self.assertEqual(after["allocator"], "glibc")
        self.assertRegex(after["object"], r"^libc(\.so\.6|-2\.\d+\.so)$")
        self.assertTrue(after["flags"] & MALLINFO_INT, "glibc 2.31 has no mallinfo2")
        grown = self.check_split(before, after)
        note(f"{self.old.describe()}, glibc malloc: books of {after['object']} (mallinfo(), "
             f"flag MALLINFO_INT), in use +{grown / MIB:.2f} MiB for 31.25 MiB allocated, "
             "removed at exit")

    def test_debian11_jemalloc_build(self):
        before, after = self.publishes(self.old, "glibc", self.old_workload, "libjemalloc.so.2")
        self.assertEqual((after["allocator"], after["object"]), ("jemalloc", "libjemalloc.so.2"))
        self.assertFalse(after["flags"] & MALLINFO_INT)
        grown = self.check_split(before, after)
        note(f"{self.old.describe()}, the glibc jemalloc build: in use +{grown / MIB:.2f} MiB, "
             "removed at exit")

    def test_debian12_glibc_malloc_through_mallinfo2(self):
        before, after = self.publishes(self.new, "glibc", self.new_workload)
        self.assertEqual(after["allocator"], "glibc")
        self.assertFalse(after["flags"] & MALLINFO_INT, "glibc 2.36 has mallinfo2")
        grown = self.check_split(before, after)
        note(f"{self.new.describe()}, glibc malloc: books of {after['object']} (mallinfo2()), "
             f"in use +{grown / MIB:.2f} MiB, removed at exit")

    def test_musl_process_musl_malloc(self):
        _, after = self.publishes(self.new, "musl", self.musl_workload)
        self.assertEqual(after["allocator"], "unknown")
        self.assertIn("musl", after["object"])
        self.assertTrue(after["flags"] & NO_SPLIT)
        self.assertEqual((after["in_use"], after["retained"]), (0, 0))
        note(f"musl process, musl's malloc: books with no split, object {after['object']}, "
             "removed at exit")

    def test_musl_process_jemalloc_build(self):
        before, after = self.publishes(self.new, "musl", self.musl_workload, "libjemalloc.so.2")
        self.assertEqual((after["allocator"], after["object"]), ("jemalloc", "libjemalloc.so.2"))
        grown = self.check_split(before, after)
        note(f"musl process, the musl jemalloc build: in use +{grown / MIB:.2f} MiB, "
             "removed at exit")


if __name__ == "__main__":
    why = missing_prerequisites()
    if why:
        print(f"FAIL: {why}")
        sys.exit(1)
    print(f"allocator build: {BUILD}", file=sys.stderr)
    unittest.main(verbosity=2)
