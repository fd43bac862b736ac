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
# TERM all at once, KILL what is left after 3 s: the state is thrown away, so
# a graceful apiserver shutdown (which can take 10 s and more) buys nothing.
pids=()
for name in kube-scheduler kube-controller-manager kube-apiserver etcd; do
  f=$dir/$name.pid
  [[ -f $f ]] || continue
  pid=$(cat "$f")
  kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
  rm -f "$f"
done
for ((i = 0; i < 12 && ${#pids[@]}; i++)); do
  alive=()
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
  pids=(${alive[@]+"${alive[@]}"})
  ((${#pids[@]})) && sleep 0.25
done
for pid in ${pids[@]+"${pids[@]}"}; do kill -KILL "$pid" 2>/dev/null; done
if [[ ${ALLOCGUARD_KEEP_CLUSTER_LOGS:-} ]]; then
  rm -rf "$dir/etcd-data" "$dir/env"
else
  rm -rf "$dir"
fi
echo "control plane down"
