# What allocators/build.sh builds, and where the results live. Sourced by
# build.sh and by the tests, so both compute the same cache path.
#
# Sources are Debian's own source packages, pinned by version: the same
# jemalloc, mimalloc and gperftools the Debian 12 system libraries are built
# from, so an injected library behaves like the one users know. A stable
# point release that replaces a version makes `apt-get source` fail with a
# clear message; bump the version here then.
#
# Bump ALLOCATORS_REVISION whenever build.sh changes what it produces (flags,
# configure options): the output directory is keyed by it.
ALLOCATORS_REVISION=${ALLOCATORS_REVISION:-1}

# The suite whose source packages are built.
SOURCE_SUITE=${SOURCE_SUITE:-bookworm}
JEMALLOC_SOURCE_VERSION=5.3.0-1
MIMALLOC_SOURCE_VERSION=2.0.9+ds-2
GPERFTOOLS_SOURCE_VERSION=2.10-1  # source package google-perftools

# glibc builds are compiled in the oldest suite the package mirror serves:
# a library only requires the glibc symbol versions of the glibc it was
# linked against, so the oldest glibc gives the widest compatibility.
# bullseye (Debian 11, glibc 2.31) is the oldest deb.debian.org still serves;
# buster and older moved to the archive.
GLIBC_BUILD_SUITE=${GLIBC_BUILD_SUITE:-bullseye}
# musl builds use Debian's musl toolchain (musl-tools: the musl-gcc wrapper).
MUSL_BUILD_SUITE=${MUSL_BUILD_SUITE:-bookworm}

ALLOCGUARD_CACHE=${ALLOCGUARD_CACHE:-/var/cache/allocguard}
ALLOCATORS_CACHE=$ALLOCGUARD_CACHE/allocators

# The build chroots (debootstrap --variant=buildd), kept for later builds
# and for the tests, which run processes inside them.
# Bump ROOTFS_REVISION when the packages build.sh installs into them change.
ROOTFS_REVISION=${ROOTFS_REVISION:-1}
allocators_rootfs() { echo "$ALLOCATORS_CACHE/rootfs/$1-build-r$ROOTFS_REVISION"; }

# The output directory: <dir>/glibc/lib*.so* and <dir>/musl/lib*.so*, each
# library with a <library>.json manifest beside it.
allocators_key() {
  echo "glibc-$GLIBC_BUILD_SUITE.musl-$MUSL_BUILD_SUITE.jemalloc-$JEMALLOC_SOURCE_VERSION.mimalloc-$MIMALLOC_SOURCE_VERSION.gperftools-$GPERFTOOLS_SOURCE_VERSION.r$ALLOCATORS_REVISION"
}
allocators_dir() { echo "$ALLOCATORS_CACHE/$(allocators_key)"; }
