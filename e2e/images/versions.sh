# Names and cache keys of the images e2e/images/base.sh builds. Sourced by the
# scripts in e2e/images and e2e/cluster.
#
# Bump IMAGES_REVISION whenever base.sh or pause.c changes what it produces:
# the cached archives are keyed by it, so the next run rebuilds them.
IMAGES_REVISION=${IMAGES_REVISION:-1}
DEBIAN_SUITE=${DEBIAN_SUITE:-bookworm}

ALLOCGUARD_CACHE=${ALLOCGUARD_CACHE:-/var/cache/allocguard}
IMAGES_CACHE=$ALLOCGUARD_CACHE/images

# containerd's sandbox_image (e2e/cluster/up.sh) must equal this name exactly:
# nothing can be pulled, so any other name leaves every pod without a sandbox.
PAUSE_IMAGE=registry.k8s.io/pause:3.10
PAUSE_ARCHIVE=$IMAGES_CACHE/pause-r$IMAGES_REVISION.tar

# base_image SUITE / base_archive SUITE: the Debian image's name and archive.
base_image() { echo "docker.io/library/debian:$1-slim"; }
base_archive() { echo "$IMAGES_CACHE/debian-$1-slim-r$IMAGES_REVISION.tar"; }
