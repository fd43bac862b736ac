# The allocguard image: the allocguard binary and the allocator libraries the
# operator's injection copies into governed pods, built from Debian's source
# packages for every libc (docs/allocators.md). A second target packs the
# demo workload (e2e/workloads/ratchet_service) for the end-to-end tests.
#
#   docker build -t allocguard .                                  # the operator image
#   docker build --target demo-workload -t ratchet-service .      # the demo workload
#
# Here (no Docker engine) e2e/images/allocguard.sh builds both with
#   buildah bud --pull=never --isolation=chroot --network=host --layers ...
# from locally bootstrapped debian:bookworm-slim and debian:bullseye-slim
# images (e2e/images/base.sh).

# Allocator stages: the libraries the injection copies into pods, compiled
# from Debian's source packages by allocators/build-in-image.sh (and the stats
# agent, allocators/stats_agent/build-agent.sh, in a layer after them), which runs
# the same allocators/build-in-chroot.sh as allocators/build.sh does on a host
# and writes the same manifests. They copy only the allocators/ files the
# build reads, so their layers stay cached until those files change (a C++
# change rebuilds nothing here).
#
# glibc builds: in the oldest Debian the mirror serves (bullseye, glibc
# 2.31; allocators/versions.sh GLIBC_BUILD_SUITE, which the script checks),
# so they load on that glibc and every newer one.
FROM debian:bullseye-slim AS allocators-glibc
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential dpkg-dev cmake autoconf automake libtool python3 \
 && rm -rf /var/lib/apt/lists/*
COPY allocators/versions.sh allocators/build-in-chroot.sh allocators/build-in-image.sh \
     allocators/write-manifest.sh allocators/elf_manifest.py allocators/glibc_compat.h \
     /usr/local/share/allocguard/allocators/
RUN /usr/local/share/allocguard/allocators/build-in-image.sh glibc /out
# The stats agent (allocators/stats_agent/build-agent.sh), in a layer of its
# own: a change to the agent rebuilds only this step.
COPY allocators/stats_agent/build-agent.sh allocators/stats_agent/stats_agent.c \
     allocators/stats_agent/allocator_books.h \
     /usr/local/share/allocguard/allocators/stats_agent/
RUN /usr/local/share/allocguard/allocators/stats_agent/build-agent.sh install glibc /out

# musl builds: Debian 12's musl toolchain (musl-gcc); jemalloc and mimalloc.
FROM debian:bookworm-slim AS allocators-musl
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential dpkg-dev cmake musl-tools python3 \
 && rm -rf /var/lib/apt/lists/*
COPY allocators/versions.sh allocators/build-in-chroot.sh allocators/build-in-image.sh \
     allocators/write-manifest.sh allocators/elf_manifest.py allocators/glibc_compat.h \
     /usr/local/share/allocguard/allocators/
RUN /usr/local/share/allocguard/allocators/build-in-image.sh musl /out
COPY allocators/stats_agent/build-agent.sh allocators/stats_agent/stats_agent.c \
     allocators/stats_agent/allocator_books.h \
     /usr/local/share/allocguard/allocators/stats_agent/
RUN /usr/local/share/allocguard/allocators/stats_agent/build-agent.sh install musl /out

# Build stage: Debian 12 with the packages scripts/install-deps.sh lists. The
# compiler cache lives in a cache mount, so a rebuild after a small change
# recompiles only what changed (BuildKit and buildah both keep cache mounts
# between builds on the same machine). The cache is keyed by content, not by
# path (base dir /src, directory not hashed) and the build directory sits two
# levels below the source like scripts/test.sh's build/release, and the
# locale variables ccache hashes are the ones scripts/test.sh builds with, so
# a cache shared with the host's build (e2e/images/allocguard.sh passes
# CCACHE_DIR and mounts the host's cache there) serves the same objects to both.
FROM debian:bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config ccache \
      libcpp-httplib-dev nlohmann-json3-dev libssl-dev libspdlog-dev libfmt-dev \
      libgtest-dev libgmock-dev libyaml-cpp-dev libcli11-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
ARG CCACHE_DIR=/ccache
RUN --mount=type=cache,target=/ccache \
    export CCACHE_DIR="$CCACHE_DIR" CCACHE_BASEDIR=/src CCACHE_NOHASHDIR=true \
      LANG=C.UTF-8 LC_ALL=C.UTF-8 \
 && cmake -S . -B /src/build/image -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DBUILD_TESTING=OFF -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
 && cmake --build /src/build/image --target allocguard ratchet_service \
 && { ccache --show-stats | grep -E '^ *(Hits|Misses):' || true; } \
 && mkdir /build \
 && strip -o /build/allocguard /src/build/image/operator/cli/allocguard \
 && strip -o /build/ratchet_service /src/build/image/e2e/workloads/ratchet_service

# The shared libraries both images run with.
FROM debian:bookworm-slim AS runtime-base
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libcpp-httplib0.11 libssl3 libspdlog1.10 libfmt9 libyaml-cpp0.7 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc /usr/share/man

# The demo workload: an HTTP service whose memory floor ratchets under glibc
# with a large node's arena limit (e2e/workloads/README.md). Dynamically linked
# against glibc, so an injected LD_PRELOAD takes effect. It also carries
# Debian 12's own jemalloc package (/usr/lib/x86_64-linux-gnu/libjemalloc.so.2):
# the end-to-end tests inject it into a Debian 11 workload to show the failure
# the allocator builds above avoid (it requires GLIBC_2.34).
FROM runtime-base AS demo-workload
RUN apt-get update \
 && apt-get install -y --no-install-recommends libjemalloc2 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc /usr/share/man
COPY --from=build /build/ratchet_service /usr/local/bin/ratchet_service
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/ratchet_service", "--host", "0.0.0.0", "--port", "8080"]

# The operator image (the default target): allocguard runs as the operator,
# the canary driver, the injection init container and the guard sidecar.
# The allocator libraries and the stats agent sit at a fixed layout the
# operator relies on:
#   /opt/allocguard/lib/glibc/{libjemalloc.so.2,libmimalloc.so.2,libtcmalloc_minimal.so.4,
#                              liballocguard_stats.so}
#   /opt/allocguard/lib/musl/{libjemalloc.so.2,libmimalloc.so.2,liballocguard_stats.so}
# each with its <library>.json manifest beside it, nothing else.
FROM runtime-base
# The release, from the repository's VERSION file (e2e/images/allocguard.sh
# passes it; "unknown" when a build does not).
ARG VERSION=unknown
LABEL org.opencontainers.image.title="allocguard" \
      org.opencontainers.image.description="Kubernetes operator that keeps native workloads on memory allocators that give memory back" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=allocators-glibc /out/ /opt/allocguard/lib/glibc/
COPY --from=allocators-musl /out/ /opt/allocguard/lib/musl/
COPY --from=build /build/allocguard /usr/local/bin/allocguard
ENV ALLOCGUARD_ALLOCATOR_DIR=/opt/allocguard/lib
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/allocguard"]
