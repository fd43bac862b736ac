"""What the allocator tests that run in allocators/build.sh's chroots share:
the check that they can run (root, a finished allocator build, the build
root filesystems) and a build root filesystem with a scratch directory."""

import os
import shutil
import subprocess
import tempfile


def missing(build, roots):
    """Why the test cannot run (a sentence), or None when it can."""
    if os.geteuid() != 0:
        return "needs root (chroot)"
    if not os.path.exists(os.path.join(build, ".complete")):
        return f"no allocator build at {build}; run allocators/build.sh"
    for root in roots:
        if not os.path.exists(os.path.join(root, ".allocguard-ready")):
            return f"no build rootfs at {root}; run allocators/build.sh"
    return None


class Rootfs:
    """A Debian rootfs with a scratch directory for one test run, under its
    /tmp (`inside` is the scratch directory as the chroot sees it)."""

    def __init__(self, root, prefix):
        self.root = root
        self.scratch = tempfile.mkdtemp(prefix=prefix, dir=os.path.join(root, "tmp"))
        os.chmod(self.scratch, 0o755)
        self.inside = "/tmp/" + os.path.basename(self.scratch)

    def close(self):
        shutil.rmtree(self.scratch, ignore_errors=True)

    def debian_version(self):
        with open(os.path.join(self.root, "etc/debian_version")) as f:
            return f.read().strip()

    def glibc_version(self):
        """'2.31', from the rootfs' own libc6 package."""
        out = subprocess.run(["chroot", self.root, "dpkg-query", "-W", "-f=${Version}", "libc6"],
                             capture_output=True, text=True, check=True, timeout=120).stdout
        return out.split("-")[0]

    def copy_in(self, path, subdir=""):
        """Copies a file into the scratch dir; returns its path inside."""
        d = os.path.join(self.scratch, subdir)
        os.makedirs(d, exist_ok=True)
        shutil.copy(path, d)
        return os.path.join(self.inside, subdir, os.path.basename(path))
