#!/usr/bin/env bash
# Stops what e2e/cluster/up.sh started (by the pids it recorded) and removes
# its state directory. Safe to run when nothing is running.
# With a node (up.sh --with-node) it first kills the pods' processes, stops
# the kubelet and containerd, unmounts, and removes the interfaces, kubepods
# cgroups and runtime state, so up.sh --with-node can run again at once.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${ALLOCGUARD_CLUSTER_DIR:-/tmp/allocguard-cluster}
if [[ -f $dir/node || $(cat /run/allocguard-node/owner 2>/dev/null) == "$dir" ]]; then
  source "$here/node.sh"
  node_down "$dir"
  echo "node down"
fi
[[ -d $dir ]] || exit 0
for name in kube-scheduler kube-controller-manager kube-apiserver etcd; do
  f=$dir/$name.pid
  [[ -f $f ]] || continue
  pid=$(cat "$f")
  if kill -TERM "$pid" 2>/dev/null; then
    for ((i = 0; i < 40; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.25
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
done
if [[ ${ALLOCGUARD_KEEP_CLUSTER_LOGS:-} ]]; then
  rm -rf "$dir/etcd-data" "$dir/env"
else
  rm -rf "$dir"
fi
echo "control plane down"
