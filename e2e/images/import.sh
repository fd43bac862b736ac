#!/usr/bin/env bash
# Imports images into the node cluster's containerd (namespace k8s.io, the
# only one the kubelet sees), so pods can use them with imagePullPolicy Never
# or IfNotPresent. No registry is involved.
#
#   e2e/images/import.sh ARCHIVE...            # docker-archive or OCI tarballs
#   e2e/images/import.sh --buildah IMAGE...    # images in buildah's storage
#
# An archive must carry its name (buildah push IMG docker-archive:F:IMG);
# without one containerd names it import-<date>. The pod's image: must equal
# the imported name after normalisation (foo:tag = docker.io/library/foo:tag).
# The socket comes from ALLOCGUARD_CONTAINERD_ADDRESS, else from
# $ALLOCGUARD_CLUSTER_DIR/env (written by e2e/cluster/up.sh --with-node).
set -euo pipefail
sock=${ALLOCGUARD_CONTAINERD_ADDRESS:-}
if [[ -z $sock ]]; then
  env_file=${ALLOCGUARD_CLUSTER_DIR:-/tmp/allocguard-cluster}/env
  [[ -f $env_file ]] && sock=$(sed -n 's/^export ALLOCGUARD_CONTAINERD_ADDRESS=//p' "$env_file")
fi
if [[ -z $sock || ! -S $sock ]]; then
  echo "import.sh: no node containerd (start one with e2e/cluster/up.sh --with-node)" >&2
  exit 1
fi
ctr_() { ctr --address "$sock" --namespace k8s.io "$@"; }

from_buildah=0
if [[ ${1:-} == --buildah ]]; then from_buildah=1; shift; fi
(($#)) || { echo "usage: import.sh ARCHIVE... | --buildah IMAGE..." >&2; exit 2; }

for a in "$@"; do
  t0=$(date +%s.%N)
  if ((from_buildah)); then
    tmp=$(mktemp --suffix=.tar)
    rm -f "$tmp"
    buildah push --quiet "$a" "docker-archive:$tmp:$a"
    ctr_ images import "$tmp" >/dev/null
    rm -f "$tmp"
  else
    ctr_ images import "$a" >/dev/null
  fi
  awk -v a="$a" -v t0="$t0" -v t1="$(date +%s.%N)" \
    'BEGIN { printf "import.sh: %s in %.1f s\n", a, t1 - t0 }' >&2
done
