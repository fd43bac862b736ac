"""What the allocator tests that run in build.sh's chroots need before they
can run: root, a finished allocator build and the build root filesystems."""

import os


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
