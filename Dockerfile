# The allocguard image: the allocguard binary and the allocator libraries the
# operator's injection copies into governed pods.
#
#   docker build -t allocguard .
#
# Build stage: Debian 12 with the packages scripts/install-deps.sh lists.
FROM debian:bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      libcpp-httplib-dev nlohmann-json3-dev libssl-dev libspdlog-dev libfmt-dev \
      libgtest-dev libgmock-dev libyaml-cpp-dev libcli11-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF \
 && cmake --build /build --target allocguard \
 && strip /build/operator/cli/allocguard

# Runtime stage: the binary, its shared libraries, and the allocators at a
# fixed path (/opt/allocguard/lib) for the injection init container to copy.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libcpp-httplib0.11 libssl3 libspdlog1.10 libfmt9 libyaml-cpp0.7 \
      libjemalloc2 libmimalloc2.0 libtcmalloc-minimal4 \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /opt/allocguard/lib \
 && cp -L /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \
          /usr/lib/x86_64-linux-gnu/libmimalloc.so.2 \
          /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 /opt/allocguard/lib/
COPY --from=build /build/operator/cli/allocguard /usr/local/bin/allocguard
ENV ALLOCGUARD_ALLOCATOR_DIR=/opt/allocguard/lib
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/allocguard"]
