#!/usr/bin/env python3
"""The libc "auto" preload path against real loaders: glibc's and musl's.

`allocguard install-allocator` lays a pod's library volume out as
operator/admission/library_layout.h describes, and libc auto preloads
<mount>/$LIB/<lib>. This test builds stand-in allocator libraries (a
constructor that names the build it belongs to) for glibc with cc and for
musl with musl-gcc, installs them with the real command, and runs a glibc
program and a musl program with each LD_PRELOAD allocguard can write. It
checks what a user would see: which build each process loaded, that a
missing build leaves the process running on its own malloc, and that a
build for the other libc stops a glibc process before main.

    libc_preload_test.py ALLOCGUARD_BINARY

Needs cc and musl-gcc (musl-tools; scripts/install-deps.sh installs it).
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ALLOCGUARD = None

MARK = r'''
#include <stdio.h>
__attribute__((constructor)) static void mark(void) { fputs("loaded " WHO " build\n", stderr); }
'''

PROBE = r'''
#include <stdio.h>
#include <stdlib.h>
int main(void) { free(malloc(64)); puts("probe ran"); return 0; }
'''


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=60, **kw)


class LibcPreloadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="allocguard-libc-")
        d = cls.dir
        image = os.path.join(d, "image")
        for libc in ("glibc", "musl"):
            os.makedirs(os.path.join(image, libc))
        with open(os.path.join(d, "mark.c"), "w") as f:
            f.write(MARK)
        with open(os.path.join(d, "probe.c"), "w") as f:
            f.write(PROBE)
        def cc(compiler, *args):
            r = run([compiler, *args])
            if r.returncode != 0:
                raise RuntimeError(f"{compiler} {' '.join(args)}: {r.stderr}")
        # jemalloc has both builds, tcmalloc only the glibc one, as in the image.
        cc("cc", "-shared", "-fPIC", '-DWHO="glibc"', "-o",
           os.path.join(image, "glibc", "libjemalloc.so.2"), os.path.join(d, "mark.c"))
        cc("musl-gcc", "-shared", "-fPIC", '-DWHO="musl"', "-o",
           os.path.join(image, "musl", "libjemalloc.so.2"), os.path.join(d, "mark.c"))
        cc("cc", "-shared", "-fPIC", '-DWHO="glibc tcmalloc"', "-o",
           os.path.join(image, "glibc", "libtcmalloc_minimal.so.4"), os.path.join(d, "mark.c"))
        cc("cc", "-o", os.path.join(d, "probe-glibc"), os.path.join(d, "probe.c"))
        cc("musl-gcc", "-o", os.path.join(d, "probe-musl"), os.path.join(d, "probe.c"))
        cls.mount = os.path.join(d, "inject")
        for lib in ("libjemalloc.so.2", "libtcmalloc_minimal.so.4"):
            r = run([ALLOCGUARD, "install-allocator", "--from", image, "--to", cls.mount, lib])
            if r.returncode != 0:
                raise RuntimeError(f"install-allocator {lib}: {r.stdout}{r.stderr}")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def probe(self, libc, preload):
        return run([os.path.join(self.dir, "probe-" + libc)],
                   env={"PATH": "/usr/bin:/bin", "LD_PRELOAD": preload})

    def auto(self, lib):
        return os.path.join(self.mount, "$LIB", lib)

    def test_auto_gives_each_loader_its_own_build(self):
        for libc in ("glibc", "musl"):
            with self.subTest(libc=libc):
                r = self.probe(libc, self.auto("libjemalloc.so.2"))
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("probe ran", r.stdout)
                self.assertIn(f"loaded {libc} build", r.stderr)

    def test_forced_libc_preloads_that_build(self):
        for libc in ("glibc", "musl"):
            with self.subTest(libc=libc):
                r = self.probe(libc, os.path.join(self.mount, libc, "libjemalloc.so.2"))
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(f"loaded {libc} build", r.stderr)

    def test_musl_process_without_a_musl_build_keeps_its_own_malloc(self):
        # tcmalloc has no musl build: musl's loader finds no file under $LIB
        # and skips the entry; the process runs, on musl's malloc.
        r = self.probe("musl", self.auto("libtcmalloc_minimal.so.4"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("probe ran", r.stdout)
        self.assertNotIn("loaded", r.stderr)
        r = self.probe("glibc", self.auto("libtcmalloc_minimal.so.4"))
        self.assertIn("loaded glibc tcmalloc build", r.stderr)

    def test_musl_build_stops_a_glibc_process(self):
        # The failure the circuit breaker exists for: the wrong libc's build
        # forced on a process. glibc's loader refuses it before main.
        r = self.probe("glibc", os.path.join(self.mount, "musl", "libjemalloc.so.2"))
        self.assertNotEqual(r.returncode, 0)
        self.assertNotIn("probe ran", r.stdout)
        self.assertIn("error while loading shared libraries", r.stderr)

    def test_layout_links_resolve_inside_the_volume(self):
        for rel in ("lib/x86_64-linux-gnu", "lib64", "lib"):
            link = os.path.join(self.mount, rel, "libjemalloc.so.2")
            self.assertTrue(os.path.islink(link), link)
            self.assertFalse(os.path.isabs(os.readlink(link)), "a link must stay inside the volume")
            self.assertEqual(os.path.realpath(link),
                             os.path.join(os.path.realpath(self.mount), "glibc", "libjemalloc.so.2"))
        self.assertFalse(os.path.exists(self.auto("libtcmalloc_minimal.so.4")))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: libc_preload_test.py ALLOCGUARD_BINARY")
    ALLOCGUARD = sys.argv.pop(1)
    unittest.main()
