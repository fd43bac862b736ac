#!/usr/bin/env python3
"""elf_manifest.py reads the glibc a library requires from the file, and
glibc_compat.h keeps libm calls off glibc 2.29's symbol versions.

Builds two tiny shared libraries with the machine's gcc: one calling exp()
and log() plainly, one with glibc_compat.h force-included. On a glibc >= 2.29
(Debian 12 has 2.36) the first requires GLIBC_2.29 for exactly those two
symbols, the second does not."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ALLOCATORS = os.path.dirname(HERE)

SOURCE = r"""
#include <math.h>
#include <stdlib.h>
double Sample(double u) { return exp(log(u) * 0.5); }
void* Grab(size_t n) { return malloc(n); }
"""


def manifest(lib):
    out = subprocess.run(
        [sys.executable, os.path.join(ALLOCATORS, "elf_manifest.py"), lib,
         "--allocator", "test", "--libc", "glibc", "--source-package", "test",
         "--source-version", "1", "--built-in", "host"],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)


@unittest.skipUnless(shutil.which("gcc") and shutil.which("readelf"),
                     "needs gcc and binutils")
class ElfManifestTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.src = os.path.join(self.dir, "sample.c")
        with open(self.src, "w") as f:
            f.write(SOURCE)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def build(self, name, *flags):
        lib = os.path.join(self.dir, name)
        subprocess.run(["gcc", "-O2", "-fPIC", "-shared", *flags, "-o", lib,
                        self.src, "-Wl,-soname," + name, "-lm"], check=True)
        return lib

    def test_plain_build_requires_glibc_2_29_for_exp_and_log(self):
        m = manifest(self.build("libplain.so.1"))
        self.assertEqual(m["max_glibc_version"], "GLIBC_2.29")
        self.assertEqual(m["max_glibc_symbols"], ["exp", "log"])
        self.assertEqual(m["soname"], "libplain.so.1")
        self.assertIn("libm.so.6", m["needed"])
        self.assertIn("GLIBC_2.29", m["required_versions"]["libm.so.6"])

    def test_compat_header_binds_the_old_versions(self):
        m = manifest(self.build("libcompat.so.1", "-include",
                                os.path.join(ALLOCATORS, "glibc_compat.h")))
        self.assertEqual(m["required_versions"]["libm.so.6"], ["GLIBC_2.2.5"])
        self.assertLess(tuple(int(n) for n in m["max_glibc_version"][6:].split(".")),
                        (2, 29))


class ObjdumpFormatsTest(unittest.TestCase):
    """The symbols needing a version are read from both objdump layouts:
    binutils 2.40 (Debian 12) puts the version in parentheses, 2.35
    (Debian 11, where the image's glibc stage writes its manifests) does not."""

    DEBIAN12 = """
DYNAMIC SYMBOL TABLE:
0000000000000000      DF *UND*\t0000000000000000 (GLIBC_2.17) clock_gettime
0000000000000000      DF *UND*\t0000000000000000 (GLIBC_2.2.5) free
0000000000001234 g    DF .text\t0000000000000010  Base        malloc
"""
    DEBIAN11 = """
DYNAMIC SYMBOL TABLE:
0000000000000000      DF *UND*\t0000000000000000  GLIBC_2.17  clock_gettime
0000000000000000      DF *UND*\t0000000000000000  GLIBC_2.2.5 free
0000000000001234 g    DF .text\t0000000000000010  Base        malloc
"""

    def symbols(self, objdump_output):
        sys.path.insert(0, ALLOCATORS)
        import elf_manifest
        saved = elf_manifest.run
        elf_manifest.run = lambda *argv: objdump_output
        try:
            return elf_manifest.symbols_requiring("lib.so", "GLIBC_2.17")
        finally:
            elf_manifest.run = saved

    def test_both_layouts_name_the_same_symbols(self):
        self.assertEqual(self.symbols(self.DEBIAN12), ["clock_gettime"])
        self.assertEqual(self.symbols(self.DEBIAN11), ["clock_gettime"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
