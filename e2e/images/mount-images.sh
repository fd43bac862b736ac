# Sourced by the scripts that look inside built images (check-allocguard.sh,
# libc-demo-preload.sh): mount_image IMAGE prints the root filesystem of a
# fresh buildah container of IMAGE; unmount_images removes every container
# mount_image made. Sets $tmp, a scratch directory unmount_images deletes.
tmp=$(mktemp -d)
mount_image() {  # image: prints the mounted root filesystem
  local c
  c=$(buildah from --pull=never "$1")
  # mount_image runs in command substitutions (subshells): the containers
  # it made are listed in a file, not a variable.
  echo "$c" >>"$tmp/containers"
  buildah mount "$c"
}
unmount_images() {
  local c
  for c in $(cat "$tmp/containers" 2>/dev/null); do
    buildah umount "$c" >/dev/null 2>&1 || true
    buildah rm "$c" >/dev/null 2>&1 || true
  done
  [[ -n ${tmp:-} ]] && rm -rf "$tmp"
}
