#!/usr/bin/env bash
# Builds, without Docker or a registry, the two images every node-tier pod
# starts from, and caches them as docker-archive tarballs:
#
#   docker.io/library/debian:<suite>-slim   Debian from the machine's apt mirror
#                                           (debootstrap --variant=minbase, slimmed)
#   registry.k8s.io/pause:3.10              a static pause binary, FROM scratch
#                                           (containerd's sandbox_image)
#
#   e2e/images/base.sh                   # bookworm (Debian 12) and pause
#   e2e/images/base.sh --suite bullseye  # another suite (repeatable)
#
# Archives live in $ALLOCGUARD_CACHE/images (default /var/cache/allocguard/images),
# keyed by suite and IMAGES_REVISION (versions.sh), so later runs take a second.
# Each image is also put into buildah's local storage (/var/lib/containers),
# so `buildah bud --pull=never` finds `FROM debian:bookworm-slim` there. An
# image already in that storage is exported, never rebuilt, so its ID (and
# every layer cache built on it) stays the same.
# Prints the archive paths, one per line, on stdout; progress goes to stderr.
#
# Needs root and: buildah debootstrap gcc (scripts/install-deps.sh --node).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/versions.sh"

suites=()
while (($#)); do
  case $1 in
    --suite) suites+=("$2"); shift 2 ;;
    *) echo "base.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
((${#suites[@]})) || suites=("$DEBIAN_SUITE")

for tool in buildah debootstrap gcc; do
  command -v $tool >/dev/null || {
    echo "base.sh: $tool is missing; run scripts/install-deps.sh --node" >&2
    exit 1
  }
done
mkdir -p "$IMAGES_CACHE"
log() { echo "base.sh: $*" >&2; }
# One run at a time (up.sh --with-node and image builds may call this
# together): a second run waits, then finds the images made.
exec 9>"$IMAGES_CACHE/.base.lock"
flock 9

in_storage() { buildah inspect --type image "$1" >/dev/null 2>&1; }

# ensure_in_storage NAME ARCHIVE: load a cached archive into buildah's storage.
ensure_in_storage() {
  in_storage "$1" && return 0
  buildah pull --quiet "docker-archive:$2" >/dev/null
  in_storage "$1" || buildah tag "$(buildah pull --quiet "docker-archive:$2")" "$1"
}

# The apt mirror the machine itself uses (deb822 or one-line format).
machine_mirror() {
  local m
  m=$(awk '/^URIs:/ && $2 ~ /\/debian\/?$/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [[ $m ]] || m=$(awk '$1 == "deb" && $2 ~ /\/debian\/?$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  echo "${m:-http://deb.debian.org/debian}"
}

build_pause() {
  local t0=$SECONDS work c
  work=$(mktemp -d)
  gcc -Os -static -Wall -Werror -o "$work/pause" "$here/pause.c"
  strip "$work/pause"
  c=$(buildah from scratch)
  buildah copy --quiet "$c" "$work/pause" /pause >/dev/null
  buildah config --entrypoint '["/pause"]' --user 65535:65535 "$c"
  buildah commit --quiet --rm --format docker "$c" "$PAUSE_IMAGE" >/dev/null
  buildah push --quiet "$PAUSE_IMAGE" "docker-archive:$PAUSE_ARCHIVE.tmp:$PAUSE_IMAGE"
  mv "$PAUSE_ARCHIVE.tmp" "$PAUSE_ARCHIVE"
  rm -rf "$work"
  log "built $PAUSE_IMAGE in $((SECONDS - t0)) s"
}

build_debian() {  # suite
  local suite=$1 name archive mirror c m t0=$SECONDS
  name=$(base_image "$suite")
  archive=$(base_archive "$suite")
  mirror=$(machine_mirror)
  log "debootstrap --variant=minbase $suite from $mirror (about a minute)"
  c=$(buildah from scratch)
  m=$(buildah mount "$c")
  if ! debootstrap --variant=minbase "$suite" "$m" "$mirror" >"$IMAGES_CACHE/debootstrap-$suite.log" 2>&1; then
    tail -n 20 "$IMAGES_CACHE/debootstrap-$suite.log" >&2
    buildah umount "$c" >/dev/null; buildah rm "$c" >/dev/null
    echo "base.sh: debootstrap $suite failed (log: $IMAGES_CACHE/debootstrap-$suite.log)" >&2
    exit 1
  fi
  # Same apt sources as the machine (so apt inside a build reaches the same
  # mirror), and the slimming the official -slim images do.
  cat >"$m/etc/apt/sources.list.d/debian.sources" <<SRC
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror%/debian}/debian-security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  rm -f "$m/etc/apt/sources.list"
  cat >"$m/etc/dpkg/dpkg.cfg.d/docker-slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
CFG
  echo 'APT::Install-Recommends "false";' >"$m/etc/apt/apt.conf.d/docker-no-recommends"
  find "$m/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
  find "$m/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
  rm -rf "$m"/usr/share/{man,info,groff,lintian,linda}/* "$m"/usr/share/locale/* \
    "$m"/var/cache/apt/*.bin "$m"/var/cache/apt/archives/*.deb "$m"/var/lib/apt/lists/* \
    "$m"/var/log/*.log "$m"/var/log/apt/* "$m"/tmp/* "$m"/root/.bash_history \
    "$m"/var/cache/debconf/*-old "$m"/var/lib/dpkg/*-old
  : >"$m/etc/hostname"
  : >"$m/etc/resolv.conf"  # the runtime bind-mounts its own
  buildah umount "$c" >/dev/null
  buildah config --cmd '["bash"]' \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$c"
  buildah commit --quiet --rm --format docker "$c" "$name" >/dev/null
  buildah push --quiet "$name" "docker-archive:$archive.tmp:$name"
  mv "$archive.tmp" "$archive"
  log "built $name in $((SECONDS - t0)) s ($(du -m "$archive" | cut -f1) MB archive)"
}

# ensure NAME ARCHIVE BUILD...: the archive exists and the image is in
# buildah's storage. An image already in storage is exported, not rebuilt:
# a rebuild gets a new image ID, which would void every `buildah bud --layers`
# cache built on it.
ensure() {
  local name=$1 archive=$2
  shift 2
  if [[ ! -s $archive ]]; then
    if in_storage "$name"; then
      buildah push --quiet "$name" "docker-archive:$archive.tmp:$name"
      mv "$archive.tmp" "$archive"
    else
      "$@"
    fi
  fi
  ensure_in_storage "$name" "$archive"
  echo "$archive"
}

ensure "$PAUSE_IMAGE" "$PAUSE_ARCHIVE" build_pause
for suite in "${suites[@]}"; do
  ensure "$(base_image "$suite")" "$(base_archive "$suite")" build_debian "$suite"
done
