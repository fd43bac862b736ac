#!/usr/bin/env python3
"""Preloads the built allocators into real processes of real Debian rootfs.

Needs root and the output of allocators/build.sh (the libraries and the
build chroots it keeps: the oldest suite's for glibc, bookworm's with musl).
Without them it prints why and exits 77, which ctest reports as skipped.

What it shows, each in a process started with chroot(8) and LD_PRELOAD:
- no glibc build needs libstdc++.so.6 or libgcc_s.so.1;
- every glibc build starts in the oldest rootfs (Debian 11, glibc 2.31) and
  in Debian 12: /bin/echo, C++ programs (apt-cache, cxx_probe.cc: threads
  and exceptions) and malloc_probe.c, which
  reports that malloc is served by the preloaded library, while
  /proc/PID/maps shows the library and the rootfs' own libc mapped;
- Debian 12's own packages of the same sources fail in Debian 11 exactly
  when their manifest requires a newer glibc, with the loader's "version
  `GLIBC_x.y' not found" message; libjemalloc.so.2 fails on GLIBC_2.34;
- every musl build serves malloc in a musl-linked process (musl-gcc);
- a build for the other libc makes the process fail to start.
"""

import glob
import json
import os
import re
import subprocess
import sys
import unittest

import build_rootfs  # allocators/tests/build_rootfs.py, beside this file

HERE = os.path.dirname(os.path.abspath(__file__))
ALLOCATORS = os.path.dirname(HERE)
SKIP = 77


def versions():
    """Paths computed by allocators/versions.sh, as build.sh computes them."""
    script = (f'source "{ALLOCATORS}/versions.sh"; allocators_dir; '
              'allocators_rootfs "$GLIBC_BUILD_SUITE"; '
              'allocators_rootfs "$MUSL_BUILD_SUITE"')
    out = subprocess.run(["bash", "-c", script], check=True,
                         capture_output=True, text=True).stdout.split("\n")
    return out[0], out[1], out[2]


BUILD, OLD_ROOT, MUSL_ROOT = versions()


def missing_prerequisites():
    return build_rootfs.missing(BUILD, (OLD_ROOT, MUSL_ROOT))


def manifest(path):
    with open(path + ".json", encoding="utf-8") as f:
        return json.load(f)


def glibc_tuple(text):
    return tuple(int(n) for n in re.findall(r"\d+", text))


class Rootfs(build_rootfs.Rootfs):
    """A Debian rootfs with a scratch directory for one test run."""

    def __init__(self, root):
        super().__init__(root, "allocguard-preload-")

    def describe(self):
        return f"Debian {self.debian_version()}, {self.libc_version()}"

    def libc_version(self):
        """'glibc 2.31' from the rootfs' own libc6 package."""
        return "glibc " + self.glibc_version()

    def command(self, argv, preload=None):
        env = ["env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"]
        if preload:
            env.append(f"LD_PRELOAD={preload}")
        return ["chroot", self.root] + env + argv

    def run(self, argv, preload=None):
        return subprocess.run(self.command(argv, preload), capture_output=True,
                              text=True, timeout=120)


class ProbeResult:
    def __init__(self, returncode, malloc_from, maps, stderr):
        self.returncode = returncode
        self.malloc_from = malloc_from
        self.maps = maps
        self.stderr = stderr

    def mapped(self, suffix):
        """Mapped file paths (as /proc/PID/maps shows them) ending in suffix."""
        return sorted({line.split()[-1] for line in self.maps.splitlines()
                       if len(line.split()) >= 6 and line.split()[-1].endswith(suffix)})


def run_probe(rootfs, probe, preload=None):
    """Starts the probe, reads /proc/PID/maps while it runs, then ends it."""
    malloc_from, maps = None, ""
    with subprocess.Popen(rootfs.command([probe], preload),
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as proc:
        try:
            for line in proc.stdout:
                if line.startswith("malloc-from "):
                    malloc_from = line.split(" ", 1)[1].strip()
                if line.strip() == "ready":
                    # chroot and env exec the probe: the PID is the probe's.
                    with open(f"/proc/{proc.pid}/maps") as f:
                        maps = f.read()
                    break
            proc.stdin.close()
            stderr = proc.stderr.read()
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return ProbeResult(proc.returncode, malloc_from, maps, stderr)


def note(text):
    print("  " + text, file=sys.stderr, flush=True)


class GlibcBuilds(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.libraries = sorted(glob.glob(os.path.join(BUILD, "glibc", "lib*.so*[0-9]")))
        cls.old = Rootfs(OLD_ROOT)
        cls.new = Rootfs(MUSL_ROOT)
        cls.probes = {}
        cls.cxx_probes = {}
        for rootfs in (cls.old, cls.new):
            src = rootfs.copy_in(os.path.join(HERE, "malloc_probe.c"))
            probe = rootfs.inside + "/malloc_probe"
            cc = rootfs.run(["gcc", "-O2", "-pthread", "-o", probe, src, "-ldl"])
            if cc.returncode != 0:
                raise RuntimeError(f"gcc in {rootfs.root}: {cc.stderr}")
            cls.probes[rootfs.root] = probe
            src = rootfs.copy_in(os.path.join(HERE, "cxx_probe.cc"))
            probe = rootfs.inside + "/cxx_probe"
            cc = rootfs.run(["g++", "-std=c++17", "-O2", "-pthread", "-o", probe, src])
            if cc.returncode != 0:
                raise RuntimeError(f"g++ in {rootfs.root}: {cc.stderr}")
            cls.cxx_probes[rootfs.root] = probe

    @classmethod
    def tearDownClass(cls):
        cls.old.close()
        cls.new.close()

    def test_builds_present(self):
        names = {os.path.basename(p) for p in self.libraries}
        self.assertEqual(names, {"libjemalloc.so.2", "libmimalloc.so.2",
                                 "libtcmalloc_minimal.so.4"})
        # No C++ runtime or libgcc_s, so they load in images that lack
        # them (distroless base has neither).
        for lib in self.libraries:
            with self.subTest(library=lib):
                needed = set(manifest(lib)["needed"])
                self.assertFalse(needed & {"libstdc++.so.6", "libgcc_s.so.1"}, needed)

    def test_system_malloc_without_preload(self):
        # The probe tells libc's malloc from a preloaded one.
        result = run_probe(self.old, self.probes[self.old.root])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertRegex(result.malloc_from, r"/libc[-.]")

    def check_loads(self, rootfs):
        libc = rootfs.libc_version()
        for lib in self.libraries:
            name = os.path.basename(lib)
            with self.subTest(rootfs=rootfs.describe(), library=name):
                inside = rootfs.copy_in(lib, "glibc")
                echo = rootfs.run(["/bin/echo", "started"], preload=inside)
                self.assertEqual((echo.returncode, echo.stdout, echo.stderr),
                                 (0, "started\n", ""))
                # apt-cache is C++ (libstdc++): new and delete reach the
                # preloaded malloc and free.
                apt = rootfs.run(["apt-cache", "policy", "libc6"], preload=inside)
                self.assertEqual(apt.returncode, 0, apt.stderr)
                self.assertIn("Installed:", apt.stdout)
                cxx = rootfs.run([self.cxx_probes[rootfs.root]], preload=inside)
                self.assertEqual((cxx.returncode, cxx.stdout), (0, "caught 80\n"),
                                 cxx.stderr)
                result = run_probe(rootfs, self.probes[rootfs.root], preload=inside)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(result.malloc_from, inside)
                self.assertTrue(result.mapped(inside), result.maps)
                libc_maps = result.mapped("libc.so.6") + result.mapped(
                    "libc-" + libc.split()[1] + ".so")
                self.assertTrue(libc_maps, f"the rootfs' {libc} is not mapped")
                note(f"{rootfs.describe()}: {name} (requires "
                     f"{manifest(lib)['max_glibc_version']}) started /bin/echo, "
                     f"apt-cache and cxx_probe (threads, exceptions); malloc served by {result.malloc_from}; "
                     f"mapped {result.mapped(inside)[0]} beside {libc_maps[0]}")

    def test_loads_in_oldest_rootfs(self):
        self.check_loads(self.old)

    def test_loads_in_debian12(self):
        self.check_loads(self.new)


class DebianPackagesInOldestRootfs(unittest.TestCase):
    """Debian 12's own libraries: the failure the builds exist to avoid."""

    @classmethod
    def setUpClass(cls):
        cls.old = Rootfs(OLD_ROOT)
        cls.libraries = sorted(glob.glob(os.path.join(BUILD, "debian-*", "lib*.so*[0-9]")))

    @classmethod
    def tearDownClass(cls):
        cls.old.close()

    def test_fail_exactly_when_their_glibc_is_newer(self):
        have = glibc_tuple(self.old.libc_version())
        self.assertEqual(len(self.libraries), 3)
        for lib in self.libraries:
            need = manifest(lib)["max_glibc_version"]
            with self.subTest(library=lib):
                inside = self.old.copy_in(lib, "debian")
                echo = self.old.run(["/bin/echo", "started"], preload=inside)
                if glibc_tuple(need) > have:
                    self.assertNotEqual(echo.returncode, 0)
                    self.assertNotIn("started", echo.stdout)
                    self.assertIn(f"version `{need}' not found (required by {inside})",
                                  echo.stderr)
                    note(f"{self.old.describe()}: Debian 12 {os.path.basename(lib)} "
                         f"(requires {need}): exit {echo.returncode}, "
                         f"{echo.stderr.strip().splitlines()[-1]}")
                else:
                    self.assertEqual((echo.returncode, echo.stdout), (0, "started\n"),
                                     echo.stderr)
                    note(f"{self.old.describe()}: Debian 12 {os.path.basename(lib)} "
                         f"(requires {need}) loads")

    def test_debian12_jemalloc_fails_on_glibc_2_34(self):
        lib = [p for p in self.libraries if p.endswith("/libjemalloc.so.2")][0]
        inside = self.old.copy_in(lib, "debian-jemalloc")
        echo = self.old.run(["/bin/echo", "started"], preload=inside)
        self.assertEqual(echo.returncode, 1)
        self.assertIn("libc.so.6: version `GLIBC_2.34' not found "
                      f"(required by {inside})", echo.stderr)


class MuslBuilds(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rootfs = Rootfs(MUSL_ROOT)
        cls.libraries = sorted(glob.glob(os.path.join(BUILD, "musl", "lib*.so*[0-9]")))
        src = cls.rootfs.copy_in(os.path.join(HERE, "malloc_probe.c"))
        cls.probe = cls.rootfs.inside + "/malloc_probe-musl"
        cc = cls.rootfs.run(["musl-gcc", "-O2", "-o", cls.probe, src])
        if cc.returncode != 0:
            raise RuntimeError(f"musl-gcc: {cc.stderr}")

    @classmethod
    def tearDownClass(cls):
        cls.rootfs.close()

    def test_probe_is_musl_linked(self):
        result = run_probe(self.rootfs, self.probe)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue(result.mapped("ld-musl-x86_64.so.1") or result.mapped("musl/libc.so"),
                        result.maps)
        self.assertFalse(result.mapped("libc.so.6"), "a glibc is mapped")

    def test_builds_serve_malloc(self):
        names = {os.path.basename(p) for p in self.libraries}
        self.assertEqual(names, {"libjemalloc.so.2", "libmimalloc.so.2"})
        for lib in self.libraries:
            with self.subTest(library=lib):
                inside = self.rootfs.copy_in(lib, "musl")
                result = run_probe(self.rootfs, self.probe, preload=inside)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(result.malloc_from, inside)
                self.assertTrue(result.mapped(inside), result.maps)
                note(f"musl process: {os.path.basename(lib)} serves malloc "
                     f"({result.malloc_from}), mapped {result.mapped(inside)[0]}")


class WrongLibc(unittest.TestCase):
    """A build for the other libc stops the process from starting."""

    def test_glibc_build_in_musl_process(self):
        rootfs = Rootfs(MUSL_ROOT)
        try:
            src = rootfs.copy_in(os.path.join(HERE, "malloc_probe.c"))
            probe = rootfs.inside + "/malloc_probe-musl"
            self.assertEqual(rootfs.run(["musl-gcc", "-O2", "-o", probe, src]).returncode, 0)
            inside = rootfs.copy_in(os.path.join(BUILD, "glibc", "libjemalloc.so.2"))
            result = run_probe(rootfs, probe, preload=inside)
            self.assertNotEqual(result.returncode, 0)
            self.assertIsNone(result.malloc_from)
            note(f"musl process with the glibc jemalloc: exit {result.returncode}, "
                 f"{result.stderr.strip().splitlines()[0] if result.stderr.strip() else '(no message)'}")
        finally:
            rootfs.close()

    def test_musl_build_in_glibc_process(self):
        rootfs = Rootfs(OLD_ROOT)
        try:
            inside = rootfs.copy_in(os.path.join(BUILD, "musl", "libjemalloc.so.2"))
            echo = rootfs.run(["/bin/echo", "started"], preload=inside)
            self.assertNotEqual(echo.returncode, 0)
            self.assertNotIn("started", echo.stdout)
            note(f"{rootfs.describe()} with the musl jemalloc: exit {echo.returncode}, "
                 f"{echo.stderr.strip().splitlines()[0] if echo.stderr.strip() else '(no message)'}")
        finally:
            rootfs.close()


if __name__ == "__main__":
    why = missing_prerequisites()
    if why:
        print(f"SKIPPED: {why}")
        sys.exit(SKIP)
    print(f"allocator build: {BUILD}", file=sys.stderr)
    unittest.main(verbosity=2)
